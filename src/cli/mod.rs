//! Command-line interface: the TUI by default, and a headless form of every capability. One
//! file per command; they print and choose exit codes, the work lives in the domain modules.

mod agent;
mod agent_report;
mod args;
pub(crate) mod bench;
pub(crate) mod bench_against;
pub(crate) mod bench_all;
pub(crate) mod bench_merge;
pub(crate) mod bench_sweep;
pub(crate) mod calibrate;
pub(crate) mod compile;
pub(crate) mod defines;
pub(crate) mod doctor;
mod doctor_workers;
pub(crate) mod export;
pub(crate) mod import;
pub(crate) mod measure;
mod pool;
pub(crate) mod profile;
pub(crate) mod replay;
pub(crate) mod report;
pub(crate) mod suite;

pub(crate) use args::{Cli, Command};

use crate::suite::{Suite, Workspace};
use clap::Parser;

/// Exit code when no GPU is available.
pub const EXIT_NO_GPU: i32 = 2;

/// Says why a command failed and gives its exit status: `atrex-tui: WHY` on stderr, or with
/// `json` the error document on stdout (`{"error": WHY, "exit": STATUS}`, docs/bench-json.md),
/// so that a script reading the command's JSON always gets JSON.
pub(crate) fn fail(json: bool, why: &str, status: i32) -> i32 {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"error": why, "exit": status}))
                .unwrap_or_default()
        );
    } else {
        eprintln!("atrex-tui: {why}");
    }
    status
}

/// How a command's error ends: its exit status, and whether it is said as a JSON document.
/// `import-atrex-bench` exits 1 when something differs, so its errors exit 2 (as `diff`'s do);
/// the measuring commands with `--json` say their errors in JSON.
fn error_exit(command: Option<&Command>) -> (i32, bool) {
    match command {
        Some(Command::ImportAtrexBench { .. }) => (2, false),
        Some(
            Command::Bench { json, .. }
            | Command::Measure { json, .. }
            | Command::Agent { json, .. },
        ) => (1, *json),
        _ => (1, false),
    }
}

pub(crate) use crate::pool::runtime;

fn load_suite(ws: &Workspace) -> Result<Suite, String> {
    Ok(Suite::load(ws.suite_source())?)
}

pub fn main() -> i32 {
    let t_start = std::time::Instant::now();
    let cli = Cli::parse();
    if !config_usable(&cli) {
        return 2;
    }
    // `--first-frame` draws the TUI's first frame: only the TUI and `replay FILE` have one.
    let has_frame = match &cli.command {
        None => true,
        Some(Command::Replay { json, .. }) => !json,
        Some(_) => false,
    };
    if cli.first_frame && !has_frame {
        eprintln!(
            "atrex-tui: --first-frame is for the TUI (no command, or replay FILE without --json)"
        );
        return 2;
    }
    if !matches!(
        cli.command,
        Some(Command::CompileChild | Command::Worker { .. })
    ) {
        configure_compile_limits(cli.config.as_deref());
    }
    let ws = Workspace::resolve(cli.workspace.as_deref());
    let config = cli.config.as_deref();
    let tui = |opts: crate::tui::Options| {
        if cli.first_frame {
            crate::tui::first_frame::run(&ws, opts, t_start)
        } else {
            crate::tui::run(&ws, opts)
        }
    };
    let (error_status, json_errors) = error_exit(cli.command.as_ref());
    let result = match cli.command {
        None => tui(crate::tui::Options {
            resume: cli.resume.clone(),
            replay: None,
            config: cli.config.clone(),
            workers: cli.workers.clone(),
        }),
        Some(Command::Replay { file, json, timing }) => {
            if json {
                replay::run(&ws, &file, timing)
            } else {
                tui(crate::tui::Options {
                    resume: None,
                    replay: Some(file),
                    config: cli.config.clone(),
                    workers: cli.workers.clone(),
                })
            }
        }
        Some(Command::Doctor { json }) => doctor::run(&ws, config, cli.workers.as_deref(), json),
        Some(Command::Calibrate { device, json }) => calibrate::run(device, json),
        Some(Command::ProfileTarget { device, job }) => {
            return crate::worker::profile_target(device, &job);
        }
        Some(Command::CompileChild) => return crate::worker::compile_child::child_main(),
        Some(Command::Worker { device, simulate }) => {
            return if let Some(default) = simulate {
                crate::worker::simulate::main(device, &default)
            } else {
                crate::worker::main(device)
            };
        }
        Some(
            c @ (Command::Suite { .. }
            | Command::ImportAtrexBench { .. }
            | Command::Compile { .. }
            | Command::Export { .. }),
        ) => load_suite(&ws).and_then(|s| suite_command(&ws, &s, c)),
        // Joining bench documents reads files only: no worker, no GPU.
        Some(Command::Bench {
            op, merge, json, ..
        }) if !merge.is_empty() => {
            load_suite(&ws).and_then(|s| bench_merge::run(&s, op.as_deref(), &merge, json))
        }
        Some(Command::Report {
            out,
            hardware,
            json,
        }) => load_suite(&ws).and_then(|s| {
            report::run(
                &ws,
                &s,
                report::Args {
                    out: out.as_deref(),
                    hardware: &hardware,
                    json,
                    config,
                },
            )
        }),
        Some(
            c @ (Command::Bench { .. }
            | Command::Agent { .. }
            | Command::Measure { .. }
            | Command::Profile { .. }),
        ) => load_suite(&ws).and_then(|s| gpu_command(&ws, &s, config, cli.workers.as_deref(), c)),
    };
    match result {
        Ok(code) => code,
        Err(e) => fail(json_errors, &e, error_status),
    }
}

/// The settings' compile limits, for the workers this process starts (`compile_child::limits`).
/// A settings file with problems gives none here: the commands that read it, and `doctor`, say
/// what is wrong.
fn configure_compile_limits(config: Option<&std::path::Path>) {
    let path = crate::config::settings_path(config);
    if let Ok(s) = crate::config::Settings::load(path.as_deref()) {
        crate::worker::compile_child::limits::configure(
            s.compile_timeout_secs,
            s.compile_memory_gib,
        );
    }
}

/// Whether the settings file given with `--config` is a file; says why not on stderr.
fn config_usable(cli: &Cli) -> bool {
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
        return false;
    }
    // A workspace named on the command line must exist: a mistyped one would otherwise fall
    // back to the built-in suite and the shipped standing without a word.
    if let Some(w) = &cli.workspace
        && !w.is_dir()
    {
        eprintln!(
            "atrex-tui: {}: {} (given with --workspace)",
            w.display(),
            if w.exists() {
                "not a folder"
            } else {
                "no such folder"
            }
        );
        return false;
    }
    true
}

/// Runs a command that reads the suite without a GPU: `suite`, `import-atrex-bench`, `compile`,
/// `export`.
fn suite_command(ws: &Workspace, s: &Suite, command: Command) -> Result<i32, String> {
    match command {
        Command::Suite {
            hardware,
            phase,
            shapes,
            json,
        } => {
            let standing = suite::standing(ws, s, &hardware)?;
            suite::run(s, &hardware, phase, shapes, json, &standing)
        }
        Command::ImportAtrexBench { dir, write, json } => import::run(s, ws, &dir, write, json),
        Command::Compile {
            op,
            kernel,
            defines,
            arch,
            sass,
            json,
        } => compile::run(
            s,
            &op,
            kernel.as_deref(),
            &defines,
            &arch,
            sass.as_deref(),
            json,
        ),
        Command::Export {
            op,
            format,
            out,
            hardware,
            kernel,
            defines,
            force,
            json,
        } => export::run(
            s,
            ws,
            export::Args {
                op: &op,
                format,
                out: &out,
                hardware: &hardware,
                kernel: kernel.as_deref(),
                defines: &defines,
                force,
                json,
            },
        ),
        _ => unreachable!("not a suite command"),
    }
}

/// Runs a command that measures on the GPU: `bench`, `agent`, `measure`, `profile`.
fn gpu_command(
    ws: &Workspace,
    s: &Suite,
    config: Option<&std::path::Path>,
    workers: Option<&std::path::Path>,
    command: Command,
) -> Result<i32, String> {
    match command {
        Command::Bench {
            all: true,
            record,
            quick,
            hardware,
            device,
            json,
            ..
        } => bench_all::run(
            s,
            ws,
            bench_all::Args {
                quick,
                hardware: hardware.as_deref(),
                workers: &pool::choose(device, workers, config)?,
                record,
                json,
            },
        ),
        Command::Bench { record: true, .. } => {
            Err("--record goes with --all (the standing holds every operator's incumbent)".into())
        }
        Command::Bench {
            op,
            kernel,
            defines,
            sweep,
            shapes,
            quick,
            hardware,
            device,
            json,
            ..
        } => bench::run(
            s,
            ws,
            op.as_deref().unwrap_or_default(),
            kernel.as_deref(),
            &defines,
            &sweep,
            &shapes,
            quick,
            hardware.as_deref(),
            &pool::choose(device, workers, config)?,
            json,
        ),
        Command::Agent {
            op,
            backend,
            max_iters,
            auto,
            no_tools,
            hardware,
            device,
            seed,
            session,
            json,
        } => agent::run(
            ws,
            s,
            agent::Args {
                op: &op,
                backend,
                max_iters,
                auto,
                no_tools,
                json,
                workers: pool::choose(device, workers, config)?,
                hardware: hardware.as_deref(),
                config,
                seed,
                session: session.as_deref(),
            },
        ),
        Command::Measure {
            op,
            kernel,
            defines,
            session,
            rationale,
            decide,
            quick,
            device,
            json,
        } => measure::run(
            s,
            ws,
            &op,
            &kernel,
            &defines,
            session.as_deref(),
            &rationale,
            decide,
            quick,
            &pool::choose(device, workers, config)?,
            json,
        ),
        Command::Profile {
            op,
            kernel,
            defines,
            shape,
            clock_control,
            source,
            source_csv,
            device,
            json,
        } => match source_csv {
            Some(csv) => profile::summarise_csv(s, &op, &csv, json),
            None => profile::run(
                s,
                &op,
                kernel.as_deref(),
                &defines,
                shape,
                (&clock_control, source),
                device,
                json,
            ),
        },
        _ => unreachable!("not a GPU command"),
    }
}
