//! A pool of workers behind one work queue (docs/cluster.md): local GPUs, or workers that launch
//! templates start on other machines (ssh, srun, kubectl exec). One task owns the queue
//! (`scheduler::Queue`) and every worker's state; jobs, leases and the workers' news reach it
//! as messages, so nothing is shared but the status it publishes.
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
//! - a lease ([`Lease`]) holds one worker for a sequence of jobs (the agent's A B B A runs):
//!   nothing else is dispatched to it until the lease is dropped;
//! - the job's owner sees one stream: compile results once, progress counting the job's shapes,
//!   each shape's result (naming its worker) and one final `done` (the first failing shape's
//!   verdict, as a single worker would report it) or `WorkerLost`.

use super::client::{WorkerClient, WorkerConfig};
use super::config::{Choice, WorkerSpec};
use super::handshake::{self, Identity};
use super::scheduler::{self, Loss, Queue, Seat, Unit};
use crate::contract::protocol::*;
use crate::contract::runner::{JobEvent, Runner};
use crate::worker::stdio;
use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// How long a command waits for the other workers once one is up; those still starting join
/// the queue when they come up.
pub const JOIN_LATER: Duration = Duration::from_secs(30);

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

/// A worker's state as the pool shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SeatState {
    /// Being started and greeted.
    Starting,
    /// Up and free.
    Idle,
    /// Up, running a shape or leased.
    Busy,
    /// Could not start or greet; tried again later.
    Down,
}

/// One worker of the pool, as shown by the TUI, `doctor` and the commands.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WorkerStatus {
    /// The label, else `host:device` once it answered hello, else its command.
    pub name: String,
    /// The command line that starts it.
    pub command: String,
    /// Started by a launch template (else this machine's default worker of a GPU).
    pub templated: bool,
    pub group: String,
    pub device: u32,
    pub host: Option<String>,
    pub gpu: Option<String>,
    /// Its GPU's description, once it answered hello.
    pub gpu_info: Option<DeviceInfo>,
    pub driver: Option<String>,
    pub nvrtc: Option<String>,
    pub protocol: Option<u32>,
    pub tool_version: Option<String>,
    /// The GPU indices its machine shows (from its hello).
    pub visible: Vec<u32>,
    pub state: SeatState,
    /// Why it is down (or why its last start failed).
    pub error: Option<String>,
    /// Restarts after a loss.
    pub restarts: u64,
    /// How long its last start took, from launch to its answer to `hello`, in seconds (through
    /// `srun`, the wait for the allocation included); None until it answered.
    pub start_s: Option<f64>,
    /// Whether its first start finished (up or down).
    pub greeted: bool,
}

/// The pool as a whole.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct PoolStatus {
    pub workers: Vec<WorkerStatus>,
    /// Shapes waiting for a worker.
    pub queued: usize,
    /// Shapes running.
    pub running: usize,
    /// Shapes put back on the queue after their worker was lost.
    pub requeued: u64,
}

/// Per host: workers up (free), busy, starting and down, and their restarts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostCount {
    pub up: usize,
    pub busy: usize,
    pub starting: usize,
    pub down: usize,
    pub restarts: u64,
}

impl PoolStatus {
    /// Every worker's first start has finished.
    pub fn ready(&self) -> bool {
        self.workers.iter().all(|w| w.greeted)
    }

    /// The first worker that is up.
    pub fn first_up(&self) -> Option<&WorkerStatus> {
        self.workers
            .iter()
            .find(|w| matches!(w.state, SeatState::Idle | SeatState::Busy))
    }

    pub fn up(&self) -> usize {
        self.workers
            .iter()
            .filter(|w| matches!(w.state, SeatState::Idle | SeatState::Busy))
            .count()
    }

    pub fn restarts(&self) -> u64 {
        self.workers.iter().map(|w| w.restarts).sum()
    }

    /// Workers per host (the host from hello, else the worker's name), in the order first seen.
    pub fn by_host(&self) -> Vec<(String, HostCount)> {
        let mut out: Vec<(String, HostCount)> = Vec::new();
        for w in &self.workers {
            let host = w
                .host
                .clone()
                .unwrap_or_else(|| w.name.split(':').next().unwrap_or(&w.name).to_string());
            let i = match out.iter().position(|(h, _)| *h == host) {
                Some(i) => i,
                None => {
                    out.push((host, HostCount::default()));
                    out.len() - 1
                }
            };
            let c = &mut out[i].1;
            match w.state {
                SeatState::Idle => c.up += 1,
                SeatState::Busy => c.busy += 1,
                SeatState::Starting => c.starting += 1,
                SeatState::Down => c.down += 1,
            }
            c.restarts += w.restarts;
        }
        out
    }

    /// Why nothing can run, when no worker is up: each worker's error.
    pub fn why_down(&self) -> String {
        let v: Vec<String> = self
            .workers
            .iter()
            .map(|w| {
                format!(
                    "{}: {}",
                    w.name,
                    w.error.as_deref().unwrap_or(match w.state {
                        SeatState::Starting => "starting",
                        _ => "down",
                    })
                )
            })
            .collect();
        if v.is_empty() {
            "the pool has no workers".into()
        } else {
            v.join("; ")
        }
    }
}

/// How the pool's workers are run.
#[derive(Debug, Clone, Default)]
pub struct PoolOptions {
    /// Where the workers' stderr is kept (default: the user's cache folder).
    pub log: Option<PathBuf>,
    /// The watchdog (default: `ATREX_WATCHDOG_SECS`, else 10 s).
    pub watchdog: Option<Duration>,
}

enum Cmd {
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
        reply: oneshot::Sender<Result<Lease, String>>,
    },
    Release {
        worker: usize,
    },
    Greeted {
        worker: usize,
        result: Result<Event, String>,
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
        let mut actor = Actor {
            seats: Vec::new(),
            queue: Queue::default(),
            jobs: Vec::new(),
            leases: VecDeque::new(),
            tx: tx.clone(),
            status: stx,
            requeued: 0,
            opts,
        };
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
    pub async fn lease(&self) -> Result<Lease, String> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Cmd::Lease {
                model: self.model.clone(),
                reply,
            })
            .map_err(|_| "the worker pool has stopped".to_string())?;
        rx.await
            .map_err(|_| "the worker pool has stopped".to_string())?
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
    worker: usize,
    /// The worker's name (host and device).
    pub name: String,
    client: WorkerClient,
    tx: mpsc::UnboundedSender<Cmd>,
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

fn tell(owner: &mpsc::UnboundedSender<JobEvent>, ev: JobEvent) {
    // An owner that stopped listening (a cancelled or abandoned job) needs no news.
    if owner.send(ev).is_err() {}
}

/// A unit running on a worker.
struct Running {
    unit: Unit,
    /// The client's job id.
    cid: u64,
    /// Events received so far.
    events: usize,
    /// The shape's result, kept until the unit ends.
    result: Option<ShapeResult>,
}

struct SeatRec {
    spec: WorkerSpec,
    command: String,
    client: WorkerClient,
    state: SeatState,
    identity: Option<Identity>,
    error: Option<String>,
    /// Failed starts in a row.
    attempts: u32,
    greeted: bool,
    running: Option<Running>,
    leased: bool,
}

impl SeatRec {
    fn name(&self) -> String {
        if let Some(l) = &self.spec.label {
            return l.clone();
        }
        match &self.identity {
            Some(id) => id.name(self.spec.device),
            None => format!("`{}`", self.command),
        }
    }
}

struct JobRun {
    id: u64,
    events: mpsc::UnboundedSender<JobEvent>,
    job: Job,
    /// Run as it is on one worker (compile and dump jobs), not cut into shapes.
    whole: bool,
    total: usize,
    finished: usize,
    first_failure: Option<(Verdict, String)>,
    compiled: BTreeSet<String>,
    consecutive_lost: u32,
    /// What is left of the job's kernel-output budget: a job cut into one-shape units keeps
    /// the bound of one job (each worker counts only its unit's share).
    output_left: usize,
    /// Whether the job's output already carried the "not kept" note.
    said_dropped: bool,
}

struct LeaseWait {
    model: Option<String>,
    reply: oneshot::Sender<Result<Lease, String>>,
}

struct Actor {
    seats: Vec<SeatRec>,
    queue: Queue,
    jobs: Vec<JobRun>,
    leases: VecDeque<LeaseWait>,
    tx: mpsc::UnboundedSender<Cmd>,
    status: watch::Sender<PoolStatus>,
    requeued: u64,
    opts: PoolOptions,
}

/// The same event under another job id (the pool's, for the job's owner).
fn with_id(ev: Event, id: u64) -> Event {
    match ev {
        Event::Progress {
            stage,
            shape,
            done,
            total,
            ..
        } => Event::Progress {
            id,
            stage,
            shape,
            done,
            total,
        },
        Event::Compiled {
            which,
            ok,
            cached,
            ms,
            diagnostics,
            log,
            resources,
            ..
        } => Event::Compiled {
            id,
            which,
            ok,
            cached,
            ms,
            diagnostics,
            log,
            resources,
        },
        Event::Tensors {
            shape,
            seed,
            inputs,
            outputs,
            ..
        } => Event::Tensors {
            id,
            shape,
            seed,
            inputs,
            outputs,
        },
        Event::Checked { result, .. } => Event::Checked { id, result },
        Event::ShapeDone { result, .. } => Event::ShapeDone { id, result },
        Event::Output {
            shape,
            text,
            dropped,
            ..
        } => Event::Output {
            id,
            shape,
            text,
            dropped,
        },
        Event::Done {
            verdict, message, ..
        } => Event::Done {
            id,
            verdict,
            message,
        },
        Event::Fault { message, .. } => Event::Fault { id, message },
        Event::Error { message, .. } => Event::Error { id, message },
        other => other,
    }
}

impl Actor {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Cmd>) {
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

    fn add(&mut self, spec: WorkerSpec) {
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
    fn greet(&mut self, w: usize) {
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

    fn down(&mut self, w: usize, error: String) {
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

    fn handle(&mut self, cmd: Cmd) {
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

    fn greeted(&mut self, w: usize, result: Result<Event, String>) {
        let Some(seat) = self.seats.get_mut(w) else {
            return;
        };
        let name = seat.name();
        let identity =
            result.and_then(|ev| handshake::check(&name, &ev).map_err(|e| e.to_string()));
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
            Err(e) => self.down(w, e),
        }
    }

    fn submit(
        &mut self,
        id: u64,
        job: Job,
        model: Option<String>,
        events: mpsc::UnboundedSender<JobEvent>,
    ) {
        let whole = matches!(job.kind, JobKind::Compile | JobKind::Dump) || job.shapes.is_empty();
        let units: Vec<(u32, f64)> = if whole {
            vec![(job.shapes.first().map(|s| s.id).unwrap_or(0), 0.0)]
        } else {
            job.shapes.iter().map(|s| (s.id, s.sol_s)).collect()
        };
        self.queue.add_job(id, model, &units);
        self.jobs.push(JobRun {
            id,
            events,
            total: if whole { 1 } else { job.shapes.len() },
            job,
            whole,
            finished: 0,
            first_failure: None,
            compiled: BTreeSet::new(),
            consecutive_lost: 0,
            output_left: stdio::JOB_OUTPUT_LIMIT,
            said_dropped: false,
        });
    }

    /// Ends a job: its waiting units dropped, its running ones cancelled, the owner told.
    fn end_job(&mut self, id: u64, last: JobEvent) {
        self.queue.drop_job(id);
        for s in &self.seats {
            if let Some(r) = &s.running
                && r.unit.job == id
            {
                s.client.cancel(r.cid);
            }
        }
        if let Some(i) = self.jobs.iter().position(|j| j.id == id) {
            let j = self.jobs.remove(i);
            tell(&j.events, last);
        }
    }

    fn cancel(&mut self, id: u64) {
        self.end_job(
            id,
            JobEvent::WorkerLost {
                verdict: Verdict::Cancelled,
                message: "cancelled".into(),
            },
        );
    }

    fn seats(&self) -> Vec<Seat> {
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

    fn names(&self) -> Vec<String> {
        self.seats.iter().map(|s| s.name()).collect()
    }

    /// Free workers take leases first, then the queue's next unit; jobs and leases no worker
    /// up can take end when no worker is starting.
    fn dispatch(&mut self) {
        let seats = self.seats();
        for w in 0..self.seats.len() {
            if self.seats[w].state != SeatState::Idle {
                continue;
            }
            if let Some(i) = self.leases.iter().position(|l| {
                scheduler::fits(
                    w,
                    &scheduler::Placement {
                        group: None,
                        model: l.model.clone(),
                    },
                    &seats,
                )
            }) && let Some(l) = self.leases.remove(i)
            {
                let seat = &mut self.seats[w];
                seat.leased = true;
                seat.state = SeatState::Busy;
                let lease = Lease {
                    worker: w,
                    name: seat.name(),
                    client: seat.client.clone(),
                    tx: self.tx.clone(),
                };
                if l.reply.send(Ok(lease)).is_err() {
                    // The requester stopped waiting: the lease dropped with the message
                    // releases the worker.
                }
                continue;
            }
            if let Some(u) = self.queue.take_for(w, &seats) {
                self.start_unit(w, u);
            }
        }
        if self.seats.iter().any(|s| s.state == SeatState::Starting) {
            return;
        }
        let names = self.names();
        let down = (!seats.iter().any(|s| s.up)).then(|| self.snapshot().why_down());
        let why = |p: &scheduler::Placement| match &down {
            Some(d) => format!("no worker is up ({d})"),
            None => scheduler::unplaceable(p, &seats, &names),
        };
        let stranded: Vec<(u64, String)> = self
            .queue
            .stranded(&seats, &names)
            .into_iter()
            .map(|(job, _)| {
                let p = self.queue.placement(job).cloned().unwrap_or_default();
                (job, why(&p))
            })
            .collect();
        for (job, message) in stranded {
            self.end_job(
                job,
                JobEvent::WorkerLost {
                    verdict: Verdict::Error,
                    message,
                },
            );
        }
        let waiting = std::mem::take(&mut self.leases);
        for l in waiting {
            let p = scheduler::Placement {
                group: None,
                model: l.model.clone(),
            };
            if (0..seats.len()).any(|w| scheduler::fits(w, &p, &seats)) {
                self.leases.push_back(l);
            } else if l.reply.send(Err(why(&p))).is_err() {
                // The requester stopped waiting.
            }
        }
    }

    fn start_unit(&mut self, w: usize, u: Unit) {
        let Some(j) = self.jobs.iter().find(|j| j.id == u.job) else {
            return;
        };
        let mut job = j.job.clone();
        if !j.whole {
            job.shapes.retain(|s| s.id == u.shape);
        }
        let seat = &mut self.seats[w];
        let (cid, mut rx) = seat.client.submit(job);
        seat.state = SeatState::Busy;
        seat.running = Some(Running {
            unit: u,
            cid,
            events: 0,
            result: None,
        });
        let tx = self.tx.clone();
        tokio::spawn(async move {
            while let Some(ev) = rx.recv().await {
                let end = matches!(
                    ev,
                    JobEvent::WorkerLost { .. } | JobEvent::Worker(Event::Done { .. })
                );
                if tx.send(Cmd::Unit { worker: w, cid, ev }).is_err() || end {
                    break;
                }
            }
        });
    }

    fn job_mut(&mut self, id: u64) -> Option<&mut JobRun> {
        self.jobs.iter_mut().find(|j| j.id == id)
    }

    fn unit_event(&mut self, w: usize, cid: u64, ev: JobEvent) {
        let Some(seat) = self.seats.get_mut(w) else {
            return;
        };
        let Some(r) = seat.running.as_mut().filter(|r| r.cid == cid) else {
            return;
        };
        r.events += 1;
        let first = r.events == 1;
        let job_id = r.unit.job;
        let whole = self.jobs.iter().find(|j| j.id == job_id).map(|j| j.whole);
        match ev {
            JobEvent::Worker(Event::ShapeDone { result, .. }) if whole == Some(false) => {
                r.result = Some(result);
            }
            JobEvent::Worker(Event::Done {
                verdict, message, ..
            }) => {
                let r = seat.running.take();
                seat.state = if seat.leased {
                    SeatState::Busy
                } else {
                    SeatState::Idle
                };
                let Some(r) = r else { return };
                self.unit_done(r, verdict, message);
            }
            JobEvent::WorkerLost { verdict, message } => {
                let r = seat.running.take();
                let Some(r) = r else { return };
                self.unit_lost(w, r, first, verdict, message);
            }
            JobEvent::Worker(e) => self.forward(job_id, e),
        }
    }

    /// Passes a unit's event on to its job's owner (compile results once, progress counted
    /// over the job's shapes; a fault is said by the loss that follows it).
    fn forward(&mut self, id: u64, e: Event) {
        let Some(j) = self.job_mut(id) else { return };
        let e = match e {
            Event::Compiled { ref which, .. } if !j.whole && !j.compiled.insert(which.clone()) => {
                return;
            }
            Event::Progress { ref stage, .. } if !j.whole && stage == "done" => return,
            Event::Progress { stage, shape, .. } if !j.whole => Event::Progress {
                id,
                stage,
                shape,
                done: j.finished,
                total: j.total,
            },
            Event::Fault { .. } | Event::Hello { .. } | Event::Calibration { .. } => return,
            Event::Checked { .. } if !j.whole => return,
            Event::Output {
                shape,
                mut text,
                mut dropped,
                ..
            } => {
                // The worker closes its unit's text with a note when it dropped some; the job's
                // budget counts kernel output only, and the job says once that it dropped some.
                if dropped > 0 {
                    if let Some(t) = text.strip_suffix(&stdio::not_kept_note(dropped)) {
                        text.truncate(t.len());
                    }
                }
                let mut keep = text.len().min(j.output_left);
                while !text.is_char_boundary(keep) {
                    keep -= 1;
                }
                dropped += (text.len() - keep) as u64;
                text.truncate(keep);
                j.output_left -= keep;
                if dropped > 0 && !j.said_dropped {
                    j.said_dropped = true;
                    text.push_str(&stdio::not_kept_note(dropped));
                }
                Event::Output {
                    id,
                    shape,
                    text,
                    dropped,
                }
            }
            e => with_id(e, id),
        };
        tell(&j.events, JobEvent::Worker(e));
    }

    fn unit_done(&mut self, r: Running, verdict: Verdict, message: Option<String>) {
        let id = r.unit.job;
        let Some(j) = self.job_mut(id) else { return };
        if j.whole {
            let done = Event::Done {
                id,
                verdict,
                message,
            };
            self.end_job(id, JobEvent::Worker(done));
            return;
        }
        match r.result {
            Some(result) => self.shape_finished(id, result, false),
            // No result and a failure: the job cannot run anywhere (its kernel does not build,
            // the reference does not, …): it ends with that.
            None if !matches!(verdict, Verdict::Pass | Verdict::Cancelled) => {
                let done = Event::Done {
                    id,
                    verdict,
                    message,
                };
                self.end_job(id, JobEvent::Worker(done));
            }
            None => {
                let result = lost_result(
                    r.unit.shape,
                    Verdict::Error,
                    format!(
                        "the worker ended the shape without a result ({})",
                        message.unwrap_or_else(|| verdict.name().into())
                    ),
                );
                self.shape_finished(id, result, false);
            }
        }
    }

    fn unit_lost(&mut self, w: usize, r: Running, first: bool, verdict: Verdict, message: String) {
        let id = r.unit.job;
        let protocol = message.starts_with("protocol error");
        if verdict == Verdict::Cancelled {
            self.seats[w].state = SeatState::Idle;
            return;
        }
        if first && verdict == Verdict::Error && !protocol {
            // The worker could not be started for the unit: it never ran.
            self.queue.unstarted(r.unit);
            self.down(w, message);
            return;
        }
        // The client restarts a lost worker: greet it again before it takes more work.
        self.greet(w);
        let Some(j) = self.job_mut(id) else { return };
        if j.whole || protocol {
            self.end_job(id, JobEvent::WorkerLost { verdict, message });
            return;
        }
        if let Some(res) = r
            .result
            .as_ref()
            .filter(|res| !matches!(res.verdict, Verdict::Fault | Verdict::Timeout))
        {
            // The shape had its result before the worker was lost (the worker never reports a
            // fault or timeout itself: those are the client's, for the shape it was on).
            let res = res.clone();
            self.shape_finished(id, res, false);
            return;
        }
        let name = self.seats[w].name();
        let (verdict, why) = match &r.result {
            Some(res) => (
                res.verdict.clone(),
                res.message.clone().unwrap_or_else(|| message.clone()),
            ),
            None => (verdict, message),
        };
        let loss = Loss {
            worker: w,
            name,
            verdict: verdict.clone(),
            why,
        };
        let shape = r.unit.shape;
        match self.queue.lost(r.unit, loss) {
            None => self.requeued += 1,
            Some(u) => {
                let mut result = r
                    .result
                    .unwrap_or_else(|| lost_result(shape, verdict.clone(), String::new()));
                let places: Vec<String> = u
                    .losses
                    .iter()
                    .map(|l| format!("on {}: {}", l.name, l.why))
                    .collect();
                result.verdict = verdict;
                result.message = Some(format!(
                    "lost with its worker twice ({})",
                    places.join("; then ")
                ));
                self.shape_finished(id, result, true);
            }
        }
    }

    fn shape_finished(&mut self, id: u64, result: ShapeResult, lost: bool) {
        let Some(j) = self.job_mut(id) else { return };
        j.finished += 1;
        if lost {
            j.consecutive_lost += 1;
        } else {
            j.consecutive_lost = 0;
        }
        if !matches!(result.verdict, Verdict::Pass | Verdict::Unchecked)
            && j.first_failure.is_none()
        {
            j.first_failure = Some((
                result.verdict.clone(),
                format!(
                    "shape {}: {}",
                    result.shape,
                    result
                        .message
                        .clone()
                        .unwrap_or_else(|| result.verdict.name().into())
                ),
            ));
        }
        let verdict = result.verdict.clone();
        tell(&j.events, JobEvent::Worker(Event::ShapeDone { id, result }));
        let left = j.total - j.finished;
        if j.consecutive_lost >= MAX_CONSECUTIVE_LOST && left > 0 {
            let n = j.consecutive_lost;
            self.end_job(
                id,
                JobEvent::WorkerLost {
                    verdict,
                    message: format!(
                        "stopped after {n} shapes in a row were lost with their workers; {left} shapes not run"
                    ),
                },
            );
            return;
        }
        if left == 0 {
            let (verdict, message) = match j.first_failure.clone() {
                Some((v, m)) => (v, Some(m)),
                None => (Verdict::Pass, None),
            };
            self.queue.finish_job(id);
            let done = Event::Done {
                id,
                verdict,
                message,
            };
            self.end_job(id, JobEvent::Worker(done));
        }
    }

    fn snapshot(&self) -> PoolStatus {
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

    fn publish(&self) {
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

/// The result of a shape lost with its worker before it had one.
fn lost_result(shape: u32, verdict: Verdict, message: String) -> ShapeResult {
    ShapeResult {
        shape,
        verdict,
        checks: Vec::new(),
        bench_ok: false,
        strict_ok: false,
        seeds_checked: 0,
        timing: None,
        sol_ms: 0.0,
        s: None,
        message: Some(message),
        device: None,
        worker: None,
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

    #[test]
    fn hosts_are_counted_by_state() {
        let w = |host: &str, state, restarts| WorkerStatus {
            name: format!("{host}:0"),
            command: String::new(),
            templated: false,
            group: String::new(),
            device: 0,
            host: Some(host.into()),
            gpu: None,
            gpu_info: None,
            driver: None,
            nvrtc: None,
            protocol: None,
            tool_version: None,
            visible: vec![],
            state,
            error: None,
            restarts,
            start_s: None,
            greeted: true,
        };
        let st = PoolStatus {
            workers: vec![
                w("a", SeatState::Idle, 0),
                w("a", SeatState::Busy, 2),
                w("b", SeatState::Down, 1),
            ],
            ..Default::default()
        };
        let h = st.by_host();
        assert_eq!(h[0].0, "a");
        assert_eq!((h[0].1.up, h[0].1.busy, h[0].1.restarts), (1, 1, 2));
        assert_eq!((h[1].1.down, h[1].1.restarts), (1, 1));
        assert_eq!(st.up(), 2);
        assert_eq!(st.restarts(), 3);
    }
}
