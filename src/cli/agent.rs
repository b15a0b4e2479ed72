//! `agent OP`: the optimisation loop without the TUI, recording a session (a new one, or the
//! one given with `--session`, whose numbering and the agent's memory it continues).
//! `agent OP1,OP2,...` runs one agent per operator at once on the workers, all recording into
//! the one session (one recorder numbers every agent's events); each agent's jobs share the
//! pool's queue, and its A B B A runs hold one worker.

use super::agent_report::{Report, print_text, report_json};
use crate::agent::AgentState;
use crate::agent::StopReason;
use crate::agent::config::{self, BackendKind};
use crate::agent::driver::{DecisionMode, Driver, Gate, Measurer, Proposer, Sink};
use crate::agent::file_sink::{FileSink, SharedRecording};
use crate::agent::setup::{self, NoGate, Setup};
use crate::pool::PoolOptions;
use crate::pool::config::Choice;
use crate::session::{Author, Model, Recording, SessionEvent, SessionWriter};
use crate::suite::Problem;
use crate::suite::hardware::HardwareProfile;
use crate::suite::{Suite, Workspace};
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Mutex};

pub struct Args<'a> {
    pub op: &'a str,
    pub backend: Option<BackendKind>,
    pub max_iters: Option<usize>,
    pub auto: bool,
    /// One reply per iteration (no tools).
    pub no_tools: bool,
    pub json: bool,
    pub workers: Choice,
    pub hardware: Option<&'a str>,
    pub config: Option<&'a Path>,
    pub seed: Option<u64>,
    pub session: Option<&'a Path>,
}

/// The session to record into: the one given (continued when it exists) or a new one, with its
/// lock (`lock`: taken by the caller, else here).
fn open_session(
    suite: &Suite,
    ws: &Workspace,
    file: Option<&Path>,
    lock: Option<crate::session::SessionLock>,
) -> Result<(std::path::PathBuf, Recording, bool), String> {
    let lock = |f: &Path| match lock {
        Some(l) => Ok(l),
        None => crate::session::SessionLock::take(f),
    };
    match file {
        Some(f) if f.exists() => {
            let (writer, loaded) = SessionWriter::continue_locked(f, lock(f)?)?;
            for w in &loaded.warnings {
                eprintln!("atrex-tui: {w}");
            }
            let model = Model::from_records(suite, &loaded.records);
            Ok((f.to_path_buf(), Recording::new(model, Some(writer)), true))
        }
        _ => {
            let f = file
                .map(|f| f.to_path_buf())
                .unwrap_or_else(|| crate::session::store::new_session_path(&ws.sessions_dir()));
            let writer = SessionWriter::create_locked(&f, lock(&f)?)?;
            Ok((f, Recording::new(Model::new(suite), Some(writer)), false))
        }
    }
}

/// The operators of `OP1,OP2,...`, each once, in the order given.
fn operators(suite: &Suite, list: &str) -> Result<Vec<Problem>, String> {
    let mut out: Vec<Problem> = Vec::new();
    for name in list.split(',').map(str::trim) {
        if name.is_empty() {
            return Err(format!("`{list}`: an empty operator name (OP1,OP2,...)"));
        }
        let p = suite
            .problem(name)
            .ok_or_else(|| format!("unknown operator `{name}` (see `atrex-tui suite`)"))?;
        if !out.iter().any(|o| o.name == p.name) {
            out.push(p.clone());
        }
    }
    Ok(out)
}

pub fn run(ws: &Workspace, suite: &Suite, a: Args<'_>) -> Result<i32, String> {
    let ops = operators(suite, a.op)?;
    let baselines = ops
        .iter()
        .map(|p| crate::contract::kernels::suite_kernel(suite, p, "baseline.cu"))
        .collect::<Result<Vec<_>, _>>()?;
    let cfg = agent_config(&a)?;
    // The session's lock is taken before anything else (one writer per file, held until the
    // command ends), then a session to continue is checked (read only).
    let lock = a
        .session
        .map(crate::session::SessionLock::take)
        .transpose()?;
    if let Some(f) = a.session.filter(|f| f.exists()) {
        SessionWriter::check_continuable(f)?;
    }
    let rt = crate::pool::runtime()?;
    rt.block_on(async move {
        let started = match super::pool::start(&a.workers, PoolOptions::default(), a.json).await {
            Ok(s) => s,
            Err(code) => return Ok(code),
        };
        let dev = started.dev.clone();
        let (driver, nvrtc) = (started.driver.clone(), started.nvrtc.clone());
        let hw = resolve_hardware(suite, a.hardware, &dev.name)?;
        let (path, recording, resumed) = open_session(suite, ws, a.session, lock)?;
        let shared: SharedRecording = Arc::new(Mutex::new(recording));
        // The agents start from the standing's incumbents; what they accept becomes the
        // standing's.
        let store = crate::standing::Store::load(ws, suite);
        for w in store.problems() {
            eprintln!("atrex-tui: {w}");
        }
        let view = store.view(&hw.key, Some(&dev.name));
        let run_start = SessionEvent::RunStart {
            tool_version: env!("CARGO_PKG_VERSION").into(),
            resumed,
            gpu: Some(dev.name.clone()),
            driver: Some(driver.clone()),
            nvrtc: nvrtc.clone(),
            hardware: Some(hw.key.clone()),
            suite: suite.name.clone(),
            suite_version: suite.version.clone(),
        };
        let seed = a
            .seed
            .unwrap_or_else(|| crate::contract::job::fresh_seeds(1)[0]);
        let mode = if a.auto {
            DecisionMode::Auto
        } else {
            DecisionMode::Suggest
        };
        let mut drivers = Vec::new();
        for (k, (p, baseline)) in ops.iter().zip(&baselines).enumerate() {
            let mut sink = FileSink::shared(shared.clone(), !a.json);
            if ops.len() > 1 {
                sink.prefix = Some(p.name.clone());
            }
            let bench = crate::standing::accept::Bench {
                gpu: dev.name.clone(),
                driver: driver.clone(),
                nvrtc: nvrtc.clone(),
                hardware: hw.key.clone(),
            };
            sink.keeper = Some(keeper(ws, suite, p, bench, &path));
            if k == 0 {
                sink.record(run_start.clone());
            }
            let start = view.start(&p.name);
            let start_author = if start.is_some() {
                Author::Incumbent
            } else {
                Author::Baseline
            };
            let (start_code, start_why) =
                start.unwrap_or_else(|| (baseline.code.clone(), "suite baseline".to_string()));
            record_baseline(&mut sink, &p.name, &start_code, &start_why, start_author);
            // A continued session restores each agent's memory; a new one starts from
            // revision 0.
            let (state, sources) =
                initial_state(&sink.recording().model, resumed, &p.name, &start_code);
            drivers.push(setup::build(
                Setup {
                    suite,
                    problem: p.clone(),
                    hw: hw.clone(),
                    cfg: &cfg,
                    state,
                    sources,
                    // Each agent its own stream of restarts and dropouts.
                    seed: seed.wrapping_add(k as u64),
                    mode,
                    pool: started.pool.clone(),
                    device: dev.index,
                    device_name: Some(dev.name.clone()),
                },
                NoGate,
                sink,
            )?);
        }
        let workers = started.names();
        if ops.len() > 1 && !a.json {
            eprintln!(
                "{} agents at once ({}) on {} worker{} ({})",
                ops.len(),
                ops.iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                workers.len(),
                if workers.len() == 1 { "" } else { "s" },
                workers.join(", ")
            );
        }
        let t0 = std::time::Instant::now();
        let stops = futures::future::join_all(drivers.iter_mut().map(|d| d.run())).await;
        let wall_s = t0.elapsed().as_secs_f64();
        let reports: Vec<Report<'_>> = ops
            .iter()
            .zip(&stops)
            .map(|(p, stop)| Report {
                p,
                dev_name: &dev.name,
                hw: &hw,
                auto: a.auto,
                path: &path,
                resumed,
                stop,
            })
            .collect();
        let done = Done {
            path: &path,
            workers: &workers,
            wall_s,
        };
        print_reports(&reports, &drivers, &done, a.json)?;
        let failed = stops
            .iter()
            .any(|s| matches!(s, StopReason::Backend(_) | StopReason::Measurement(_)));
        Ok(if failed { 1 } else { 0 })
    })
}

/// The agent's configuration: the settings file (`--config`, else the default one) with the
/// environment, and the command's own limits over them.
fn agent_config(a: &Args<'_>) -> Result<config::AgentConfig, String> {
    let cfg_file = a
        .config
        .map(|p| p.to_path_buf())
        .or_else(crate::config::Settings::default_path);
    let settings = crate::config::Settings::load(cfg_file.as_deref())?;
    let mut cfg = config::resolve(&settings.agent, a.backend)?;
    if let Some(n) = a.max_iters {
        cfg.budget.max_iters = n;
    }
    if a.no_tools {
        cfg.budget.tools.enabled = false;
    }
    Ok(cfg)
}

/// What records an operator's accepted revisions in the workspace's standing.
fn keeper(
    ws: &Workspace,
    suite: &Suite,
    p: &Problem,
    bench: crate::standing::accept::Bench,
    session: &Path,
) -> crate::standing::accept::Keeper {
    crate::standing::accept::Keeper {
        ws: ws.clone(),
        suite: suite.name.clone(),
        problem: p.clone(),
        print: crate::standing::OpPrint::of(suite, p),
        bench,
        session: crate::standing::accept::session_label(&ws.dir, session),
    }
}

/// What the run as a whole says besides each agent's report.
struct Done<'a> {
    path: &'a Path,
    workers: &'a [String],
    wall_s: f64,
}

/// Each agent's report: one JSON document (one per agent, in one document when there are
/// several), or a line each.
fn print_reports<P: Proposer, M: Measurer, G: Gate>(
    reports: &[Report<'_>],
    drivers: &[Driver<P, M, G, FileSink>],
    done: &Done<'_>,
    json: bool,
) -> Result<(), String> {
    if json {
        let docs: Vec<serde_json::Value> = reports
            .iter()
            .zip(drivers)
            .map(|(r, d)| report_json(r, d))
            .collect();
        let doc = match docs.as_slice() {
            [one] => one.clone(),
            _ => json!({
                "session": done.path.display().to_string(),
                "workers": done.workers,
                "wall_s": done.wall_s,
                "agents": docs,
            }),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
    } else {
        for (r, d) in reports.iter().zip(drivers) {
            print_text(r, &d.state);
        }
        if reports.len() > 1 {
            println!("wall {:.0} s for {} agents", done.wall_s, reports.len());
        }
    }
    Ok(())
}

/// The hardware profile named with `--hardware`, else the one matching the device.
fn resolve_hardware(
    suite: &Suite,
    hardware: Option<&str>,
    dev_name: &str,
) -> Result<HardwareProfile, String> {
    Ok(match hardware {
        Some(h) => suite.hardware(h)?.clone(),
        None => crate::suite::hardware::profile_for_device(&suite.hardware, dev_name)
            .ok_or_else(|| format!("no hardware profile matches `{dev_name}`; pass --hardware"))?
            .clone(),
    })
}

/// Records revision 0 (the standing's incumbent, else the suite baseline) unless the session
/// already has it.
fn record_baseline(sink: &mut FileSink, op: &str, code: &str, why: &str, author: Author) {
    let recorded = sink
        .recording()
        .model
        .ops
        .get(op)
        .is_some_and(|o| o.revisions.iter().any(|r| r.recorded));
    if !recorded {
        sink.record(SessionEvent::Revision {
            op: op.to_string(),
            rev: 0,
            parent: None,
            author,
            rationale: why.into(),
            source: code.to_string(),
            via: None,
            request_id: None,
            tokens_in: None,
            tokens_out: None,
            category: None,
            knowledge: vec![],
        });
    }
}

/// The agent's starting memory: restored from a continued session, else fresh from the baseline.
fn initial_state(
    model: &Model,
    resumed: bool,
    op: &str,
    baseline: &str,
) -> (AgentState, Vec<(String, Option<f64>)>) {
    let restored = resumed.then(|| setup::restore(model, op)).flatten();
    restored.unwrap_or_else(|| (AgentState::new(op, 0, baseline.to_string(), None), vec![]))
}
