//! The pool's handles: `Pool` (submits jobs, asks for leases, follows the status) and `Lease`
//! (one worker held for a sequence of jobs). A handle only sends messages (`Cmd`) to the actor
//! (`actor`) and reads what it publishes; it holds none of the pool's state.
//!
//! Invariants: a handle is cheap to clone and the pool ends when every handle is gone; a job
//! submitted to a pool that has stopped ends at once with `WorkerLost`; a dropped lease gives
//! its worker back.

use super::actor::Actor;
use super::client::WorkerClient;
use super::config::{Choice, WorkerSpec};
use super::status::{PoolStatus, SeatState};
use crate::contract::protocol::*;
use crate::contract::runner::{JobEvent, Runner};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// How long a command waits for the other workers once one is up; those still starting join
/// the queue when they come up.
pub const JOIN_LATER: Duration = Duration::from_secs(30);

/// How the pool's workers are run.
#[derive(Debug, Clone, Default)]
pub struct PoolOptions {
    /// Where the workers' stderr is kept (default: the user's cache folder).
    pub log: Option<PathBuf>,
    /// The watchdog (default: `ATREX_WATCHDOG_SECS`, else 10 s).
    pub watchdog: Option<Duration>,
}

pub(super) enum Cmd {
    Submit {
        id: u64,
        job: Box<Job>,
        model: Option<String>,
        events: mpsc::UnboundedSender<JobEvent>,
    },
    Cancel {
        id: u64,
    },
    Add {
        spec: Box<WorkerSpec>,
    },
    Lease {
        model: Option<String>,
        reply: oneshot::Sender<Result<Lease, super::PoolError>>,
    },
    Release {
        worker: usize,
    },
    Greeted {
        worker: usize,
        result: Result<Event, super::WorkerError>,
    },
    Retry {
        worker: usize,
    },
    Unit {
        worker: usize,
        cid: u64,
        ev: JobEvent,
    },
}

/// A handle to a pool. Cheap to clone; the pool ends when every handle is gone.
#[derive(Clone)]
pub struct Pool {
    tx: mpsc::UnboundedSender<Cmd>,
    status: watch::Receiver<PoolStatus>,
    next_id: Arc<AtomicU64>,
    /// The GPU model jobs submitted through this handle are for (None: the first worker's).
    model: Option<String>,
}

impl Pool {
    /// Starts the pool's task and every worker (each greeted at once).
    pub fn spawn(specs: Vec<WorkerSpec>, opts: PoolOptions) -> Pool {
        let (tx, rx) = mpsc::unbounded_channel();
        let (stx, srx) = watch::channel(PoolStatus::default());
        let mut actor = Actor::new(tx.clone(), stx, opts);
        for s in specs {
            actor.add(s);
        }
        actor.publish();
        tokio::spawn(actor.run(rx));
        Pool {
            tx,
            status: srx,
            next_id: Arc::new(AtomicU64::new(1)),
            model: None,
        }
    }

    /// The workers a command chose: `--device N`, the listed ones, or one per local GPU (found
    /// from the first GPU's worker, which stays in the pool). Returns once every worker's first
    /// start has finished, or [`JOIN_LATER`] after the first worker is up (a worker still
    /// waiting for its allocation, as `srun` does, joins the queue when it comes up).
    pub async fn start(choice: &Choice, opts: PoolOptions) -> Pool {
        let pool = match choice {
            Choice::Device(d) => Pool::spawn(vec![WorkerSpec::local(*d)], opts),
            Choice::Listed { specs, .. } => Pool::spawn(specs.clone(), opts),
            Choice::Local => {
                let pool = Pool::spawn(vec![WorkerSpec::local(0)], opts);
                pool.add_local_gpus().await;
                pool
            }
        };
        let mut rx = pool.watch();
        let one_up_then_grace = async {
            if rx.wait_for(|s| s.up() > 0).await.is_ok() {
                tokio::time::sleep(JOIN_LATER).await;
            }
        };
        tokio::select! {
            _ = pool.ready() => {}
            _ = one_up_then_grace => {}
        }
        pool
    }

    /// As `start`, without waiting: the workers start in the background (the TUI).
    pub fn begin(choice: &Choice, opts: PoolOptions) -> Pool {
        match choice {
            Choice::Device(d) => Pool::spawn(vec![WorkerSpec::local(*d)], opts),
            Choice::Listed { specs, .. } => Pool::spawn(specs.clone(), opts),
            Choice::Local => {
                let pool = Pool::spawn(vec![WorkerSpec::local(0)], opts);
                let p = pool.clone();
                tokio::spawn(async move { p.add_local_gpus().await });
                pool
            }
        }
    }

    /// Once the first local worker is up: a worker for each other GPU its machine shows
    /// (returns once the pool holds them).
    async fn add_local_gpus(&self) {
        let st = self.ready().await;
        let Some(w) = st.workers.first().filter(|w| w.state != SeatState::Down) else {
            return;
        };
        let mut n = st.workers.len();
        for d in w.visible.iter().filter(|d| **d != w.device) {
            self.add(WorkerSpec::local(*d));
            n += 1;
        }
        let mut rx = self.status.clone();
        if rx.wait_for(|s| s.workers.len() >= n).await.is_err() {
            // The pool ended: nothing to wait for.
        }
    }

    /// Adds a worker (started and greeted at once).
    pub fn add(&self, spec: WorkerSpec) {
        // A pool whose task has ended takes nothing more.
        if self
            .tx
            .send(Cmd::Add {
                spec: Box::new(spec),
            })
            .is_err()
        {}
    }

    /// The status once every worker's first start has finished.
    pub async fn ready(&self) -> PoolStatus {
        let mut rx = self.status.clone();
        match rx.wait_for(|s| s.ready()).await {
            Ok(s) => s.clone(),
            Err(_) => self.status(),
        }
    }

    pub fn status(&self) -> PoolStatus {
        self.status.borrow().clone()
    }

    /// Follows the status (the TUI's pool line).
    pub fn watch(&self) -> watch::Receiver<PoolStatus> {
        self.status.clone()
    }

    /// A handle whose jobs run only on workers of this GPU model (S is per GPU model).
    pub fn for_model(&self, model: Option<String>) -> Pool {
        Pool {
            model,
            ..self.clone()
        }
    }

    /// Holds one worker (of this handle's GPU model) until the lease is dropped.
    pub async fn lease(&self) -> Result<Lease, super::PoolError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Cmd::Lease {
                model: self.model.clone(),
                reply,
            })
            .map_err(|_| super::PoolError::Stopped)?;
        rx.await.map_err(|_| super::PoolError::Stopped)?
    }
}

impl Runner for Pool {
    fn submit(&self, job: Job) -> (u64, mpsc::UnboundedReceiver<JobEvent>) {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (etx, erx) = mpsc::unbounded_channel();
        if let Err(mpsc::error::SendError(Cmd::Submit { events, .. })) = self.tx.send(Cmd::Submit {
            id,
            job: Box::new(job),
            model: self.model.clone(),
            events: etx,
        }) {
            tell(
                &events,
                JobEvent::WorkerLost {
                    verdict: Verdict::Error,
                    message: "the worker pool has stopped".into(),
                },
            );
        }
        (id, erx)
    }

    fn cancel(&self, id: u64) {
        // A pool that has stopped has nothing left to cancel.
        if self.tx.send(Cmd::Cancel { id }).is_err() {}
    }
}

/// One worker held for a sequence of jobs; released when dropped.
pub struct Lease {
    pub(super) worker: usize,
    /// The worker's name (host and device).
    pub name: String,
    pub(super) client: WorkerClient,
    pub(super) tx: mpsc::UnboundedSender<Cmd>,
}

impl Runner for Lease {
    fn submit(&self, job: Job) -> (u64, mpsc::UnboundedReceiver<JobEvent>) {
        self.client.submit(job)
    }
    fn cancel(&self, id: u64) {
        self.client.cancel(id)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // A pool that has stopped needs no release.
        if self
            .tx
            .send(Cmd::Release {
                worker: self.worker,
            })
            .is_err()
        {}
    }
}

pub(super) fn tell(owner: &mpsc::UnboundedSender<JobEvent>, ev: JobEvent) {
    // An owner that stopped listening (a cancelled or abandoned job) needs no news.
    if owner.send(ev).is_err() {}
}
