//! The interactive terminal UI. `app` holds the state and the update function, `view` draws it,
//! this module runs it: terminal, input, worker, watchers, signals and the session file.

mod agent_link;
pub mod app;
mod effects;
pub mod event;
pub mod first_frame;
mod handover;
pub mod highlight;
pub mod keymap;
pub mod logview;
pub mod search;
mod standing_writer;
pub mod state;
pub mod text;
pub mod theme;
pub mod update;
pub mod view;

#[cfg(test)]
mod tests;

use crate::config::Settings;
use crate::contract::protocol::{JobKind, Mode};
use crate::contract::runner::Runner;
use crate::pool::{Pool, PoolOptions};
use crate::session::model::LogLevel;
use crate::session::{Model, SessionEvent, SessionWriter};
use crate::suite::{Suite, Workspace};
use app::{AppEvent, AppState, Effect, HelloInfo};
use futures::StreamExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

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

/// The application event sender: cheap to clone, one per producer.
pub type Tx = mpsc::UnboundedSender<AppEvent>;

/// Sends an event to the app. The receiver goes away only when the app has quit, so a failed
/// send has no one left to tell: every producer (tasks, watcher and loader threads, the agent)
/// sends through here.
pub fn deliver(tx: &Tx, ev: AppEvent) {
    if tx.send(ev).is_err() {
        // The app quit; the event is moot.
    }
}

/// Builds the state for a run, before the terminal is touched (so errors print plainly).
/// A run ready to start: the state, the settings and the session file being recorded.
pub struct Prepared {
    pub state: AppState,
    pub settings: Settings,
    pub writer: Option<SessionWriter>,
    /// The workers to start.
    pub workers: crate::pool::config::Choice,
}

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
    let th = theme::Theme::load(&settings.theme, truecolor)?;
    let suite = Arc::new(Suite::load(ws.suite_source())?);
    let hw = suite.hardware(&settings.hardware).ok().cloned();
    let kernels = ws.dir.join("kernels");
    // The standing: the workspace's files and the shipped one. A replay reads it as a new
    // session does, so that `replay FILE` and a session opened from the picker show the same
    // figures (the header's rule: the session's own measurements, else the standing's).
    let store = crate::standing::Store::load(ws, &suite);
    if let Some(file) = &opts.replay {
        let (timeline, loaded) = crate::session::demos::timeline_of_file_or_demo(file)?;
        let mut st = AppState::new(suite.clone(), Model::new(&suite), th, hw, kernels);
        attach_standing(&mut st, store, ws);
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        st.open_replay(name, timeline, loaded, None);
        // The first frame shows the selected revision whole: its results are read now.
        if let Some(Effect::ReadResults {
            file,
            op,
            rev,
            mid,
            briefs,
        }) = st.results_wanted()
        {
            let read = crate::session::timeline::read_results(&file, &op, rev, mid, &briefs);
            st.take_results(&op, rev, mid, read);
        }
        return Ok(Prepared {
            state: st,
            settings,
            writer: None,
            workers,
        });
    }
    let (model, writer, warnings) = match &opts.resume {
        Some(file) => {
            let (w, loaded) = SessionWriter::continue_file(file)?;
            let m = Model::from_records(&suite, &loaded.records);
            (m, Some(w), loaded.warnings)
        }
        None if settings.record_sessions => {
            let dir = settings
                .sessions_dir
                .clone()
                .unwrap_or_else(|| ws.sessions_dir());
            let w = SessionWriter::create_deferred(&crate::session::store::new_session_path(&dir));
            (Model::new(&suite), Some(w), vec![])
        }
        None => (Model::new(&suite), None, vec![]),
    };
    // A new session starts each operator from the standing's incumbent.
    let mut model = model;
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
    // The agent's settings: an error here only disables the agent (the log says why).
    st.agent_cfg = crate::agent::config::resolve(&settings.agent, None).map_err(String::from);
    if let Err(e) = &st.agent_cfg {
        st.log(LogLevel::Warn, format!("agent: unavailable: {e}"));
    }
    for w in warnings {
        st.log(LogLevel::Warn, w);
    }
    if let Some(w) = &writer {
        st.attach_session(w.path());
    }
    if opts.resume.is_some() {
        st.select_session_op();
    }
    st.record(SessionEvent::RunStart {
        tool_version: env!("CARGO_PKG_VERSION").into(),
        resumed: opts.resume.is_some(),
        gpu: None,
        driver: None,
        nvrtc: None,
        hardware: st.hw.as_ref().map(|h| h.key.clone()),
        suite: suite.name.clone(),
        suite_version: suite.version.clone(),
    });
    // Offer recorded sessions when there are some.
    let dir = settings
        .sessions_dir
        .clone()
        .unwrap_or_else(|| ws.sessions_dir());
    let files = recorded_sessions(&dir, st.session_name.as_deref());
    let found: Vec<String> = files
        .iter()
        .filter(|f| f.path.is_some())
        .map(|f| f.name.clone())
        .collect();
    // Without a GPU a new session can only browse: the picker offers these (and the demos).
    if opts.resume.is_none() {
        st.recorded_sessions = files;
    }
    if !found.is_empty() {
        st.log(
            LogLevel::Info,
            format!(
                "{} recorded session(s) in sessions/ (atrex-tui replay FILE): {}",
                found.len(),
                found
                    .iter()
                    .rev()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    Ok(Prepared {
        state: st,
        settings,
        writer,
        workers,
    })
}

/// Takes the standing read at start into the state; a file that could not be used is said in
/// the log.
fn attach_standing(st: &mut AppState, store: crate::standing::Store, ws: &Workspace) {
    st.attach_standing(store, ws.dir.clone());
    for w in st.standing.view.problems.clone() {
        st.log(LogLevel::Warn, format!("standing: {w}"));
    }
}

/// The sessions of `dir` (newest name first; not `current`, the file being recorded) and the
/// built-in demos that the folder does not hold.
pub fn recorded_sessions(dir: &Path, current: Option<&str>) -> Vec<app::SessionFile> {
    let mut out: Vec<app::SessionFile> = std::fs::read_dir(dir)
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
                    Some(app::SessionFile {
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
            out.push(app::SessionFile {
                name: name.to_string(),
                path: None,
                bytes: text.len() as u64,
                events: Some(text.lines().filter(|l| !l.trim().is_empty()).count()),
            });
        }
    }
    out
}

/// Runs the TUI until quit. Returns the exit code.
pub fn run(ws: &Workspace, opts: Options) -> Result<i32, String> {
    let t_start = Instant::now();
    let p = prepare(ws, &opts)?;
    let rt = crate::pool::runtime()?;
    rt.block_on(main_loop(p, t_start))
}

fn install_panic_hook() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        ratatui::restore();
        prev(info);
    }));
}

struct Runtime {
    tx: Tx,
    /// The GPU index (for ncu's target).
    device: u32,
    /// Control channels of the running agents, by operator.
    agents: std::collections::BTreeMap<String, mpsc::UnboundedSender<app::AgentCtl>>,
    /// The workers (local GPUs or the configured pool).
    pool: Pool,
    jobs: std::collections::BTreeMap<u64, u64>,
    watchers: Vec<notify_debouncer_mini::Debouncer<notify::RecommendedWatcher>>,
    playback: Option<tokio::task::JoinHandle<()>>,
    editor: Option<String>,
    /// The session file, while recording works.
    writer: Option<SessionWriter>,
    /// How many of the state's journal records are in the file.
    written: usize,
    /// The standing's records, written off the input loop in order.
    standing: standing_writer::StandingWriter,
}

impl Runtime {
    /// Appends the records `update` added to the journal to the session file. A write error
    /// stops recording (the state keeps everything; the log says why).
    fn persist(&mut self, state: &mut AppState) {
        let Some(w) = self.writer.as_mut() else {
            self.written = state.journal.len();
            return;
        };
        for rec in &state.journal[self.written.min(state.journal.len())..] {
            if let Err(e) = w.write(rec) {
                self.writer = None;
                state.log(
                    LogLevel::Error,
                    format!("session: cannot write ({e}); recording stopped"),
                );
                break;
            }
        }
        self.written = state.journal.len();
    }
}

async fn main_loop(p: Prepared, t_start: Instant) -> Result<i32, String> {
    let Prepared {
        mut state,
        settings,
        writer,
        workers,
    } = p;
    let (tx, mut rx) = mpsc::unbounded_channel::<AppEvent>();
    let pool = spawn_pool(&settings, writer.as_ref(), &workers);
    spawn_background_tasks(&tx, &pool, &settings, &state);
    install_panic_hook();
    let mut terminal = ratatui::try_init().map_err(|e| format!("cannot open the terminal: {e}"))?;
    let mut rtm = Runtime {
        tx: tx.clone(),
        device: settings.device.unwrap_or(0),
        agents: Default::default(),
        pool,
        jobs: Default::default(),
        watchers: Vec::new(),
        playback: None,
        editor: settings.editor.clone(),
        writer,
        written: 0,
        standing: Default::default(),
    };
    rtm.persist(&mut state);
    // None while the editor or the shell has the terminal.
    let mut input = Some(crossterm::event::EventStream::new());
    let result = event_loop(
        &mut rtm,
        &mut state,
        &mut rx,
        &mut terminal,
        &mut input,
        t_start,
    )
    .await;
    ratatui::restore();
    // What the session holds is on the disk before the process ends.
    if let Some(w) = rtm.writer.as_mut()
        && let Err(e) = w.sync()
    {
        eprintln!("atrex-tui: {e}");
    }
    // Standing records still queued are written before the app ends; what went wrong with
    // them is said on stderr, the screen being gone.
    rtm.standing.finish();
    while let Ok(ev) = rx.try_recv() {
        if let AppEvent::Log(LogLevel::Error | LogLevel::Warn, line) = ev
            && line.starts_with("standing: ")
        {
            eprintln!("atrex-tui: {line}");
        }
    }
    for mid in rtm.jobs.values() {
        rtm.pool.cancel(*mid);
    }
    if let Some(p) = rtm.playback.take() {
        p.abort();
    }
    result.map(|_| state.exit_status)
}

/// Starts the workers (in the background), their stderr kept beside the session.
fn spawn_pool(
    settings: &Settings,
    writer: Option<&SessionWriter>,
    workers: &crate::pool::config::Choice,
) -> Pool {
    let mut opts = PoolOptions {
        watchdog: settings.watchdog_secs.map(Duration::from_secs_f64),
        ..Default::default()
    };
    // The workers' own stderr is kept beside the session (`SESSION.worker.log`).
    if let Some(w) = writer {
        let mut name = w.path().as_os_str().to_owned();
        name.push(".worker.log");
        opts.log = Some(std::path::PathBuf::from(name));
    }
    Pool::begin(workers, opts)
}

/// Starts what runs beside the input loop: the ncu search, the worker's hello, the
/// highlighter's loading and the signal handlers.
fn spawn_background_tasks(tx: &Tx, pool: &Pool, settings: &Settings, state: &AppState) {
    find_ncu_in_background(tx);
    hello_in_background(tx, pool);
    follow_pool(tx, pool);
    load_highlighter_in_background(tx, settings, state);
    forward_signals(tx);
}

/// Looks for ncu once, on a thread of its own.
fn find_ncu_in_background(tx: &Tx) {
    // ncu is looked for once, off the input loop.
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

/// Loads syntax highlighting on a thread of its own.
fn load_highlighter_in_background(tx: &Tx, settings: &Settings, state: &AppState) {
    // Syntax highlighting loads off the input loop.
    let tx = tx.clone();
    let name = settings
        .syntax_theme
        .clone()
        .unwrap_or_else(|| state.theme.syntax_theme.clone());
    let truecolor = state.theme.truecolor;
    std::thread::spawn(move || {
        deliver(
            &tx,
            AppEvent::HighlighterReady(highlight::Highlighter::new(&name, truecolor).map(Arc::new)),
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

/// Draws, waits for input or app events, updates and carries out effects until quit.
async fn event_loop(
    rtm: &mut Runtime,
    state: &mut AppState,
    rx: &mut mpsc::UnboundedReceiver<AppEvent>,
    terminal: &mut ratatui::DefaultTerminal,
    input: &mut Option<crossterm::event::EventStream>,
    t_start: Instant,
) -> Result<(), String> {
    let mut first = true;
    // Draws that failed in a row: one is logged and the next draws everything; a terminal that
    // fails again and again ends the app (every event is in the session file already).
    let mut failed_draws = 0;
    loop {
        match terminal.draw(|f| view::draw(f, state)) {
            Ok(frame) => {
                failed_draws = 0;
                let drawn = frame.area;
                // The state lays the panes out for the size drawn (at start, after the editor,
                // and whenever a resize went unseen): tell it, and draw again.
                if state.screen != (drawn.width, drawn.height) {
                    app::update(state, AppEvent::Resize(drawn.width, drawn.height));
                    continue;
                }
            }
            Err(e) if failed_draws < 2 => {
                failed_draws += 1;
                state.log(
                    LogLevel::Warn,
                    format!("cannot draw on the terminal ({e}); drawing everything again"),
                );
                if let Err(e) = handover::redraw_all(terminal) {
                    state.log(LogLevel::Warn, e);
                }
            }
            Err(e) => return Err(format!("cannot draw on the terminal: {e}")),
        }
        if first {
            first = false;
            let ms = t_start.elapsed().as_secs_f64() * 1e3;
            state.log(LogLevel::Info, format!("first frame in {ms:.0} ms"));
            continue;
        }
        let stream = input
            .as_mut()
            .expect("the input stream is reopened whenever the editor returns");
        let ev = tokio::select! {
            e = stream.next() => match e {
                Some(Ok(crossterm::event::Event::Key(k))) => AppEvent::Key(k),
                Some(Ok(crossterm::event::Event::Resize(w, h))) => AppEvent::Resize(w, h),
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(format!("terminal input: {e}")),
                None => return Ok(()),
            },
            e = rx.recv() => match e { Some(e) => e, None => return Ok(()) },
        };
        let mut pending = vec![ev];
        // coalesce whatever else is queued into one redraw
        while let Ok(e) = rx.try_recv() {
            pending.push(e);
            if pending.len() > 256 {
                break;
            }
        }
        for ev in pending {
            let fx = app::update(state, ev);
            for e in fx {
                match execute(rtm, state, e) {
                    Hand::Keep => {}
                    Hand::Editor(path) => {
                        // $EDITOR: give the terminal away, keep handling events, record what
                        // the editor left, then take the terminal back.
                        rtm.persist(state);
                        handover::release(terminal, input);
                        handover::run_editor(rtm, state, rx, path).await;
                        if let Err(e) = handover::take_back(terminal, input) {
                            state.log(LogLevel::Error, e);
                        }
                    }
                    Hand::Suspend => {
                        rtm.persist(state);
                        if let Err(e) = handover::suspend(terminal, input) {
                            state.log(LogLevel::Error, e);
                        }
                        state.log(LogLevel::Info, "continued after a suspend".into());
                    }
                }
            }
        }
        rtm.persist(state);
        if state.quit {
            return Ok(());
        }
    }
}

/// Starts the agent task: the driver that `agent::setup` builds, with the human gate and the
/// app as its sink (numbers from the session's recorder).
fn start_agent(
    rtm: &mut Runtime,
    state: &mut AppState,
    op: String,
    st: crate::agent::AgentState,
    sources: Vec<(String, Option<f64>)>,
    seed: u64,
) -> Result<(), String> {
    let cfg = state.agent_cfg.clone()?;
    let problem = state
        .suite
        .problem(&op)
        .ok_or_else(|| format!("unknown operator {op}"))?
        .clone();
    let hw = state
        .hw
        .clone()
        .ok_or("no hardware profile for T_SOL (set `hardware` in the settings)")?;
    let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
    let mut d = crate::agent::setup::build(
        crate::agent::setup::Setup {
            suite: &state.suite,
            problem,
            hw,
            cfg: &cfg,
            state: st,
            sources,
            seed,
            mode: crate::agent::driver::DecisionMode::Human,
            pool: rtm.pool.for_model(state.gpu_model()),
            device: rtm.device,
            device_name: match &state.worker {
                state::WorkerState::Ready { gpu, .. } => Some(gpu.clone()),
                _ => None,
            },
        },
        agent_link::TuiGate::new(ctl_rx),
        agent_link::TuiSink::new(rtm.tx.clone(), state.recorder.ids(), &op),
    )?;
    let tx = rtm.tx.clone();
    let name = op.clone();
    tokio::spawn(async move {
        let stop = d.run().await;
        deliver(
            &tx,
            AppEvent::Agent(name, app::AgentMsg::Finished(stop.to_string())),
        );
    });
    rtm.agents.insert(op, ctl_tx);
    Ok(())
}

/// What the event loop does with the terminal after an effect.
enum Hand {
    /// Nothing: it keeps drawing.
    Keep,
    /// Gives the terminal to `$EDITOR` on this file.
    Editor(PathBuf),
    /// Gives the terminal to the shell and stops until continued.
    Suspend,
}

/// Carries out one effect; says when the terminal must be handed over.
fn execute(rtm: &mut Runtime, state: &mut AppState, e: Effect) -> Hand {
    let file = match e {
        Effect::StartAgent {
            op,
            state: st,
            sources,
            seed,
        } => effects::start_agent_or_log(rtm, state, op, *st, sources, seed),
        Effect::Agent(op, c) => effects::send_to_agent(rtm, &op, c),
        Effect::Measure {
            op,
            rev,
            mid,
            source,
            full,
        } => effects::submit_measure(rtm, state, &op, rev, mid, source, full),
        Effect::RecordStanding {
            ws,
            suite,
            hardware,
            update,
        } => {
            rtm.standing.record(&rtm.tx, ws, &suite, &hardware, *update);
            None
        }
        Effect::Cancel { mid } => effects::cancel(rtm, mid),
        Effect::ExternalEdit {
            op: _,
            path,
            content,
        } => effects::external_edit(rtm, state, path, &content),
        Effect::Playback(p) => effects::playback(rtm, p),
        Effect::Profile {
            op,
            rev,
            shape,
            source,
            device,
            ncu,
        } => {
            let index = rtm.device;
            let job = ProfileJob {
                op,
                rev,
                shape,
                source,
                device,
                index,
                ncu,
            };
            effects::start_profile(rtm, state, job)
        }
        Effect::OpenReplay(f) => effects::open_replay(rtm, f),
        Effect::ReadResults {
            file,
            op,
            rev,
            mid,
            briefs,
        } => {
            // A few lines of a file, read off the input loop.
            let tx = rtm.tx.clone();
            std::thread::spawn(move || {
                let result = crate::session::timeline::read_results(&file, &op, rev, mid, &briefs);
                deliver(
                    &tx,
                    AppEvent::ResultsRead {
                        op,
                        rev,
                        mid,
                        result,
                    },
                );
            });
            None
        }
        Effect::Suspend => return Hand::Suspend,
        Effect::Quit => None,
    };
    match file {
        Some(path) => Hand::Editor(path),
        None => Hand::Keep,
    }
}

struct ProfileJob {
    op: String,
    rev: u32,
    shape: u32,
    source: String,
    device: String,
    index: u32,
    ncu: Option<PathBuf>,
}

/// `p`: compile the candidate through the worker (for its spill figures, as the `profile`
/// command does), then run ncu on a blocking task: the input loop never waits.
async fn run_profile(
    suite: Arc<Suite>,
    client: Pool,
    j: ProfileJob,
) -> Result<Box<crate::profile::Profile>, String> {
    use crate::contract::protocol::Source;
    let p = suite
        .problem(&j.op)
        .ok_or_else(|| format!("{} is not in the suite", j.op))?
        .clone();
    let cand = Source {
        name: format!("{} v{}", j.op, j.rev),
        code: j.source,
        defines: Default::default(),
    };
    let resources =
        crate::contract::outcome::compile_resources(&client, &p, &cand, j.shape).await?;
    tokio::task::spawn_blocking(move || {
        let opts = match j.ncu {
            Some(ncu) => crate::profile::NcuOptions {
                ncu,
                clock_control: "none".into(),
                timeout: Duration::from_secs(180),
                source: false,
            },
            None => crate::profile::NcuOptions::find()?,
        };
        crate::profile::profile(
            &suite,
            &p,
            cand,
            j.shape,
            j.index,
            &opts,
            Some(&j.device),
            resources.as_ref(),
        )
        .map(Box::new)
    })
    .await
    .map_err(|e| format!("the profiler task failed: {e}"))?
    .map_err(String::from)
}

fn build_measure_job(
    state: &AppState,
    op: &str,
    _rev: u32,
    source: String,
    full: bool,
) -> Result<crate::contract::protocol::Job, String> {
    let p = state
        .suite
        .problem(op)
        .ok_or_else(|| format!("{op} is not in the suite"))?;
    let reference = crate::contract::kernels::suite_kernel(&state.suite, p, "reference.cu")?;
    let ids: Vec<u32> = p.shapes.iter().map(|s| s.id).collect();
    let cand = crate::contract::protocol::Source {
        name: format!("{op} v{_rev}"),
        code: source,
        defines: Default::default(),
    };
    Ok(crate::contract::job::build_job(
        p,
        cand,
        Some(reference),
        &ids,
        JobKind::All,
        if full { Mode::Full } else { Mode::Quick },
        state.hw.as_ref(),
    )?)
}

/// Watches one file; every debounced change sends its content.
fn watch(
    tx: &Tx,
    path: &Path,
) -> Result<notify_debouncer_mini::Debouncer<notify::RecommendedWatcher>, String> {
    use notify_debouncer_mini::{DebounceEventResult, new_debouncer};
    let target = path.to_path_buf();
    let tx = tx.clone();
    let canon = std::fs::canonicalize(&target).unwrap_or_else(|_| target.clone());
    let mut d = new_debouncer(
        Duration::from_millis(250),
        move |res: DebounceEventResult| {
            if let Ok(events) = res {
                let hit = events.iter().any(|e| e.path == target || e.path == canon);
                if hit {
                    let content = std::fs::read_to_string(&target).map_err(|e| e.to_string());
                    deliver(
                        &tx,
                        AppEvent::FileChanged {
                            path: target.clone(),
                            content,
                        },
                    );
                }
            }
        },
    )
    .map_err(|e| format!("cannot watch {}: {e}", path.display()))?;
    // Watch the folder: editors often save by renaming a new file over the old one.
    let dir = path.parent().unwrap_or(Path::new("."));
    d.watcher()
        .watch(dir, notify::RecursiveMode::NonRecursive)
        .map_err(|e| format!("cannot watch {}: {e}", dir.display()))?;
    Ok(d)
}
