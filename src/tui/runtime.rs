//! The runtime: it holds the terminal, runs the event loop (draw, wait for input or an app
//! event, `update`, carry out the effects, write the journal), carries out each `Effect` and
//! owns what those spawn (measurement jobs, the agents, profiles, playback, file watchers,
//! reads of a session file). `update` asks; only this module does.
//!
//! Invariants:
//! - Effects act on the workbench only (`execute` takes `&mut Workbench`): the view state is
//!   `update`'s to change and `draw`'s to read; the loop itself reads the screen size drawn.
//! - Nothing here blocks the input loop: jobs, profiles and agents run on tasks, file reads
//!   and ncu on threads; their results come back as `AppEvent`s through `event::deliver`.
//! - After each batch of events the journal's new records are appended to the session file
//!   (`persist`), and before the terminal is given away; a write error stops recording, never
//!   the app (the state keeps everything; the log says why).
//! - While `$EDITOR` has the terminal the app's events are still handled (measurements go on);
//!   what the editor left in the file is recorded through `update` and written to the session
//!   before the terminal is taken back (`handover` gives it and takes it back).
//! - At the end the terminal is restored first, then the session file synced, the standing's
//!   queued records written and the jobs still running cancelled.

use super::event::{AgentCtl, AgentMsg, AppEvent, Effect, SessionFile, Tx, deliver};
use super::state::AppState;
use super::update::update;
use super::workbench::{Workbench, WorkerState};
use super::{agent_link, handover, standing_writer, startup, view};
use crate::contract::protocol::{Event, Job, JobKind, Mode, Source, Verdict};
use crate::contract::runner::{JobEvent, Runner};
use crate::pool::Pool;
use crate::session::SessionWriter;
use crate::session::model::LogLevel;
use crate::suite::{Suite, Workspace};
use crossterm::event::EventStream;
use futures::StreamExt;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Runs the TUI until quit. Returns the exit code.
pub fn run(ws: &Workspace, opts: startup::Options) -> Result<i32, String> {
    let t_start = Instant::now();
    let p = startup::prepare(ws, &opts)?;
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

/// What the runtime holds beside the state: the channel to the app, the pool, and what the
/// effects started.
struct Runtime {
    tx: Tx,
    /// The GPU index (for ncu's target).
    device: u32,
    /// Control channels of the running agents, by operator.
    agents: BTreeMap<String, mpsc::UnboundedSender<AgentCtl>>,
    /// The workers (local GPUs or the configured pool).
    pool: Pool,
    /// The pool's job of each running measurement, by measurement number.
    jobs: BTreeMap<u64, u64>,
    watchers: Vec<notify_debouncer_mini::Debouncer<notify::RecommendedWatcher>>,
    playback: Option<tokio::task::JoinHandle<()>>,
    /// The editor of the settings (else `$VISUAL`, `$EDITOR`, vi).
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
    fn persist(&mut self, work: &mut Workbench) {
        let Some(w) = self.writer.as_mut() else {
            self.written = work.journal.len();
            return;
        };
        for rec in &work.journal[self.written.min(work.journal.len())..] {
            if let Err(e) = w.write(rec) {
                self.writer = None;
                work.log(
                    LogLevel::Error,
                    format!("session: cannot write ({e}); recording stopped"),
                );
                break;
            }
        }
        self.written = work.journal.len();
    }
}

async fn main_loop(p: startup::Prepared, t_start: Instant) -> Result<i32, String> {
    let startup::Prepared {
        mut state,
        settings,
        writer,
        workers,
    } = p;
    let (tx, mut rx) = mpsc::unbounded_channel::<AppEvent>();
    let pool = startup::spawn_pool(&settings, writer.as_ref(), &workers);
    startup::spawn_feeds(&tx, &pool, &settings, &state);
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
    rtm.persist(&mut state.work);
    // None while the editor or the shell has the terminal.
    let mut input = Some(EventStream::new());
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
    finish(&mut rtm, &mut rx);
    result.map(|_| state.work.exit_status)
}

/// After the terminal is restored: the session on the disk, the standing's queued records
/// written (what went wrong with them said on stderr, the screen being gone), the jobs still
/// running cancelled and playback stopped.
fn finish(rtm: &mut Runtime, rx: &mut mpsc::UnboundedReceiver<AppEvent>) {
    if let Some(w) = rtm.writer.as_mut()
        && let Err(e) = w.sync()
    {
        eprintln!("atrex-tui: {e}");
    }
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
}

/// Draws, waits for input or app events, updates and carries out effects until quit.
async fn event_loop(
    rtm: &mut Runtime,
    state: &mut AppState,
    rx: &mut mpsc::UnboundedReceiver<AppEvent>,
    terminal: &mut handover::Term,
    input: &mut Option<EventStream>,
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
                if state.view.screen != (drawn.width, drawn.height) {
                    update(state, AppEvent::Resize(drawn.width, drawn.height));
                    continue;
                }
            }
            Err(e) if failed_draws < 2 => {
                failed_draws += 1;
                state.work.log(
                    LogLevel::Warn,
                    format!("cannot draw on the terminal ({e}); drawing everything again"),
                );
                if let Err(e) = handover::redraw_all(terminal) {
                    state.work.log(LogLevel::Warn, e);
                }
            }
            Err(e) => return Err(format!("cannot draw on the terminal: {e}")),
        }
        if first {
            first = false;
            let ms = t_start.elapsed().as_secs_f64() * 1e3;
            state
                .work
                .log(LogLevel::Info, format!("first frame in {ms:.0} ms"));
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
            for e in update(state, ev) {
                match execute(rtm, &mut state.work, e) {
                    Hand::Keep => {}
                    Hand::Editor(path) => {
                        // $EDITOR: give the terminal away, keep handling events, record what
                        // the editor left, then take the terminal back.
                        rtm.persist(&mut state.work);
                        handover::release(terminal, input);
                        run_editor(rtm, state, rx, path).await;
                        if let Err(e) = handover::take_back(terminal, input) {
                            state.work.log(LogLevel::Error, e);
                        }
                    }
                    Hand::Suspend => {
                        rtm.persist(&mut state.work);
                        if let Err(e) = handover::suspend(terminal, input) {
                            state.work.log(LogLevel::Error, e);
                        }
                        state
                            .work
                            .log(LogLevel::Info, "continued after a suspend".into());
                    }
                }
            }
        }
        rtm.persist(&mut state.work);
        if state.work.quit {
            return Ok(());
        }
    }
}

/// Runs `$EDITOR` on `path` (the terminal already released), handling the app's events while
/// it runs; when it exits, what it left in the file is recorded (through `update`) and written
/// to the session before anything touches the terminal again.
async fn run_editor(
    rtm: &mut Runtime,
    state: &mut AppState,
    rx: &mut mpsc::UnboundedReceiver<AppEvent>,
    path: PathBuf,
) {
    let editor = rtm
        .editor
        .clone()
        .or_else(|| std::env::var("VISUAL").ok())
        .or_else(|| std::env::var("EDITOR").ok())
        .unwrap_or_else(|| "vi".into());
    let mut parts = editor.split_whitespace();
    let prog = parts.next().unwrap_or("vi").to_string();
    let args: Vec<String> = parts.map(|s| s.to_string()).collect();
    let child = tokio::process::Command::new(&prog)
        .args(&args)
        .arg(&path)
        .spawn();
    let status = match child {
        Ok(mut c) => loop {
            tokio::select! {
                st = c.wait() => break match st { Ok(s) => s.to_string(), Err(e) => e.to_string() },
                Some(ev) = rx.recv() => {
                    for e in update(state, ev) {
                        match execute(rtm, &mut state.work, e) {
                            Hand::Keep => {}
                            // A second editor cannot start while this one runs.
                            Hand::Editor(p) => state.work.log(
                                LogLevel::Warn,
                                format!("{}: an editor is already open", p.display()),
                            ),
                            // The editor suspended its process group (its own Ctrl-Z): stop
                            // with it, the terminal being the editor's.
                            Hand::Suspend => handover::stop_this_process(),
                        }
                    }
                    rtm.persist(&mut state.work);
                }
            }
        },
        Err(e) => format!("cannot start `{editor}`: {e}"),
    };
    let content = std::fs::read_to_string(&path).map_err(|e| e.to_string());
    let fx = update(
        state,
        AppEvent::EditorExited {
            path,
            status,
            content,
        },
    );
    // A save's effects are measurements: none of them takes the terminal.
    for e in fx {
        let _ = execute(rtm, &mut state.work, e);
    }
    rtm.persist(&mut state.work);
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
fn execute(rtm: &mut Runtime, work: &mut Workbench, e: Effect) -> Hand {
    match e {
        Effect::StartAgent {
            op,
            state: st,
            sources,
            seed,
        } => {
            if let Err(e) = start_agent(rtm, work, op.clone(), *st, sources, seed) {
                if let Some(a) = work.agents.get_mut(&op) {
                    a.running = false;
                }
                work.log(LogLevel::Error, format!("agent on {op}: cannot start: {e}"));
            }
        }
        Effect::Agent(op, c) => {
            // A control message for an agent that has finished is moot.
            if let Some(tx) = rtm.agents.get(&op)
                && tx.send(c).is_err()
            {
                rtm.agents.remove(&op);
            }
        }
        Effect::Measure {
            op,
            rev,
            mid,
            source,
            full,
        } => submit_measure(rtm, work, &op, rev, mid, source, full),
        Effect::RecordStanding {
            ws,
            suite,
            hardware,
            update,
        } => rtm.standing.record(&rtm.tx, ws, &suite, &hardware, *update),
        Effect::Cancel { mid } => {
            if let Some(id) = rtm.jobs.remove(&mid) {
                rtm.pool.cancel(id);
            }
        }
        Effect::ExternalEdit {
            op: _,
            path,
            content,
        } => {
            if external_edit(rtm, work, &path, &content) {
                return Hand::Editor(path);
            }
        }
        Effect::Playback(p) => playback(rtm, p),
        Effect::Profile {
            op,
            rev,
            shape,
            source,
            device,
            ncu,
        } => {
            let job = ProfileJob {
                op,
                rev,
                shape,
                source,
                device,
                index: rtm.device,
                ncu,
            };
            start_profile(rtm, work, job);
        }
        Effect::OpenReplay(f) => open_replay(rtm, f),
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
        }
        Effect::Suspend => return Hand::Suspend,
        Effect::Quit => {}
    }
    Hand::Keep
}

/// Starts the agent task: the driver that `agent::setup` builds, with the human gate and the
/// app as its sink (numbers from the session's recorder).
fn start_agent(
    rtm: &mut Runtime,
    work: &mut Workbench,
    op: String,
    st: crate::agent::AgentState,
    sources: Vec<(String, Option<f64>)>,
    seed: u64,
) -> Result<(), String> {
    let cfg = work.agent_cfg.clone()?;
    let problem = work
        .suite
        .problem(&op)
        .ok_or_else(|| format!("unknown operator {op}"))?
        .clone();
    let hw = work
        .hw
        .clone()
        .ok_or("no hardware profile for T_SOL (set `hardware` in the settings)")?;
    let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
    let mut d = crate::agent::setup::build(
        crate::agent::setup::Setup {
            suite: &work.suite,
            problem,
            hw,
            cfg: &cfg,
            state: st,
            sources,
            seed,
            mode: crate::agent::driver::DecisionMode::Human,
            pool: rtm.pool.for_model(work.gpu_model()),
            device: rtm.device,
            device_name: match &work.worker {
                WorkerState::Ready { gpu, .. } => Some(gpu.clone()),
                _ => None,
            },
        },
        agent_link::TuiGate::new(ctl_rx),
        agent_link::TuiSink::new(rtm.tx.clone(), work.recorder.ids(), &op),
    )?;
    let tx = rtm.tx.clone();
    let name = op.clone();
    tokio::spawn(async move {
        let stop = d.run().await;
        deliver(
            &tx,
            AppEvent::Agent(name, AgentMsg::Finished(stop.to_string())),
        );
    });
    rtm.agents.insert(op, ctl_tx);
    Ok(())
}

/// Submits a measurement job and forwards its events to the app until it ends; a job that
/// cannot be built ends like a lost one, through the event queue.
fn submit_measure(
    rtm: &mut Runtime,
    work: &Workbench,
    op: &str,
    rev: u32,
    mid: u64,
    source: String,
    full: bool,
) {
    let job = match measure_job(work, op, rev, source, full) {
        Ok(job) => job,
        Err(message) => {
            let event = JobEvent::WorkerLost {
                verdict: Verdict::Error,
                message,
            };
            return deliver(&rtm.tx, AppEvent::Job { mid, event });
        }
    };
    let (id, mut erx) = rtm.pool.for_model(work.gpu_model()).submit(job);
    rtm.jobs.insert(mid, id);
    let tx = rtm.tx.clone();
    tokio::spawn(async move {
        while let Some(ev) = erx.recv().await {
            let end = matches!(
                ev,
                JobEvent::Worker(Event::Done { .. }) | JobEvent::WorkerLost { .. }
            );
            if tx.send(AppEvent::Job { mid, event: ev }).is_err() || end {
                break;
            }
        }
    });
}

/// The job that measures a revision on every shape, against the suite's reference.
fn measure_job(
    work: &Workbench,
    op: &str,
    rev: u32,
    source: String,
    full: bool,
) -> Result<Job, String> {
    let p = work
        .suite
        .problem(op)
        .ok_or_else(|| format!("{op} is not in the suite"))?;
    let reference = crate::contract::kernels::suite_kernel(&work.suite, p, "reference.cu")?;
    let ids: Vec<u32> = p.shapes.iter().map(|s| s.id).collect();
    let cand = Source {
        name: format!("{op} v{rev}"),
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
        work.hw.as_ref(),
    )?)
}

/// Writes the kernel to its file and watches it; false (the log says why) when it cannot be
/// written, and no editor starts.
fn external_edit(rtm: &mut Runtime, work: &mut Workbench, path: &Path, content: &str) -> bool {
    if let Some(d) = path.parent()
        && let Err(e) = std::fs::create_dir_all(d)
    {
        work.log(LogLevel::Error, format!("{}: {e}", d.display()));
        return false;
    }
    if let Err(e) = std::fs::write(path, content) {
        work.log(LogLevel::Error, format!("{}: {e}", path.display()));
        return false;
    }
    match watch(&rtm.tx, path) {
        Ok(w) => rtm.watchers.push(w),
        Err(e) => work.log(
            LogLevel::Warn,
            format!("cannot watch {}: {e}", path.display()),
        ),
    }
    true
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

/// Stops replay playback, and restarts it with a tick every `period` when given.
fn playback(rtm: &mut Runtime, p: Option<Duration>) {
    if let Some(h) = rtm.playback.take() {
        h.abort();
    }
    if let Some(period) = p {
        let tx = rtm.tx.clone();
        rtm.playback = Some(tokio::spawn(async move {
            let mut iv = tokio::time::interval(period);
            iv.tick().await;
            loop {
                iv.tick().await;
                if tx.send(AppEvent::Tick).is_err() {
                    break;
                }
            }
        }));
    }
}

/// A deep profile asked for: the revision, its shape, the GPU (name and index) and ncu.
struct ProfileJob {
    op: String,
    rev: u32,
    shape: u32,
    source: String,
    device: String,
    index: u32,
    ncu: Option<PathBuf>,
}

/// Profiles a revision on a task of its own; the result comes back as `AppEvent::Profiled`.
fn start_profile(rtm: &Runtime, work: &Workbench, job: ProfileJob) {
    let (suite, client, tx) = (
        work.suite.clone(),
        rtm.pool.for_model(work.gpu_model()),
        rtm.tx.clone(),
    );
    tokio::spawn(async move {
        let (op, rev) = (job.op.clone(), job.rev);
        let result = run_profile(suite, client, job).await;
        deliver(&tx, AppEvent::Profiled { op, rev, result });
    });
}

/// `p`: compile the candidate through the worker (for its spill figures, as the `profile`
/// command does), then run ncu on a blocking task: the input loop never waits.
async fn run_profile(
    suite: Arc<Suite>,
    client: Pool,
    j: ProfileJob,
) -> Result<Box<crate::profile::Profile>, String> {
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
            crate::profile::Gpu {
                index: j.index,
                name: Some(&j.device),
            },
            &opts,
            resources.as_ref(),
        )
        .map(Box::new)
    })
    .await
    .map_err(|e| format!("the profiler task failed: {e}"))?
    .map_err(String::from)
}

/// Reads a recorded session (a file or a built-in demo) and hands it to replay.
fn open_replay(rtm: &Runtime, f: SessionFile) {
    let result = match &f.path {
        Some(p) => crate::session::timeline::load(p, crate::session::timeline::LAZY_FROM),
        None => match crate::session::demos::demo(&f.name) {
            Some(text) => crate::session::parse_text(&f.name, text).map(|mut l| {
                let records = std::mem::take(&mut l.records);
                (records.into(), l)
            }),
            None => Err(crate::session::store::SessionError::Other {
                file: f.name.clone(),
                message: "no such built-in session".into(),
            }),
        },
    };
    deliver(
        &rtm.tx,
        AppEvent::ReplayLoaded {
            name: f.name,
            result: result.map_err(|e| e.to_string()),
        },
    );
}
