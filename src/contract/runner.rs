//! What runs a job: the interface that commands, the TUI, the agent and profiles submit jobs
//! through. One worker (`pool::client::WorkerClient`), a pool of them (`pool::Pool`, which spreads
//! a job's shapes over its workers) and one worker leased from a pool (`pool::Lease`) implement it,
//! so that code which only measures depends on what a job is, not on who runs it.
//!
//! Invariant: a job's events end with `Done` (the worker's) or `WorkerLost` (the runner's: the
//! worker died or hung), so an owner always learns how its job ended.

use super::protocol::{Event, Job, Verdict};
use tokio::sync::mpsc;

/// What a runner tells a job's owner besides the worker's own events.
#[derive(Debug, Clone)]
pub enum JobEvent {
    /// An event from the worker.
    Worker(Event),
    /// The worker died or hung during the job; it is being restarted. The job ends with this.
    WorkerLost { verdict: Verdict, message: String },
}

/// Something jobs are submitted to (see the module).
pub trait Runner: Send + Sync {
    /// Queues a job; its events arrive on the receiver, ending with `Done` or `WorkerLost`.
    fn submit(&self, job: Job) -> (u64, mpsc::UnboundedReceiver<JobEvent>);
    /// Cancels a job (queued: at once; running: between shapes).
    fn cancel(&self, id: u64);
}
