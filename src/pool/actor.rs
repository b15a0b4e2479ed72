//! The pool's task. A pool is workers behind one work queue (docs/cluster.md): local GPUs, or
//! workers that launch templates start on other machines (ssh, srun, kubectl exec). One task
//! owns the queue (`scheduler::Queue`) and every worker's state; jobs, leases and the workers'
//! news reach it as messages, so nothing is shared but the status it publishes.
//!
//! Invariants:
//! - a job's shapes are units of one shape each, run whole on one worker (so every sample of a
//!   shape comes from one worker), the largest T_SOL first across every job in the queue;
//! - a unit lost with its worker is requeued once (to another worker when one fits); its second
//!   loss is its result, naming both workers and causes; a unit that never started (its worker
//!   could not be started) is requeued without counting;
//! - a worker that cannot start or greet is down and tried again with exponential backoff (1 s
//!   doubling to 60 s) while the others carry on; a job that no worker up can take, while none
//!   is starting, ends at once with why;
//! - a lease (`Lease`) holds one worker for a sequence of jobs (the agent's A B B A runs):
//!   nothing else is dispatched to it until the lease is dropped;
//! - the job's owner sees one stream: compile results once, progress counting the job's shapes,
//!   each shape's result (naming its worker) and one final `done` (the first failing shape's
//!   verdict, as a single worker would report it) or `WorkerLost`.
//!
//! This file holds the actor's state, the workers' lifecycle (start, greeting, backoff), the
//! messages it handles and the status it publishes; `units` holds what it does with jobs.

use super::client::{WorkerClient, WorkerConfig};
use super::config::WorkerSpec;
use super::handle::{Cmd, Lease, PoolOptions};
use super::handshake::{self, Identity};
use super::scheduler::{Queue, Seat, Unit};
use super::status::{PoolStatus, SeatState, WorkerStatus};
use crate::contract::protocol::*;
use crate::contract::runner::JobEvent;
use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// The longest wait between two starts of a worker that is down.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Shapes of one job lost in a row (each after its requeue) after which the job stops.
pub const MAX_CONSECUTIVE_LOST: u32 = super::guard::MAX_CONSECUTIVE_LOST;

/// The wait before the `attempts`-th new start of a worker that is down: 1 s, doubling, at most
/// [`MAX_BACKOFF`].
pub fn backoff(attempts: u32) -> Duration {
    let secs = 1u64 << attempts.saturating_sub(1).min(16);
    Duration::from_secs(secs).min(MAX_BACKOFF)
}

/// A unit running on a worker.
pub(super) struct Running {
    pub(super) unit: Unit,
    /// The client's job id.
    pub(super) cid: u64,
    /// Events received so far.
    pub(super) events: usize,
    /// The shape's result, kept until the unit ends.
    pub(super) result: Option<ShapeResult>,
}

pub(super) struct SeatRec {
    pub(super) spec: WorkerSpec,
    pub(super) command: String,
    pub(super) client: WorkerClient,
    pub(super) state: SeatState,
    pub(super) identity: Option<Identity>,
    pub(super) error: Option<String>,
    /// Failed starts in a row.
    pub(super) attempts: u32,
    pub(super) greeted: bool,
    pub(super) running: Option<Running>,
    pub(super) leased: bool,
}

impl SeatRec {
    pub(super) fn name(&self) -> String {
        if let Some(l) = &self.spec.label {
            return l.clone();
        }
        match &self.identity {
            Some(id) => id.name(self.spec.device),
            None => format!("`{}`", self.command),
        }
    }
}

pub(super) struct JobRun {
    pub(super) id: u64,
    pub(super) events: mpsc::UnboundedSender<JobEvent>,
    pub(super) job: Job,
    /// Run as it is on one worker (compile and dump jobs), not cut into shapes.
    pub(super) whole: bool,
    pub(super) total: usize,
    pub(super) finished: usize,
    pub(super) first_failure: Option<(Verdict, String)>,
    pub(super) compiled: BTreeSet<String>,
    pub(super) consecutive_lost: u32,
    /// What is left of the job's kernel-output budget: a job cut into one-shape units keeps
    /// the bound of one job (each worker counts only its unit's share).
    pub(super) output_left: usize,
    /// Whether the job's output already carried the "not kept" note.
    pub(super) said_dropped: bool,
}

pub(super) struct LeaseWait {
    pub(super) model: Option<String>,
    pub(super) reply: oneshot::Sender<Result<Lease, super::PoolError>>,
}

pub(super) struct Actor {
    pub(super) seats: Vec<SeatRec>,
    pub(super) queue: Queue,
    pub(super) jobs: Vec<JobRun>,
    pub(super) leases: VecDeque<LeaseWait>,
    pub(super) tx: mpsc::UnboundedSender<Cmd>,
    pub(super) status: watch::Sender<PoolStatus>,
    pub(super) requeued: u64,
    pub(super) opts: PoolOptions,
}

impl Actor {
    pub(super) fn new(
        tx: mpsc::UnboundedSender<Cmd>,
        status: watch::Sender<PoolStatus>,
        opts: PoolOptions,
    ) -> Actor {
        Actor {
            seats: Vec::new(),
            queue: Queue::default(),
            jobs: Vec::new(),
            leases: VecDeque::new(),
            tx,
            status,
            requeued: 0,
            opts,
        }
    }

    pub(super) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Cmd>) {
        while let Some(cmd) = rx.recv().await {
            self.handle(cmd);
            self.dispatch();
            self.publish();
            // Every handle gone and nothing left to do: the pool ends.
            if self.status.receiver_count() == 0 && self.jobs.is_empty() && self.leases.is_empty() {
                break;
            }
        }
    }

    pub(super) fn add(&mut self, spec: WorkerSpec) {
        let mut cfg = WorkerConfig::for_spec(&spec);
        if let Some(l) = &self.opts.log {
            cfg.log = Some(l.clone());
        }
        if let Some(w) = self.opts.watchdog {
            cfg.watchdog = w;
        }
        let command = cfg.command_line();
        self.seats.push(SeatRec {
            spec,
            command,
            client: WorkerClient::spawn(cfg),
            state: SeatState::Starting,
            identity: None,
            error: None,
            attempts: 0,
            greeted: false,
            running: None,
            leased: false,
        });
        self.greet(self.seats.len() - 1);
    }

    /// Starts (if need be) and greets a worker; the answer comes back as `Greeted`.
    pub(super) fn greet(&mut self, w: usize) {
        let Some(seat) = self.seats.get_mut(w) else {
            return;
        };
        seat.state = SeatState::Starting;
        let (client, tx) = (seat.client.clone(), self.tx.clone());
        tokio::spawn(async move {
            let result = client.hello().await;
            // The pool may have ended meanwhile.
            if tx.send(Cmd::Greeted { worker: w, result }).is_err() {}
        });
    }

    pub(super) fn down(&mut self, w: usize, error: String) {
        let Some(seat) = self.seats.get_mut(w) else {
            return;
        };
        seat.state = SeatState::Down;
        seat.error = Some(error);
        seat.attempts += 1;
        seat.greeted = true;
        let wait = backoff(seat.attempts);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            if tx.send(Cmd::Retry { worker: w }).is_err() {}
        });
    }

    pub(super) fn handle(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Submit {
                id,
                job,
                model,
                events,
            } => self.submit(id, *job, model, events),
            Cmd::Cancel { id } => self.cancel(id),
            Cmd::Add { spec } => self.add(*spec),
            Cmd::Lease { model, reply } => self.leases.push_back(LeaseWait { model, reply }),
            Cmd::Release { worker } => {
                if let Some(s) = self.seats.get_mut(worker)
                    && s.leased
                {
                    s.leased = false;
                    if s.state == SeatState::Busy {
                        s.state = SeatState::Idle;
                    }
                }
            }
            Cmd::Greeted { worker, result } => self.greeted(worker, result),
            Cmd::Retry { worker } => {
                if self
                    .seats
                    .get(worker)
                    .is_some_and(|s| s.state == SeatState::Down)
                {
                    self.greet(worker);
                }
            }
            Cmd::Unit { worker, cid, ev } => self.unit_event(worker, cid, ev),
        }
    }

    pub(super) fn greeted(&mut self, w: usize, result: Result<Event, super::WorkerError>) {
        let Some(seat) = self.seats.get_mut(w) else {
            return;
        };
        let name = seat.name();
        let identity = result.and_then(|ev| Ok(handshake::check(&name, &ev)?));
        match identity {
            Ok(id) if id.device.is_some() => {
                seat.identity = Some(id);
                seat.state = if seat.leased {
                    SeatState::Busy
                } else {
                    SeatState::Idle
                };
                seat.error = None;
                seat.attempts = 0;
                seat.greeted = true;
            }
            Ok(id) => {
                let why = format!(
                    "{} has no GPU {}",
                    id.host.as_deref().unwrap_or("its machine"),
                    seat.spec.device
                );
                seat.identity = Some(id);
                self.down(w, why);
            }
            Err(e) => self.down(w, e.to_string()),
        }
    }

    pub(super) fn seats(&self) -> Vec<Seat> {
        self.seats
            .iter()
            .map(|s| Seat {
                group: s.spec.group.clone(),
                model: s
                    .identity
                    .as_ref()
                    .and_then(|i| i.gpu().map(str::to_string)),
                up: matches!(s.state, SeatState::Idle | SeatState::Busy),
            })
            .collect()
    }

    pub(super) fn names(&self) -> Vec<String> {
        self.seats.iter().map(|s| s.name()).collect()
    }

    pub(super) fn snapshot(&self) -> PoolStatus {
        let mut workers: Vec<WorkerStatus> = self
            .seats
            .iter()
            .map(|s| {
                let id = s.identity.as_ref();
                WorkerStatus {
                    name: s.name(),
                    command: s.command.clone(),
                    templated: s.spec.launch.is_some(),
                    group: s.spec.group.clone(),
                    device: s.spec.device,
                    host: id.and_then(|i| i.host.clone()),
                    gpu: id.and_then(|i| i.gpu().map(str::to_string)),
                    gpu_info: id.and_then(|i| i.device.clone()),
                    driver: id.map(|i| i.probe.driver_version.clone()),
                    nvrtc: id.and_then(|i| i.probe.nvrtc_version.clone()),
                    protocol: id.map(|i| i.protocol),
                    tool_version: id.map(|i| i.tool_version.clone()),
                    visible: id
                        .map(|i| i.probe.devices.iter().map(|d| d.index).collect())
                        .unwrap_or_default(),
                    state: s.state,
                    error: s.error.clone(),
                    restarts: s.client.restarts.load(Ordering::SeqCst),
                    start_s: match s.client.start_us.load(Ordering::SeqCst) {
                        0 => None,
                        us => Some(us as f64 / 1e6),
                    },
                    greeted: s.greeted,
                }
            })
            .collect();
        // Two workers of one name (srun allocations on one node) are told apart.
        let mut seen: Vec<String> = Vec::new();
        for w in &mut workers {
            let n = seen.iter().filter(|s| **s == w.name).count();
            seen.push(w.name.clone());
            if n > 0 {
                w.name = format!("{}#{}", w.name, n + 1);
            }
        }
        PoolStatus {
            workers,
            queued: self.queue.len(),
            running: self.seats.iter().filter(|s| s.running.is_some()).count(),
            requeued: self.requeued,
        }
    }

    pub(super) fn publish(&self) {
        let now = self.snapshot();
        self.status.send_if_modified(|s| {
            if *s == now {
                false
            } else {
                *s = now;
                true
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_a_minute() {
        let secs: Vec<u64> = (1..=8).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff(1000), MAX_BACKOFF);
    }
}
