//! `agent OP`: the optimisation loop without the TUI, recording a session (a new one, or the
//! one given with `--session`, whose numbering and the agent's memory it continues).

use crate::agent::AgentState;
use crate::agent::StopReason;
use crate::agent::config::{self, BackendKind};
use crate::agent::driver::{DecisionMode, Proposer};
use crate::agent::driver::{Driver, Gate, Measurer, Sink};
use crate::agent::file_sink::FileSink;
use crate::agent::setup::{self, NoGate, Setup};
use crate::engine::pool::PoolOptions;
use crate::engine::workers::Choice;
use crate::session::{Author, Model, Recording, SessionEvent, SessionWriter};
use crate::suite::Problem;
use crate::suite::hardware::HardwareProfile;
use crate::suite::{Suite, Workspace};
use serde_json::json;
use std::path::Path;

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

/// The session to record into: the one given (continued when it exists) or a new one.
fn open_session(
    suite: &Suite,
    ws: &Workspace,
    file: Option<&Path>,
) -> Result<(std::path::PathBuf, Recording, bool), String> {
    match file {
        Some(f) if f.exists() => {
            let (writer, loaded) = SessionWriter::continue_file(f)?;
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
            let writer = SessionWriter::create(&f)?;
            Ok((f, Recording::new(Model::new(suite), Some(writer)), false))
        }
    }
}

pub fn run(ws: &Workspace, suite: &Suite, a: Args<'_>) -> Result<i32, String> {
    let p = suite
        .problem(a.op)
        .ok_or_else(|| format!("unknown operator `{}` (see `atrex-tui suite`)", a.op))?
        .clone();
    let baseline = crate::suite::kernels::suite_kernel(suite, &p, "baseline.cu")?;
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
    // A session to continue is checked before anything else (read only).
    if let Some(f) = a.session.filter(|f| f.exists()) {
        SessionWriter::check_continuable(f)?;
    }
    let rt = crate::engine::runtime()?;
    rt.block_on(async move {
        let Some(started) = super::pool::start(&a.workers, PoolOptions::default()).await else {
            return Ok(crate::cli::EXIT_NO_GPU);
        };
        let dev = started.dev.clone();
        let (driver, nvrtc) = (started.driver.clone(), started.nvrtc.clone());
        let hw = resolve_hardware(suite, a.hardware, &dev.name)?;
        let (path, recording, resumed) = open_session(suite, ws, a.session)?;
        let mut sink = FileSink::new(recording, !a.json);
        // The agent starts from the standing's incumbent; what it accepts becomes the standing's.
        let store = crate::standing::Store::load(ws, suite);
        for w in store.problems() {
            eprintln!("atrex-tui: {w}");
        }
        let start = store.view(&hw.key, Some(&dev.name)).start(&p.name);
        sink.keeper = Some(crate::standing::accept::Keeper {
            ws: ws.clone(),
            suite: suite.name.clone(),
            problem: p.clone(),
            print: crate::standing::OpPrint::of(suite, &p),
            bench: crate::standing::accept::Bench {
                gpu: dev.name.clone(),
                driver: driver.clone(),
                nvrtc: nvrtc.clone(),
                hardware: hw.key.clone(),
            },
            session: crate::standing::accept::session_label(&ws.dir, &path),
        });
        sink.record(SessionEvent::RunStart {
            tool_version: env!("CARGO_PKG_VERSION").into(),
            resumed,
            gpu: Some(dev.name.clone()),
            driver: Some(driver),
            nvrtc,
            hardware: Some(hw.key.clone()),
            suite: suite.name.clone(),
            suite_version: suite.version.clone(),
        });
        let (start_code, start_why) =
            start.unwrap_or_else(|| (baseline.code.clone(), "suite baseline".to_string()));
        record_baseline(&mut sink, &p.name, &start_code, &start_why);
        // A continued session restores the agent's memory; a new one starts from revision 0.
        let (state, sources) = initial_state(&sink.recording.model, resumed, &p.name, &start_code);
        let seed = a.seed.unwrap_or_else(|| crate::engine::fresh_seeds(1)[0]);
        let mode = if a.auto {
            DecisionMode::Auto
        } else {
            DecisionMode::Suggest
        };
        let mut d = setup::build(
            Setup {
                suite,
                problem: p.clone(),
                hw: hw.clone(),
                cfg: &cfg,
                state,
                sources,
                seed,
                mode,
                pool: started.pool.clone(),
                device: dev.index,
                device_name: Some(dev.name.clone()),
            },
            NoGate,
            sink,
        )?;
        let stop = d.run().await;
        let report = Report {
            p: &p,
            dev_name: &dev.name,
            hw: &hw,
            auto: a.auto,
            path: &path,
            resumed,
            stop: &stop,
        };
        if a.json {
            print_json(&report, &d)?;
        } else {
            print_text(&report, &d.state);
        }
        Ok(match stop {
            StopReason::Backend(_) | StopReason::Measurement(_) => 1,
            _ => 0,
        })
    })
}

/// The hardware profile named with `--hardware`, else the one matching the device.
fn resolve_hardware(
    suite: &Suite,
    hardware: Option<&str>,
    dev_name: &str,
) -> Result<HardwareProfile, String> {
    Ok(match hardware {
        Some(h) => suite.hardware(h)?.clone(),
        None => crate::engine::profile_for_device(&suite.hardware, dev_name)
            .ok_or_else(|| format!("no hardware profile matches `{dev_name}`; pass --hardware"))?
            .clone(),
    })
}

/// Records revision 0 (the standing's incumbent, else the suite baseline) unless the session
/// already has it.
fn record_baseline(sink: &mut FileSink, op: &str, code: &str, why: &str) {
    let recorded = sink
        .recording
        .model
        .ops
        .get(op)
        .is_some_and(|o| o.revisions.iter().any(|r| r.recorded));
    if !recorded {
        sink.record(SessionEvent::Revision {
            op: op.to_string(),
            rev: 0,
            parent: None,
            author: Author::Baseline,
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

/// The context the run's result is printed with.
struct Report<'a> {
    p: &'a Problem,
    dev_name: &'a str,
    hw: &'a HardwareProfile,
    auto: bool,
    path: &'a Path,
    resumed: bool,
    stop: &'a StopReason,
}

/// The baseline's S_op and the best measured revision with its S_op.
fn scores(st: &AgentState) -> (Option<f64>, Option<(u32, f64)>) {
    let baseline_s = st.history.first().and_then(|h| h.s_op());
    let best = st
        .history
        .iter()
        .filter(|h| h.rev.is_some())
        .filter_map(|h| h.s_op().map(|s| (h.rev.unwrap_or(0), s)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    (baseline_s, best)
}

/// Prints the run as one pretty JSON document, history included.
fn print_json<P: Proposer, M: Measurer, G: Gate>(
    r: &Report<'_>,
    d: &Driver<P, M, G, FileSink>,
) -> Result<(), String> {
    let st = &d.state;
    let (baseline_s, best) = scores(st);
    let doc = json!({
        "operator": r.p.name,
        "backend": d.proposer.name(),
        "gpu": r.dev_name,
        "hardware": r.hw.key,
        "mode": if r.auto { "auto" } else { "suggest" },
        "session": r.path.display().to_string(),
        "resumed": r.resumed,
        "stop_reason": r.stop.to_string(),
        "iterations": st.iterations,
        "dropouts": st.dropouts,
        "tokens_in": st.tokens_in,
        "tokens_out": st.tokens_out,
        // Whether iterations used tools (off for the tuner, or after a server refused them).
        "tools": d.budget.tools.enabled && d.proposer.supports_tools(),
        "tool_budgets": d.budget.tools,
        "baseline_s_op": baseline_s,
        "incumbent": st.incumbent_rev,
        "incumbent_s_op": st.incumbent_s,
        "best": best.map(|(r, s)| json!({"rev": r, "s_op": s})),
        "history": st.history,
        "write_errors": d.sink.errors,
        "standing": d.sink.standing.iter().map(|(rev, w)| match w {
            Ok(f) => json!({"rev": rev, "file": f.display().to_string()}),
            Err(e) => json!({"rev": rev, "error": e}),
        }).collect::<Vec<_>>(),
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// Prints the run as one line of text.
fn print_text(r: &Report<'_>, st: &AgentState) {
    let (baseline_s, best) = scores(st);
    let stop = r.stop;
    println!(
        "{}: {} iterations, stop: {stop}; S_op v0 {} → incumbent v{} {}{}; session {}",
        r.p.name,
        st.iterations,
        baseline_s.map(|s| format!("{s:.4}")).unwrap_or("-".into()),
        st.incumbent_rev,
        st.incumbent_s
            .map(|s| format!("{s:.4}"))
            .unwrap_or("-".into()),
        best.map(|(r, s)| format!(" (best measured v{r} {s:.4})"))
            .unwrap_or_default(),
        r.path.display()
    );
}
