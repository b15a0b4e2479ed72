//! Why a worker, or the pool in front of the workers, could not do what was asked.
//!
//! Invariants: a message names the worker where one is known, and a worker that ended says how
//! (its exit, its last words on stderr, where its log is: [`Exit`]), never a bare "broken pipe".
//! What a worker itself answers with an error (`Event::Error`: no GPU, a calibration that
//! failed) is kept as its text, as the protocol carries it.

use super::handshake::HandshakeError;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Why a worker could not be started, greeted or asked.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WorkerError {
    /// `worker`: its label and command line, as the settings give them.
    #[error("cannot start the worker {worker}: {source}")]
    Spawn {
        worker: String,
        source: Arc<std::io::Error>,
    },
    #[error("worker has no {0}")]
    NoStream(&'static str),
    #[error("worker {worker} did not answer hello within {secs:.0} s")]
    HelloTimeout { worker: String, secs: f64 },
    #[error("worker {worker} ended before answering hello: {exit}")]
    EndedBeforeHello { worker: String, exit: Exit },
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
    #[error("worker stdin: {0}")]
    Stdin(Arc<std::io::Error>),
    #[error("a request could not be written: {0}")]
    Encode(Arc<serde_json::Error>),
    #[error("worker did not answer in time")]
    NoAnswer,
    #[error("{0}")]
    Ended(Exit),
    /// The worker's own error reply, as the protocol carries it.
    #[error("{0}")]
    Refused(String),
    #[error("worker did not start")]
    NotStarted,
    #[error("no hello yet")]
    NoHello,
    #[error("worker supervisor stopped")]
    SupervisorStopped,
    #[error("the worker is busy with a job")]
    Busy,
    #[error("the worker found no such GPU")]
    NoGpu,
    /// Another event than the one asked for (its debug form).
    #[error("unexpected worker reply {0}")]
    Unexpected(String),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// The async runtime could not be started.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot start the async runtime: {0}")]
pub struct RuntimeError(pub Arc<std::io::Error>);

crate::error::text_at_the_edge!(WorkerError, PoolError, RuntimeError);

/// Why the pool could not lease a worker.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PoolError {
    #[error("the worker pool has stopped")]
    Stopped,
    /// No worker of the pool can take it: `why` says which are down or of another GPU model.
    #[error("{why}")]
    Unplaceable { why: String },
}

/// How a worker ended, as the client saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum ExitCause {
    Signal(i32),
    /// Its exit status, as the system words it.
    Status(String),
    StoppedAnswering,
}

/// A worker that ended: how, its last words on stderr, where its log is, and whether a new
/// worker takes its place.
#[derive(Debug, Clone, PartialEq)]
pub struct Exit {
    pub how: ExitCause,
    pub last_words: Option<String>,
    pub log: Option<PathBuf>,
    pub restarted: bool,
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.how {
            ExitCause::Signal(sig) => write!(f, "worker killed by signal {sig}")?,
            ExitCause::Status(st) => write!(f, "worker exited with {st}")?,
            ExitCause::StoppedAnswering => f.write_str("worker stopped answering")?,
        }
        if let Some(w) = &self.last_words {
            write!(f, " (its last words: {w})")?;
        }
        if self.restarted {
            f.write_str("; a new worker was started")?;
        }
        if let Some(l) = &self.log {
            write!(f, "; worker log: {}", l.display())?;
        }
        Ok(())
    }
}
