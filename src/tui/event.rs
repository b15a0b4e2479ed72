//! What happens to the app (`AppEvent`) and how it reaches the app (`Tx`, `deliver`), what the
//! agent task and the app tell each other (`AgentMsg`, `AgentCtl`), and the side effects
//! `update` asks the runtime for (`Effect`).

use crate::contract::protocol::{DeviceInfo, ShapeResult};
use crate::contract::runner::JobEvent;
use crate::session::model::{Brief, LogLevel, Place};
use crate::session::{Decision, SessionEvent};
use crate::tui::highlight::Highlighter;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

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

/// Everything that can happen to the app.
#[derive(Debug)]
pub enum AppEvent {
    Key(KeyEvent),
    Resize(u16, u16),
    /// The first worker up (device, driver, NVRTC) once every worker's first start finished,
    /// or why none is up.
    Hello(Result<HelloInfo, String>),
    /// The worker pool changed (workers up, busy, down; restarts; the queue).
    Pool(crate::pool::PoolStatus),
    /// An event of a measurement job.
    Job {
        mid: u64,
        event: JobEvent,
    },
    /// The syntax highlighter finished loading.
    HighlighterReady(Result<Arc<Highlighter>, String>),
    /// A watched kernel file was saved.
    FileChanged {
        path: PathBuf,
        content: Result<String, String>,
    },
    /// $EDITOR returned: how it ended, and the file as it left it (recorded like a save, so
    /// that a save the file watcher had not reported yet is not lost).
    EditorExited {
        path: PathBuf,
        status: String,
        content: Result<String, String>,
    },
    /// Replay playback step.
    Tick,
    /// SIGTERM / SIGHUP / SIGINT: its name and number (the exit status is 128 + the number).
    Signal(&'static str, i32),
    /// SIGTSTP (`kill -TSTP`, or an editor suspending its process group): suspend like Ctrl-Z.
    Stop,
    /// A message for the log from the runtime.
    Log(LogLevel, String),
    /// News from the agent of an operator.
    Agent(String, AgentMsg),
    /// Where ncu (Nsight Compute) is, or why it cannot be used (looked up once at start).
    NcuFound(Result<PathBuf, String>),
    /// A deep profile finished (or could not run).
    Profiled {
        op: String,
        rev: u32,
        result: Result<Box<crate::profile::Profile>, String>,
    },
    /// A recorded session asked for in the picker was read: its timeline and its warnings (a
    /// `Loaded` without records).
    ReplayLoaded {
        name: String,
        result: Result<(crate::session::Timeline, crate::session::Loaded), String>,
    },
    /// The whole results of a replayed revision's briefs were read from the session file
    /// (`Effect::ReadResults`).
    ResultsRead {
        op: String,
        rev: u32,
        mid: u64,
        result: Result<Vec<(Place, ShapeResult)>, String>,
    },
}

/// What the agent task sends to the app.
#[derive(Debug, Clone)]
pub enum AgentMsg {
    /// A session event to record (revisions, measurements, decisions, state changes).
    Record(SessionEvent),
    /// Live text of a streaming LLM reply.
    Stream(String),
    /// A retry or a corrective message: the streamed text so far is void.
    StreamReset,
    /// A tool call of the model starts (its `tool_call` event comes when it ends).
    ToolStarted { name: String, args: String },
    /// The loop ended (the stop reason was recorded already).
    Finished(String),
}

/// What the app tells an operator's running agent.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentCtl {
    Decided {
        rev: u32,
        decision: Decision,
    },
    Steer(String),
    Stop,
    Dropout,
    /// A deep profile of the agent's operator: its findings enter the next context.
    Profile(crate::agent::ProfileNote),
}

#[derive(Debug, Clone)]
pub struct HelloInfo {
    pub device: Option<DeviceInfo>,
    pub driver: String,
    pub nvrtc: Option<String>,
}

/// Side effects requested by `update`, carried out by the runtime.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Compile, check and time a revision (JobKind::All) on every shape, quick or full.
    Measure {
        op: String,
        rev: u32,
        mid: u64,
        source: String,
        /// 5 seeds and full timing (else Mode::Quick).
        full: bool,
    },
    /// Write a record to the workspace's standing (its kernel file, then the standing file).
    RecordStanding {
        /// The workspace.
        ws: PathBuf,
        suite: String,
        /// The hardware profile (the file).
        hardware: String,
        update: Box<crate::standing::Update>,
    },
    Cancel {
        mid: u64,
    },
    /// Write the kernel to `path`, watch it, suspend the TUI and run the editor on it.
    ExternalEdit {
        op: String,
        path: PathBuf,
        content: String,
    },
    /// Start (Some: period) or stop replay playback.
    Playback(Option<Duration>),
    /// Start the agent on an operator with its restored memory.
    StartAgent {
        op: String,
        state: Box<crate::agent::AgentState>,
        /// Sources measured earlier with their S_op (the tuner's memory).
        sources: Vec<(String, Option<f64>)>,
        seed: u64,
    },
    /// A message for the agent of an operator.
    Agent(String, AgentCtl),
    /// Profile a revision on one shape under Nsight Compute, on a blocking task; the result
    /// comes back as `AppEvent::Profiled`.
    Profile {
        op: String,
        rev: u32,
        shape: u32,
        source: String,
        /// The GPU's name (for the hardware profile of the findings).
        device: String,
        /// ncu when already found (else the task looks for it).
        ncu: Option<PathBuf>,
    },
    /// Read a recorded session and open it in replay (`AppEvent::ReplayLoaded`).
    OpenReplay(SessionFile),
    /// Read the whole results of the briefs of the revision on screen from the session file
    /// (`AppEvent::ResultsRead`).
    ReadResults {
        file: PathBuf,
        op: String,
        rev: u32,
        mid: u64,
        briefs: Vec<Brief>,
    },
    /// Give the terminal back to the shell and stop (Ctrl-Z, SIGTSTP); take it back and draw
    /// everything when continued (`fg`).
    Suspend,
    Quit,
}

/// A recorded session the picker offers: a file of the workspace or a built-in demo.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionFile {
    pub name: String,
    /// None: the built-in copy (`session::demos`).
    pub path: Option<PathBuf>,
    pub bytes: u64,
    /// Events (lines), when cheap to count.
    pub events: Option<usize>,
}

/// A key press, for tests and the runtime.
pub fn press(code: KeyCode) -> AppEvent {
    AppEvent::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

pub fn press_ctrl(c: char) -> AppEvent {
    AppEvent::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}
