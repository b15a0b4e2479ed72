//! What happens before the first frame: the settings, the theme, the suite, the standing and
//! the session (new, resumed or replayed) read into the state — before the terminal is touched,
//! so that an error prints plainly — then, once the async runtime runs, the pool started and
//! the feeds that tell the app about the world (ncu, the workers' hello, the pool's status, the
//! highlighter, signals).
//!
//! Invariants:
//! - `prepare` does no terminal I/O and starts no worker: `--first-frame` draws its state on a
//!   test backend, and a failure here leaves the terminal as it was.
//! - A new session starts each operator from the standing's incumbent; a replay reads the
//!   standing as a new session does, so that `replay FILE` and a session opened from the
//!   picker show the same figures.
//! - Every feed sends through `event::deliver` and ends when the app has quit; none blocks the
//!   input loop (a blocking search runs on a thread of its own).

use super::event::{AppEvent, Effect, HelloInfo, SessionFile, Tx, deliver};
use super::highlight::Highlighter;
use super::state::AppState;
use super::theme::{self, Theme};
use crate::config::Settings;
use crate::pool::config::Choice;
use crate::pool::{Pool, PoolOptions};
use crate::session::model::LogLevel;
use crate::session::{Model, SessionEvent, SessionWriter};
use crate::standing::Store;
use crate::suite::{Suite, Workspace};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How the TUI was asked to start.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Continue this session file.
    pub resume: Option<PathBuf>,
    /// Open this session file read-only with a timeline.
    pub replay: Option<PathBuf>,
    /// Settings file (default: the user's config directory).
    pub config: Option<PathBuf>,
    /// A workers file (`--workers`; default: the settings' `[[workers]]`, else every local GPU).
    pub workers: Option<PathBuf>,
}

/// A run ready to start: the state, the settings and the session file being recorded.
pub struct Prepared {
    pub state: AppState,
    pub settings: Settings,
    pub writer: Option<SessionWriter>,
    /// The workers to start.
    pub workers: Choice,
}

/// Builds the state for a run, before the terminal is touched (so errors print plainly).
pub fn prepare(ws: &Workspace, opts: &Options) -> Result<Prepared, String> {
    let cfg_path = opts.config.clone().or_else(Settings::default_path);
    let settings = Settings::load(cfg_path.as_deref())?;
    let workers = crate::pool::config::choose(
        settings.device,
        opts.workers.as_deref(),
        &settings.workers,
        cfg_path.as_deref(),
    )?;
    let truecolor = theme::detect_truecolor() && !settings.force_256_colours;
    let th = Theme::load(&settings.theme, truecolor)?;
    let suite = Arc::new(Suite::load(ws.suite_source())?);
    let hw = suite.hardware(&settings.hardware).ok().cloned();
    let kernels = ws.dir.join("kernels");
    // The standing: the workspace's files and the shipped one. A replay reads it as a new
    // session does, so that `replay FILE` and a session opened from the picker show the same
    // figures (the header's rule: the session's own measurements, else the standing's).
    let store = Store::load(ws, &suite);
    if let Some(file) = &opts.replay {
        let mut st = AppState::new(suite.clone(), Model::new(&suite), th, hw, kernels);
        attach_standing(&mut st, store, ws);
        open_replay_file(&mut st, file)?;
        return Ok(Prepared {
            state: st,
            settings,
            writer: None,
            workers,
        });
    }
    let (mut model, writer, warnings) = session_model(ws, opts, &settings, &suite)?;
    // A new session starts each operator from the standing's incumbent.
    if let Some(h) = &hw {
        let view = store.view(&h.key, None);
        for p in &suite.problems {
            if let Some((src, why)) = view.start(&p.name) {
                model.start_from(&p.name, &src, &why);
            }
        }
    }
    let mut st = AppState::new(suite.clone(), model, th, hw, kernels);
    attach_standing(&mut st, store, ws);
    begin_session(&mut st, &settings, opts, writer.as_ref(), warnings);
    offer_recorded(&mut st, ws, &settings, opts);
    Ok(Prepared {
        state: st,
        settings,
        writer,
        workers,
    })
}

/// `replay FILE`: the session read, positioned after its last event; the first frame shows
/// the selected revision whole, so its results are read now.
fn open_replay_file(st: &mut AppState, file: &Path) -> Result<(), String> {
    let (timeline, loaded) = crate::session::demos::timeline_of_file_or_demo(file)?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    st.open_replay(name, timeline, loaded, None);
    if let Some(Effect::ReadResults {
        file,
        op,
        rev,
        mid,
        briefs,
    }) = st.results_wanted()
    {
        let read = crate::session::timeline::read_results(&file, &op, rev, mid, &briefs);
        st.work.take_results(&op, rev, mid, read);
    }
    Ok(())
}

/// The session's model and file: the one resumed, a new file (created at the first event
/// written) when sessions are recorded, or none; and what reading a resumed file warned of.
fn session_model(
    ws: &Workspace,
    opts: &Options,
    settings: &Settings,
    suite: &Suite,
) -> Result<(Model, Option<SessionWriter>, Vec<String>), String> {
    Ok(match &opts.resume {
        Some(file) => {
            let (w, loaded) = SessionWriter::continue_file(file)?;
            let m = Model::from_records(suite, &loaded.records);
            (m, Some(w), loaded.warnings)
        }
        None if settings.record_sessions => {
            let dir = sessions_dir(ws, settings);
            let w = SessionWriter::create_deferred(&crate::session::store::new_session_path(&dir));
            (Model::new(suite), Some(w), vec![])
        }
        None => (Model::new(suite), None, vec![]),
    })
}

/// The folder sessions are recorded in: the settings', else the workspace's.
fn sessions_dir(ws: &Workspace, settings: &Settings) -> PathBuf {
    settings
        .sessions_dir
        .clone()
        .unwrap_or_else(|| ws.sessions_dir())
}

/// A live session's start: the agent's settings, what reading the session warned of, the file
/// recorded into, the operator a resumed session is about, and its `run_start` event.
fn begin_session(
    st: &mut AppState,
    settings: &Settings,
    opts: &Options,
    writer: Option<&SessionWriter>,
    warnings: Vec<String>,
) {
    // The agent's settings: an error here only disables the agent (the log says why).
    st.work.agent_cfg = crate::agent::config::resolve(&settings.agent, None).map_err(String::from);
    if let Err(e) = &st.work.agent_cfg {
        st.work
            .log(LogLevel::Warn, format!("agent: unavailable: {e}"));
    }
    for w in warnings {
        st.work.log(LogLevel::Warn, w);
    }
    if let Some(w) = writer {
        st.work.attach_session(w.path());
    }
    if opts.resume.is_some() {
        st.select_session_op();
    }
    st.work.record(SessionEvent::RunStart {
        tool_version: env!("CARGO_PKG_VERSION").into(),
        resumed: opts.resume.is_some(),
        gpu: None,
        driver: None,
        nvrtc: None,
        hardware: st.work.hw.as_ref().map(|h| h.key.clone()),
        suite: st.work.suite.name.clone(),
        suite_version: st.work.suite.version.clone(),
    });
}

/// The recorded sessions: offered by the picker when there is no GPU (a new session can then
/// only browse) and named in the log.
fn offer_recorded(st: &mut AppState, ws: &Workspace, settings: &Settings, opts: &Options) {
    let files = recorded_sessions(&sessions_dir(ws, settings), st.work.session_name.as_deref());
    let found: Vec<String> = files
        .iter()
        .filter(|f| f.path.is_some())
        .map(|f| f.name.clone())
        .collect();
    if opts.resume.is_none() {
        st.work.recorded_sessions = files;
    }
    if !found.is_empty() {
        let newest: Vec<String> = found.iter().rev().take(3).cloned().collect();
        st.work.log(
            LogLevel::Info,
            format!(
                "{} recorded session(s) in sessions/ (atrex-tui replay FILE): {}",
                found.len(),
                newest.join(", ")
            ),
        );
    }
}

/// Takes the standing read at start into the state; a file that could not be used is said in
/// the log.
fn attach_standing(st: &mut AppState, store: Store, ws: &Workspace) {
    st.work.attach_standing(store, ws.dir.clone());
    for w in st.work.standing.view.problems.clone() {
        st.work.log(LogLevel::Warn, format!("standing: {w}"));
    }
}

/// The sessions of `dir` (newest name first; not `current`, the file being recorded) and the
/// built-in demos that the folder does not hold.
pub fn recorded_sessions(dir: &Path, current: Option<&str>) -> Vec<SessionFile> {
    let mut out: Vec<SessionFile> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_str()?.to_string();
                    if !name.ends_with(".jsonl") || Some(name.as_str()) == current {
                        return None;
                    }
                    let bytes = e.metadata().ok()?.len();
                    // Counting lines is cheap up to a few MiB.
                    let events = (bytes <= 8 << 20)
                        .then(|| std::fs::read(e.path()).ok())
                        .flatten()
                        .map(|b| b.split(|c| *c == b'\n').filter(|l| !l.is_empty()).count());
                    // A run that recorded nothing but its start is not worth replaying.
                    if events.is_some_and(|n| n <= 1) {
                        return None;
                    }
                    Some(SessionFile {
                        name,
                        path: Some(e.path()),
                        bytes,
                        events,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_by(|a, b| b.name.cmp(&a.name));
    for (name, text) in crate::session::demos::DEMOS {
        if !out.iter().any(|f| f.name == *name) {
            out.push(SessionFile {
                name: name.to_string(),
                path: None,
                bytes: text.len() as u64,
                events: Some(text.lines().filter(|l| !l.trim().is_empty()).count()),
            });
        }
    }
    out
}

/// Starts the workers (in the background), their stderr kept beside the session
/// (`SESSION.worker.log`).
pub(super) fn spawn_pool(
    settings: &Settings,
    writer: Option<&SessionWriter>,
    workers: &Choice,
) -> Pool {
    let mut opts = PoolOptions {
        watchdog: settings.watchdog_secs.map(Duration::from_secs_f64),
        ..Default::default()
    };
    if let Some(w) = writer {
        let mut name = w.path().as_os_str().to_owned();
        name.push(".worker.log");
        opts.log = Some(PathBuf::from(name));
    }
    Pool::begin(workers, opts)
}

/// Starts what feeds the app beside the input loop: the ncu search, the workers' hello, the
/// pool's status, the highlighter's loading and the signal handlers.
pub(super) fn spawn_feeds(tx: &Tx, pool: &Pool, settings: &Settings, state: &AppState) {
    find_ncu_in_background(tx);
    hello_in_background(tx, pool);
    follow_pool(tx, pool);
    load_highlighter_in_background(tx, settings, state);
    forward_signals(tx);
}

/// Looks for ncu once, on a thread of its own (off the input loop).
fn find_ncu_in_background(tx: &Tx) {
    let tx = tx.clone();
    std::thread::spawn(move || {
        deliver(
            &tx,
            AppEvent::NcuFound(
                crate::profile::NcuOptions::find()
                    .map(|o| o.ncu)
                    .map_err(String::from),
            ),
        );
    });
}

/// Waits for every worker's first start: the first worker up says which GPU the session
/// measures on (device, driver, NVRTC), or why there is none.
fn hello_in_background(tx: &Tx, pool: &Pool) {
    let (pool, tx) = (pool.clone(), tx.clone());
    tokio::spawn(async move {
        let st = pool.ready().await;
        let r = match st.first_up() {
            Some(w) => Ok(HelloInfo {
                device: w.gpu_info.clone(),
                driver: w.driver.clone().unwrap_or_default(),
                nvrtc: w.nvrtc.clone(),
            }),
            None => Err(st.why_down()),
        };
        deliver(&tx, AppEvent::Hello(r));
    });
}

/// Passes the pool's status to the app whenever it changes (the header's pool line).
fn follow_pool(tx: &Tx, pool: &Pool) {
    let (mut rx, tx) = (pool.watch(), tx.clone());
    tokio::spawn(async move {
        loop {
            let st = rx.borrow_and_update().clone();
            if tx.send(AppEvent::Pool(st)).is_err() || rx.changed().await.is_err() {
                break;
            }
        }
    });
}

/// Loads syntax highlighting on a thread of its own (off the input loop).
fn load_highlighter_in_background(tx: &Tx, settings: &Settings, state: &AppState) {
    let tx = tx.clone();
    let name = settings
        .syntax_theme
        .clone()
        .unwrap_or_else(|| state.view.theme.syntax_theme.clone());
    let truecolor = state.view.theme.truecolor;
    std::thread::spawn(move || {
        deliver(
            &tx,
            AppEvent::HighlighterReady(Highlighter::new(&name, truecolor).map(Arc::new)),
        );
    });
}

/// Turns SIGTERM, SIGHUP, SIGINT and SIGTSTP into events, so the terminal is restored (and
/// the session written) before leaving or stopping.
fn forward_signals(tx: &Tx) {
    // SIGTERM / SIGHUP (SSH drop) / SIGINT (`kill -INT`; Ctrl-C is a key in raw mode): restore
    // the terminal and leave with 128 + the signal. SIGTSTP (`kill -TSTP`; Ctrl-Z is a key in
    // raw mode): suspend.
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        for (number, name) in [
            (libc::SIGTERM, "SIGTERM"),
            (libc::SIGHUP, "SIGHUP"),
            (libc::SIGINT, "SIGINT"),
            (libc::SIGTSTP, "SIGTSTP"),
        ] {
            if let Ok(mut sig) = signal(SignalKind::from_raw(number)) {
                let tx = tx.clone();
                tokio::spawn(async move {
                    while sig.recv().await.is_some() {
                        let ev = match number {
                            libc::SIGTSTP => AppEvent::Stop,
                            _ => AppEvent::Signal(name, number),
                        };
                        if tx.send(ev).is_err() {
                            break;
                        }
                    }
                });
            }
        }
    }
    #[cfg(not(unix))]
    let _ = tx;
}
