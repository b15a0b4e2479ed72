//! The client side of the worker protocol: starts a worker (`atrex-tui worker`, or a launch
//! template's command: ssh, srun, kubectl exec), greets it (`hello`: protocol and tool versions
//! must match, see `handshake`), queues jobs, forwards events on tokio channels, enforces the
//! watchdog and restarts a worker that died. Every result it forwards names the worker that
//! measured it (`ShapeResult::worker`). The process itself (start, greeting, streams, log,
//! stop) is `process`'s.

use super::error::WorkerError;
use super::guard::JobGuard;
use super::process::{Proc, drop_proc, ensure, exit_reason, request_reply, send, sync_id};
use super::stop::Ending;
use crate::contract::protocol::*;
use crate::contract::runner::{JobEvent, Runner};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How many times this process was suspended (Ctrl-Z in the TUI). A stopped process reads
/// nothing while its clock runs on: a watchdog that expires across a suspension is the
/// process's own silence, not the worker's, and waits again.
static SUSPENSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Says that this process is about to stop (called just before it stops itself).
pub fn note_suspend() {
    SUSPENSIONS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

fn suspensions() -> u64 {
    SUSPENSIONS.load(std::sync::atomic::Ordering::SeqCst)
}

/// Sends to a job's owner. The owner may have stopped listening (a cancelled or abandoned job,
/// a command that ended): then there is nobody left to tell and the client goes on.
fn tell<T>(owner: &mpsc::UnboundedSender<T>, v: T) {
    if owner.send(v).is_err() {}
}

/// Answers a caller waiting for a reply (hello, calibrate); one that stopped waiting (a
/// timeout) needs no answer.
fn answer<T>(reply: oneshot::Sender<T>, v: T) {
    if reply.send(v).is_err() {}
}

/// How to start a worker.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub exe: PathBuf,
    pub device: u32,
    /// A job is killed when the worker sends nothing for this long.
    pub watchdog: Duration,
    /// Extra arguments (tests use `--simulate`).
    pub extra_args: Vec<String>,
    /// Where the worker's own stderr (panics, driver messages) is kept; the message of a lost
    /// worker names it.
    pub log: Option<PathBuf>,
    /// The command that starts it (None: `exe worker --device N` on this machine).
    pub launch: Option<super::launch_command::LaunchTemplate>,
    /// The name its results carry, when the settings give one (else `host:device`).
    pub label: Option<String>,
    /// How long it may take to answer `hello` at start.
    pub hello_timeout: Duration,
}

impl WorkerConfig {
    pub fn new(device: u32) -> WorkerConfig {
        let exe = std::env::var_os("ATREX_WORKER_EXE")
            .map(PathBuf::from)
            .or_else(|| std::env::current_exe().ok())
            .unwrap_or_else(|| PathBuf::from("atrex-tui"));
        let secs = std::env::var("ATREX_WATCHDOG_SECS")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(10.0);
        WorkerConfig {
            exe,
            device,
            watchdog: Duration::from_secs_f64(secs.max(0.1)),
            extra_args: Vec::new(),
            log: dirs::cache_dir().map(|d| d.join("atrex-tui").join("worker.log")),
            launch: None,
            label: None,
            hello_timeout: Duration::from_secs_f64(super::config::HELLO_TIMEOUT_SECS),
        }
    }

    /// The worker of a pool's spec.
    pub fn for_spec(spec: &super::config::WorkerSpec) -> WorkerConfig {
        let mut c = WorkerConfig::new(spec.device);
        c.launch = spec.launch.clone();
        c.label = spec.label.clone();
        c.hello_timeout = spec.hello_timeout;
        c
    }

    /// The program and arguments that start the worker.
    pub fn argv(&self) -> Vec<String> {
        match &self.launch {
            Some(t) => t.argv(self.device, &self.exe),
            None => {
                let mut v = vec![
                    self.exe.to_string_lossy().to_string(),
                    "worker".to_string(),
                    "--device".to_string(),
                    self.device.to_string(),
                ];
                v.extend(self.extra_args.iter().cloned());
                v
            }
        }
    }

    /// The command line that starts the worker, as shown to the user.
    pub fn command_line(&self) -> String {
        let argv = self.argv();
        shlex::try_join(argv.iter().map(|s| s.as_str())).unwrap_or_else(|_| argv.join(" "))
    }

    /// How messages name the worker before it said who it is: its label, else its command.
    pub fn display_name(&self) -> String {
        self.label
            .clone()
            .unwrap_or_else(|| format!("`{}`", self.command_line()))
    }
}

enum Msg {
    Submit {
        id: u64,
        job: Box<Job>,
        events: mpsc::UnboundedSender<JobEvent>,
    },
    Cancel {
        id: u64,
    },
    Hello {
        reply: oneshot::Sender<Result<Event, WorkerError>>,
    },
    Calibrate {
        reply: oneshot::Sender<Result<Event, WorkerError>>,
    },
}

impl Runner for WorkerClient {
    fn submit(&self, job: Job) -> (u64, mpsc::UnboundedReceiver<JobEvent>) {
        WorkerClient::submit(self, job)
    }
    fn cancel(&self, id: u64) {
        WorkerClient::cancel(self, id)
    }
}

/// A handle to one worker (one GPU). Cheap to clone.
#[derive(Clone)]
pub struct WorkerClient {
    tx: mpsc::UnboundedSender<Msg>,
    next_id: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Restarts so far (for the UI).
    pub restarts: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// How long its last start took, from launch to its answer to `hello`, in microseconds
    /// (0: not started yet). Through `srun` this includes the wait for the allocation.
    pub start_us: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl WorkerClient {
    /// Starts the supervisor task (the worker process is started on first use).
    pub fn spawn(cfg: WorkerConfig) -> WorkerClient {
        let (tx, rx) = mpsc::unbounded_channel();
        let restarts = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let start_us = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        tokio::spawn(supervise(cfg, rx, restarts.clone(), start_us.clone()));
        WorkerClient {
            tx,
            next_id: std::sync::Arc::new(std::sync::atomic::AtomicU64::new(1)),
            restarts,
            start_us,
        }
    }

    /// Queues a job; events arrive on the returned receiver, ending with `Done` or `WorkerLost`.
    pub fn submit(&self, job: Job) -> (u64, mpsc::UnboundedReceiver<JobEvent>) {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (etx, erx) = mpsc::unbounded_channel();
        // The supervisor ends only with the client; a job submitted after that ends at once.
        if let Err(mpsc::error::SendError(Msg::Submit { events, .. })) = self.tx.send(Msg::Submit {
            id,
            job: Box::new(job),
            events: etx,
        }) {
            tell(
                &events,
                JobEvent::WorkerLost {
                    verdict: Verdict::Error,
                    message: "the worker client has stopped".into(),
                },
            );
        }
        (id, erx)
    }

    pub fn cancel(&self, id: u64) {
        // Without a supervisor there is no job left to cancel.
        if self.tx.send(Msg::Cancel { id }).is_err() {}
    }

    pub async fn hello(&self) -> Result<Event, WorkerError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Msg::Hello { reply: tx })
            .map_err(|_| WorkerError::SupervisorStopped)?;
        rx.await.map_err(|_| WorkerError::SupervisorStopped)?
    }

    /// The device this worker serves, with the driver and NVRTC; Err says why there is none.
    pub async fn device(&self) -> Result<(DeviceInfo, ProbeInfo), WorkerError> {
        match self.hello().await? {
            Event::Hello {
                device: Some(d),
                probe,
                ..
            } => Ok((d, probe)),
            Event::Hello { device: None, .. } => Err(WorkerError::NoGpu),
            other => Err(WorkerError::Unexpected(format!("{other:?}"))),
        }
    }

    pub async fn calibrate(&self) -> Result<Event, WorkerError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Msg::Calibrate { reply: tx })
            .map_err(|_| WorkerError::SupervisorStopped)?;
        rx.await.map_err(|_| WorkerError::SupervisorStopped)?
    }
}

/// A job waiting for the worker: its id, the job and its owner.
type Queued = (u64, Box<Job>, mpsc::UnboundedSender<JobEvent>);

/// Whether the supervisor goes on after a job, or ends (every handle to the client is gone).
#[derive(PartialEq)]
enum Flow {
    Go,
    End,
}

/// How forwarding a job's events on one worker ended.
enum Pass {
    /// The job is done (its `done` was forwarded), or there was no worker to read from.
    Over,
    /// The worker was lost: (verdict, message, a protocol error rather than a dead or hung
    /// worker).
    Lost(Verdict, String, bool),
    /// Every handle to the client is gone.
    Closed,
}

/// The client's task: one worker's jobs in order, the worker started on first use and after
/// each loss.
async fn supervise(
    cfg: WorkerConfig,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    restarts: std::sync::Arc<std::sync::atomic::AtomicU64>,
    start_us: std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    let mut proc: Option<Proc> = None;
    let mut queue: VecDeque<Queued> = VecDeque::new();
    loop {
        // Take the next message, or the next queued job.
        if queue.is_empty() {
            match rx.recv().await {
                None => break,
                Some(msg) => between_jobs(&cfg, &mut proc, &start_us, &mut queue, msg).await,
            }
            continue;
        }
        let Some((id, job, events)) = queue.pop_front() else {
            continue;
        };
        let mut w = Supervised {
            cfg: &cfg,
            proc: &mut proc,
            rx: &mut rx,
            queue: &mut queue,
            restarts: &restarts,
            start_us: &start_us,
        };
        if w.run_job(id, job, events).await == Flow::End {
            return;
        }
    }
    drop_proc(&mut proc, Ending::Answering).await;
}

/// A message while no job runs.
async fn between_jobs(
    cfg: &WorkerConfig,
    proc: &mut Option<Proc>,
    start_us: &std::sync::atomic::AtomicU64,
    queue: &mut VecDeque<Queued>,
    msg: Msg,
) {
    match msg {
        Msg::Submit { id, job, events } => queue.push_back((id, job, events)),
        Msg::Cancel { .. } => {}
        Msg::Hello { reply } => {
            // The handshake of the worker's start answers (it created the context).
            let r = match ensure(cfg, proc, start_us).await {
                Ok(p) => p.hello.clone(),
                Err(e) => Err(e),
            };
            if r.is_err() {
                drop_proc(proc, Ending::Answering).await;
            }
            answer(reply, r);
        }
        Msg::Calibrate { reply } => {
            let r = match ensure(cfg, proc, start_us).await {
                Ok(p) => {
                    let sync_id = sync_id();
                    let r = request_reply(
                        p,
                        Request::Calibrate { id: sync_id },
                        sync_id,
                        Duration::from_secs(60),
                    )
                    .await;
                    if r.is_err() {
                        drop_proc(proc, Ending::Lost).await;
                    }
                    r
                }
                Err(e) => Err(e),
            };
            answer(reply, r);
        }
    }
}

/// What a job runs with: the worker, the client's messages and its queue.
struct Supervised<'a> {
    cfg: &'a WorkerConfig,
    proc: &'a mut Option<Proc>,
    rx: &'a mut mpsc::UnboundedReceiver<Msg>,
    queue: &'a mut VecDeque<Queued>,
    restarts: &'a std::sync::atomic::AtomicU64,
    start_us: &'a std::sync::atomic::AtomicU64,
}

impl Supervised<'_> {
    /// Runs a job to its end: one pass per worker, a worker lost mid-shape costs that shape, and
    /// the shapes not yet measured go to a restarted worker (see `guard`).
    async fn run_job(
        &mut self,
        id: u64,
        mut job: Box<Job>,
        events: mpsc::UnboundedSender<JobEvent>,
    ) -> Flow {
        let watchdog = self.cfg.watchdog.max(Duration::from_secs_f64(
            job.watchdog_s.unwrap_or(0.0).clamp(0.0, 3600.0),
        ));
        let mut guard = JobGuard::new(id, &job);
        let mut cancelled = false;
        loop {
            let p = match ensure(self.cfg, self.proc, self.start_us).await {
                Ok(p) => p,
                Err(e) => {
                    tell(
                        &events,
                        JobEvent::WorkerLost {
                            verdict: Verdict::Error,
                            message: e.to_string(),
                        },
                    );
                    return Flow::Go;
                }
            };
            let who = p.who.clone();
            let sent = send(
                p,
                &Request::Job {
                    id,
                    job: job.clone(),
                },
            )
            .await;
            let pass = match sent {
                Err(e) => {
                    let reason = exit_reason(p).await;
                    Pass::Lost(Verdict::Fault, format!("{e} ({reason})"), false)
                }
                Ok(()) => {
                    self.forward(id, &mut guard, &events, watchdog, &who, &mut cancelled)
                        .await
                }
            };
            let (verdict, message, protocol) = match pass {
                Pass::Over => return Flow::Go,
                Pass::Closed => return Flow::End,
                Pass::Lost(v, m, p) => (v, m, p),
            };
            drop_proc(self.proc, Ending::Lost).await;
            self.restarts
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if protocol {
                tell(
                    &events,
                    JobEvent::WorkerLost {
                        verdict,
                        message: format!(
                            "protocol error: {message}; the job ends without these results and the worker was restarted"
                        ),
                    },
                );
                let _ = ensure(self.cfg, self.proc, self.start_us).await;
                return Flow::Go;
            }
            let after = guard.lost(verdict.clone(), &message);
            if let Some(mut result) = after.result {
                result.worker = Some(who.clone());
                tell(&events, JobEvent::Worker(Event::ShapeDone { id, result }));
            }
            match after.resume {
                Some(left) if !cancelled => {
                    job.shapes.retain(|s| left.contains(&s.id));
                }
                _ => {
                    tell(
                        &events,
                        JobEvent::WorkerLost {
                            verdict,
                            message: after.message,
                        },
                    );
                    // Restart at once so that the next job finds a warm worker.
                    let _ = ensure(self.cfg, self.proc, self.start_us).await;
                    return Flow::Go;
                }
            }
        }
    }

    /// Forwards the job's events until `done`, a crash, a protocol error or the watchdog, while
    /// answering the client's messages.
    async fn forward(
        &mut self,
        id: u64,
        guard: &mut JobGuard,
        events: &mpsc::UnboundedSender<JobEvent>,
        watchdog: Duration,
        who: &str,
        cancelled: &mut bool,
    ) -> Pass {
        loop {
            let Some(p) = self.proc.as_mut() else {
                return Pass::Over;
            };
            let epoch = suspensions();
            tokio::select! {
                line = tokio::time::timeout(watchdog, p.lines.recv()) => {
                    match line {
                        // This process was suspended meanwhile: wait again.
                        Err(_) if suspensions() != epoch => continue,
                        Err(_) => {
                            return Pass::Lost(Verdict::Timeout, format!(
                                "no progress for {:.1} s: the kernel hangs or runs too long; the worker was restarted",
                                watchdog.as_secs_f64()
                            ), false);
                        }
                        Ok(None) => {
                            let reason = exit_reason(p).await;
                            return Pass::Lost(Verdict::Fault, reason.to_string(), false);
                        }
                        Ok(Some(l)) => {
                            let ev = match serde_json::from_str::<Event>(&l) {
                                Ok(ev) => ev,
                                Err(e) => {
                                    let l: String = l.chars().take(120).collect();
                                    return Pass::Lost(Verdict::Error, format!("the worker sent a line that is not an event ({e}): {l}"), true);
                                }
                            };
                            match guard.accept(ev) {
                                Err(e) => return Pass::Lost(Verdict::Error, e.to_string(), true),
                                Ok(None) => {}
                                Ok(Some(mut ev)) => {
                                    let done = matches!(ev, Event::Done { .. });
                                    if let Event::ShapeDone { result, .. } = &mut ev {
                                        result.worker = Some(who.to_string());
                                    }
                                    tell(events, JobEvent::Worker(ev));
                                    if done { return Pass::Over; }
                                }
                            }
                        }
                    }
                }
                msg = self.rx.recv() => {
                    match msg {
                        None => return Pass::Closed,
                        Some(Msg::Cancel { id: c }) if c == id => {
                            *cancelled = true;
                            let _ = send(p, &Request::Cancel { id }).await;
                        }
                        Some(Msg::Cancel { id: c }) => {
                            self.queue.retain(|(q, _, ev)| {
                                if *q == c {
                                    tell(ev, JobEvent::WorkerLost { verdict: Verdict::Cancelled, message: "cancelled before it started".into() });
                                }
                                *q != c
                            });
                        }
                        Some(Msg::Submit { id, job, events }) => self.queue.push_back((id, job, events)),
                        Some(Msg::Hello { reply }) => { answer(reply, p.hello.clone()); }
                        Some(Msg::Calibrate { reply }) => { answer(reply, Err(WorkerError::Busy)); }
                    }
                }
            }
        }
    }
}

/// Starts a worker, asks for the device description, and stops it (for `doctor`).
pub fn probe_blocking(device: u32) -> Result<ProbeInfo, WorkerError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| super::RuntimeError(e.into()))?;
    rt.block_on(async {
        let c = WorkerClient::spawn(WorkerConfig::new(device));
        match c.hello().await? {
            Event::Hello { probe, .. } => Ok(probe),
            other => Err(WorkerError::Unexpected(format!("{other:?}"))),
        }
    })
}
