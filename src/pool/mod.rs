//! Distribution: the workers that measure, and the one queue in front of them.
//!
//! Files: `client` (one worker: its jobs in order, the watchdog, restarts), `process` (its
//! process: start, greeting, streams, log), `error` (why a worker or the pool could not do
//! what was asked; how a worker ended), `guard` (every event
//! of a job checked against the job; what is kept when a worker is lost), `handshake` (`hello`:
//! versions must agree), `stop` (how a worker's launcher is asked to end), `config` (the
//! `[[workers]]` tables: which workers a command uses), `launch_command` (a launch template:
//! the ssh / srun / kubectl command line that starts a remote worker), `scheduler` (the queue's
//! order and placement, without I/O), `handle` (`Pool` and `Lease`: what the rest of the program
//! holds), `actor` (the one task that owns the queue and the workers' states), `units` (what the
//! actor does with jobs: units dispatched, events forwarded, losses requeued), `status` (what
//! the actor publishes), `spread` (one-shape jobs through the pool, longest first).
//!
//! Invariants: GPU work never runs in this process (a worker does it, `crate::worker`); a
//! worker's events reach a job's owner only after the guard checked them; everything a job
//! needs travels in the job (`crate::contract`), so any worker of the same version measures it
//! alike.

mod actor;
pub mod client;
pub mod config;
pub mod error;
pub(crate) mod guard;
mod handle;
pub(crate) mod handshake;
pub mod launch_command;
mod process;
pub(crate) mod scheduler;
pub(crate) mod spread;
mod status;
pub(crate) mod stop;
mod units;

pub use actor::{MAX_BACKOFF, MAX_CONSECUTIVE_LOST, backoff};
pub use error::{PoolError, RuntimeError, WorkerError};
pub use handle::{JOIN_LATER, Lease, Pool, PoolOptions};
pub use status::{HostCount, PoolStatus, SeatState, WorkerStatus};

/// The async runtime that worker clients, the TUI's tasks and the agent run on.
pub fn runtime() -> Result<tokio::runtime::Runtime, RuntimeError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| RuntimeError(e.into()))
}
