//! Command-line interface: the TUI by default, and a headless form of every capability.

use crate::roofline;
use crate::suite::{PhaseFilter, Suite, Workspace};
use clap::{Parser, Subcommand};
use serde_json::json;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "atrex-tui",
    version,
    about = "A terminal workbench for GPU kernel engineering"
)]
pub struct Cli {
    /// The workspace directory (suite edits, accepted kernels, sessions). Default: the current
    /// directory when it has problems/, else the user's data directory.
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Continue a recorded session (its incumbents and history are restored; new events are
    /// appended to it).
    #[arg(long, value_name = "FILE")]
    pub resume: Option<PathBuf>,

    /// Settings file (default: config.toml in the user's config directory, atrex-tui/).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the operators in descending importance weight, optionally with every shape's W, Q
    /// and speed-of-light time.
    Suite {
        /// Hardware profile for SOL times (a key of problems/hardware/).
        #[arg(long, default_value = "H200")]
        hardware: String,
        /// Phase view: weights renormalized over the operators of that phase.
        #[arg(long, value_enum, default_value_t = PhaseFilter::All)]
        phase: PhaseFilter,
        /// Show each shape's parameters, W, Q, SOL time and bottleneck.
        #[arg(long)]
        shapes: bool,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Compare problems/ with an Atrex-Bench checkout; with --write, update shapes, weights and
    /// production timings in the workspace's problems/.
    ImportAtrexBench {
        /// The checkout (holds data/ and configs/).
        dir: PathBuf,
        /// Update the workspace's problems/ (shapes, weights, production timings) where they differ.
        #[arg(long)]
        write: bool,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// What this machine offers: GPUs, NVRTC, ncu, LLM endpoint, terminal colours.
    Doctor {
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Compile, check and time a kernel for an operator on the GPU (default: its baseline.cu).
    Bench {
        /// Operator name or id.
        op: String,
        /// The candidate kernel file (default: problems/OP/baseline.cu).
        #[arg(long, value_name = "FILE")]
        kernel: Option<PathBuf>,
        /// Shape ids to run (default: all).
        #[arg(long = "shape", value_name = "ID")]
        shapes: Vec<u32>,
        /// 1 seed and short timing (≥ 10 samples / 100 ms), labelled quick.
        #[arg(long, conflicts_with = "full")]
        quick: bool,
        /// 5 seeds and adaptive timing to 0.5 % noise (the default).
        #[arg(long)]
        full: bool,
        /// Hardware profile for T_SOL (default: the one matching the GPU).
        #[arg(long)]
        hardware: Option<String>,
        /// GPU index (default: every GPU, shapes spread over them).
        #[arg(long)]
        device: Option<u32>,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check that a kernel compiles (NVRTC, launch plan), on a GPU or, without one, for --arch.
    Compile {
        /// Operator name or id.
        op: String,
        /// The kernel file (default: problems/OP/baseline.cu).
        #[arg(long, value_name = "FILE")]
        kernel: Option<PathBuf>,
        /// Target architecture when there is no GPU.
        #[arg(long, default_value = "sm_90a")]
        arch: String,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Record a kernel file as a human revision in a session, measure it (5 seeds, every shape)
    /// and decide: the headless form of a hand edit.
    Measure {
        /// Operator name or id.
        op: String,
        /// The edited kernel.
        #[arg(long, value_name = "FILE")]
        kernel: PathBuf,
        /// The session to append to (created if missing; default: a new one in the workspace).
        #[arg(long, value_name = "FILE")]
        session: Option<PathBuf>,
        /// One line on what the edit changes and why.
        #[arg(long, default_value = "hand edit")]
        rationale: String,
        /// After measuring: leave the revision pending, accept, reject, or decide by the auto
        /// rule (5-seed strict pass and S_op more than 1 % above the incumbent's).
        #[arg(long, value_enum, default_value_t = crate::measure::Decide::None)]
        decide: crate::measure::Decide,
        /// 1 seed and short timing (cannot accept: accepting needs the 5-seed check).
        #[arg(long)]
        quick: bool,
        /// GPU index.
        #[arg(long, default_value_t = 0)]
        device: u32,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run the optimization agent on an operator without the TUI and record a session
    /// (docs/agent.md). Exit 2 without a GPU.
    Agent {
        /// Operator name.
        op: String,
        /// tuner (built in, no LLM), openai (OpenAI-compatible) or anthropic. Default: the
        /// `[agent] backend` setting, else tuner.
        #[arg(long, value_enum)]
        backend: Option<crate::agent::config::BackendKind>,
        /// Iteration budget (default: the setting, else 20).
        #[arg(long, value_name = "N")]
        max_iters: Option<usize>,
        /// Decide automatically: accept only on 5-seed strict correctness and an S_op gain above
        /// the measured noise (A B B A). Without it revisions are measured and left pending.
        #[arg(long)]
        auto: bool,
        /// Hardware profile for T_SOL (default: the one matching the GPU).
        #[arg(long)]
        hardware: Option<String>,
        /// GPU index.
        #[arg(long, default_value_t = 0)]
        device: u32,
        /// Seed of the tuner's restarts and of dropout masks (default: random).
        #[arg(long)]
        seed: Option<u64>,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Measure this GPU's copy bandwidth and cache it beside the datasheet peaks.
    Calibrate {
        /// GPU index.
        #[arg(long, default_value_t = 0)]
        device: u32,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Open a recorded session read-only with a timeline (or print its summary with --json).
    /// Nothing is measured unless asked (m).
    Replay {
        /// The session file (JSON lines).
        file: PathBuf,
        /// Print a summary (revisions, best S per operator, decisions) instead of the TUI.
        #[arg(long)]
        json: bool,
        /// With --json: add load and rebuild times.
        #[arg(long, requires = "json")]
        timing: bool,
    },
    /// Profile a kernel under Nsight Compute: throughput, occupancy, stalls and findings.
    Profile {
        /// Operator name or id.
        op: String,
        /// The kernel file (default: problems/OP/baseline.cu).
        #[arg(long, value_name = "FILE")]
        kernel: Option<PathBuf>,
        /// The shape to profile (default: the operator's largest by bytes moved).
        #[arg(long, value_name = "ID")]
        shape: Option<u32>,
        /// ncu --clock-control (default none: the card's clocks as they are).
        #[arg(long, default_value = "none")]
        clock_control: String,
        /// GPU index.
        #[arg(long, default_value_t = 0)]
        device: u32,
        /// Print the result as JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Runs a job's candidate once, for a profiler (started by `profile`).
    #[command(hide = true)]
    ProfileTarget {
        #[arg(long, default_value_t = 0)]
        device: u32,
        job: PathBuf,
    },
    /// The GPU worker process (JSON lines over stdio; started by the app itself).
    #[command(hide = true)]
    Worker {
        #[arg(long, default_value_t = 0)]
        device: u32,
        /// Protocol simulator without a GPU, for tests of the client.
        #[arg(long, hide = true)]
        simulate: bool,
    },
}

fn load_suite(ws: &Workspace) -> Result<Suite, String> {
    Suite::load(ws.suite_source()).map_err(|e| e.to_string())
}

pub fn main() -> i32 {
    let cli = Cli::parse();
    if let Some(c) = &cli.config
        && !c.is_file()
    {
        eprintln!(
            "atrex-tui: {}: {} (given with --config)",
            c.display(),
            if c.exists() {
                "not a file"
            } else {
                "no such settings file"
            }
        );
        return 2;
    }
    let ws = Workspace::resolve(cli.workspace.as_deref());
    let result = match cli.command {
        None => crate::tui::run(
            &ws,
            crate::tui::Options {
                resume: cli.resume.clone(),
                replay: None,
                config: cli.config.clone(),
            },
        ),
        Some(Command::Replay { file, json, timing }) => {
            if json {
                crate::tui::replay_json(&ws, &file, timing)
            } else {
                crate::tui::run(
                    &ws,
                    crate::tui::Options {
                        resume: None,
                        replay: Some(file),
                        config: cli.config.clone(),
                    },
                )
            }
        }
        Some(Command::Suite {
            hardware,
            phase,
            shapes,
            json,
        }) => load_suite(&ws).and_then(|s| cmd_suite(&s, &hardware, phase, shapes, json)),
        Some(Command::ImportAtrexBench { dir, write, json }) => {
            load_suite(&ws).and_then(|s| cmd_import(&s, &ws, &dir, write, json))
        }
        Some(Command::Doctor { json }) => crate::doctor::run(&ws, cli.config.as_deref(), json),
        Some(Command::Bench {
            op,
            kernel,
            shapes,
            quick,
            full: _,
            hardware,
            device,
            json,
        }) => load_suite(&ws).and_then(|s| {
            crate::bench::run(
                &s,
                &op,
                kernel.as_deref(),
                &shapes,
                quick,
                hardware.as_deref(),
                device,
                json,
            )
        }),
        Some(Command::Agent {
            op,
            backend,
            max_iters,
            auto,
            hardware,
            device,
            seed,
            json,
        }) => load_suite(&ws).and_then(|s| {
            crate::agent::headless::run(
                &ws,
                &s,
                crate::agent::headless::HeadlessArgs {
                    op: &op,
                    backend,
                    max_iters,
                    auto,
                    json,
                    device,
                    hardware: hardware.as_deref(),
                    config: cli.config.as_deref(),
                    seed,
                },
            )
        }),
        Some(Command::Calibrate { device, json }) => crate::bench::calibrate(device, json),
        Some(Command::Measure {
            op,
            kernel,
            session,
            rationale,
            decide,
            quick,
            device,
            json,
        }) => load_suite(&ws).and_then(|s| {
            crate::measure::run(
                &s,
                &ws,
                &op,
                &kernel,
                session.as_deref(),
                &rationale,
                decide,
                quick,
                device,
                json,
            )
        }),
        Some(Command::Profile {
            op,
            kernel,
            shape,
            clock_control,
            device,
            json,
        }) => load_suite(&ws).and_then(|s| {
            crate::bench::profile(
                &s,
                &op,
                kernel.as_deref(),
                shape,
                &clock_control,
                device,
                json,
            )
        }),
        Some(Command::ProfileTarget { device, job }) => {
            return crate::engine::worker::profile_target(device, &job);
        }
        Some(Command::Compile {
            op,
            kernel,
            arch,
            json,
        }) => load_suite(&ws)
            .and_then(|s| crate::bench::compile(&s, &op, kernel.as_deref(), &arch, json)),
        Some(Command::Worker { device, simulate }) => {
            return if simulate {
                crate::engine::simulate::main()
            } else {
                crate::engine::worker::main(device)
            };
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("atrex-tui: {e}");
            1
        }
    }
}

/// The JSON document of `suite --json`.
pub fn suite_json(
    suite: &Suite,
    hardware: &str,
    phase: PhaseFilter,
    shapes: bool,
) -> Result<serde_json::Value, String> {
    let hw = suite.hardware(hardware)?;
    let weights = suite.weights(phase);
    let mut ops = Vec::new();
    for p in suite.by_weight(phase) {
        let mut op = json!({
            "name": p.name,
            "id": p.id,
            "weight": weights.get(&p.name).copied().unwrap_or(0.0),
            "raw_importance": p.importance,
            "phase": p.phase_label(),
            "dtype": p.dtype,
            "num_shapes": p.shapes.len(),
        });
        if shapes {
            let mut list = Vec::new();
            for s in &p.shapes {
                let w = p.work(s).map_err(|e| e.to_string())?;
                let sol = roofline::sol(&w, hw)?;
                let params: serde_json::Map<String, serde_json::Value> = s
                    .params
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect();
                let flops: serde_json::Map<String, serde_json::Value> = w
                    .flops
                    .iter()
                    .map(|(d, f)| (d.clone(), json!(*f as u128)))
                    .collect();
                list.push(json!({
                    "id": s.id,
                    "params": params,
                    "w_flops": flops,
                    "q_read_bytes": w.read_bytes as u128,
                    "q_write_bytes": w.write_bytes as u128,
                    "sol_ms": sol.sol_ms(),
                    "bottleneck": sol.bottleneck.name(),
                }));
            }
            op["shapes"] = json!(list);
        }
        ops.push(op);
    }
    Ok(json!({
        "hardware": hw.key,
        "phase": phase.name(),
        "suite": suite.source.describe(),
        "operators": ops,
    }))
}

fn cmd_suite(
    suite: &Suite,
    hardware: &str,
    phase: PhaseFilter,
    shapes: bool,
    json: bool,
) -> Result<i32, String> {
    let doc = suite_json(suite, hardware, phase, shapes)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
        return Ok(0);
    }
    let hw = suite.hardware(hardware)?;
    println!(
        "{} operators, {} shapes · phase {} · hardware {} ({}) · suite: {}",
        doc["operators"].as_array().map(|a| a.len()).unwrap_or(0),
        suite
            .by_weight(phase)
            .iter()
            .map(|p| p.shapes.len())
            .sum::<usize>(),
        phase.name(),
        hw.key,
        hw.name,
        suite.source.describe()
    );
    println!(
        "{:<30} {:<10} {:>8} {:>10} {:<15} {:>6}",
        "operator", "id", "weight", "raw", "phase", "shapes"
    );
    for op in doc["operators"].as_array().into_iter().flatten() {
        println!(
            "{:<30} {:<10} {:>7.2}% {:>10.6} {:<15} {:>6}",
            op["name"].as_str().unwrap_or(""),
            op["id"].as_str().unwrap_or(""),
            op["weight"].as_f64().unwrap_or(0.0) * 100.0,
            op["raw_importance"].as_f64().unwrap_or(0.0),
            op["phase"].as_str().unwrap_or(""),
            op["num_shapes"]
        );
        if shapes {
            for s in op["shapes"].as_array().into_iter().flatten() {
                let params: Vec<String> = s["params"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| {
                        let v = v.to_string();
                        let v = if v.len() > 24 {
                            format!("{}…", &v[..23])
                        } else {
                            v
                        };
                        format!("{k}={v}")
                    })
                    .collect();
                let flops: Vec<String> = s["w_flops"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(d, f)| format!("{d}:{f}"))
                    .collect();
                println!(
                    "    #{:<4} W {:<28} Q {:>14} + {:>14} B  SOL {:>11.6} ms  {:<8}  {}",
                    s["id"],
                    if flops.is_empty() {
                        "-".to_string()
                    } else {
                        flops.join(",")
                    },
                    s["q_read_bytes"],
                    s["q_write_bytes"],
                    s["sol_ms"].as_f64().unwrap_or(0.0),
                    s["bottleneck"].as_str().unwrap_or(""),
                    params.join(" ")
                );
            }
        }
    }
    Ok(0)
}

fn cmd_import(
    suite: &Suite,
    ws: &Workspace,
    dir: &std::path::Path,
    write: bool,
    json: bool,
) -> Result<i32, String> {
    let target = ws.dir.join("problems");
    if write && !target.join("suite.toml").is_file() {
        return Err(format!(
            "--write needs a workspace with its own problems/ ({} has none); run it in a checkout or pass --workspace",
            ws.dir.display()
        ));
    }
    let report = crate::import::import(suite, dir, if write { Some(&target) } else { None })?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "compared {} operators, {} shapes with {}",
            report.operators_compared, report.shapes_compared, report.bench_dir
        );
        for n in &report.missing_in_problems {
            println!("  missing in problems/: {n}");
        }
        for n in &report.missing_in_bench {
            println!("  missing in the benchmark: {n}");
        }
        for d in &report.disagreements {
            let shape = d.shape.map(|s| format!(" shape {s}")).unwrap_or_default();
            println!(
                "  {}{shape}: {}: ours {} · benchmark {}",
                d.operator, d.what, d.ours, d.theirs
            );
        }
        for w in &report.written {
            println!("  wrote {w}");
        }
        if report.disagreements.is_empty()
            && report.missing_in_bench.is_empty()
            && report.missing_in_problems.is_empty()
        {
            println!("problems/ agrees with the benchmark");
        }
    }
    // Like diff: 1 when anything differs (written or not), so that scripts can tell.
    let differs = !(report.disagreements.is_empty()
        && report.missing_in_bench.is_empty()
        && report.missing_in_problems.is_empty());
    Ok(if differs { 1 } else { 0 })
}

#[cfg(test)]
mod help_tests {
    use super::*;
    use clap::CommandFactory;

    /// Every flag of every subcommand says what it does in `--help`.
    #[test]
    fn every_flag_has_help_text() {
        let cmd = Cli::command();
        let mut missing = Vec::new();
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            for a in sub.get_arguments().filter(|a| !a.is_hide_set()) {
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{} --{}", sub.get_name(), a.get_id()));
                }
            }
        }
        assert!(missing.is_empty(), "flags without help: {missing:?}");
    }
}
