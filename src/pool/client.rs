//! The client side of the worker protocol: starts a worker (`atrex-tui worker`, or a launch
//! template's command: ssh, srun, kubectl exec), greets it (`hello`: protocol and tool versions
//! must match, see `handshake`), queues jobs, forwards events on tokio channels, enforces the
//! watchdog and restarts a worker that died. Every result it forwards names the worker that
//! measured it (`ShapeResult::worker`).

use super::guard::JobGuard;
use super::stop::{Ending, Launched};
use crate::contract::protocol::*;
use crate::contract::runner::{JobEvent, Runner};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, Command};
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
        reply: oneshot::Sender<Result<Event, String>>,
    },
    Calibrate {
        reply: oneshot::Sender<Result<Event, String>>,
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

    pub async fn hello(&self) -> Result<Event, String> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Msg::Hello { reply: tx })
            .map_err(|_| "worker supervisor stopped".to_string())?;
        rx.await
            .map_err(|_| "worker supervisor stopped".to_string())?
    }

    /// The device this worker serves, with the driver and NVRTC; Err says why there is none.
    pub async fn device(&self) -> Result<(DeviceInfo, ProbeInfo), String> {
        match self.hello().await? {
            Event::Hello {
                device: Some(d),
                probe,
                ..
            } => Ok((d, probe)),
            Event::Hello { device: None, .. } => Err("the worker found no such GPU".into()),
            other => Err(format!("unexpected worker reply {other:?}")),
        }
    }

    pub async fn calibrate(&self) -> Result<Event, String> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Msg::Calibrate { reply: tx })
            .map_err(|_| "worker supervisor stopped".to_string())?;
        rx.await
            .map_err(|_| "worker supervisor stopped".to_string())?
    }
}

struct Proc {
    /// The process (a launcher's, for a templated worker: see `stop`).
    child: Launched,
    stdin: ChildStdin,
    lines: mpsc::UnboundedReceiver<String>,
    /// The last lines the worker wrote to stderr.
    last_words: std::sync::Arc<std::sync::Mutex<VecDeque<String>>>,
    log: Option<PathBuf>,
    /// Its answer to the handshake's `hello` (Err: it answered with an error, e.g. no GPU; it
    /// still compiles).
    hello: Result<Event, String>,
    /// The name its results carry: the label, else `host:device`.
    who: String,
    /// How long it took from launch to its answer to `hello`.
    took: Duration,
}

impl Proc {
    /// Stops the worker's process (see `stop`).
    async fn stop(self, ending: Ending) {
        let Proc {
            mut child, stdin, ..
        } = self;
        child.stop(Some(stdin), ending).await;
    }
}

/// Request ids of hello and calibrate (far above job ids).
static SYNC_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1 << 62);

fn sync_id() -> u64 {
    SYNC_ID.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
}

/// The most a worker's stderr adds to its log.
const LOG_LIMIT: u64 = 16 << 20;

/// Starts the worker and greets it: a worker that does not answer `hello`, or whose versions
/// differ from this build's, is stopped and the start fails.
async fn start(cfg: &WorkerConfig) -> Result<Proc, String> {
    let t0 = tokio::time::Instant::now();
    let mut p = spawn(cfg)?;
    let id = sync_id();
    // A worker that ended at once (its launcher failed) refuses the request: its exit and last
    // words say why, as for one that ends before answering.
    let sent = send(&mut p, &Request::Hello { id }).await.is_ok();
    let deadline = tokio::time::Instant::now() + cfg.hello_timeout;
    loop {
        let next = if sent {
            tokio::time::timeout_at(deadline, p.lines.recv()).await
        } else {
            Ok(None)
        };
        let line = match next {
            Err(_) => {
                // A launcher still waiting (srun for its allocation) is asked to withdraw.
                p.stop(Ending::Lost).await;
                return Err(format!(
                    "worker {} did not answer hello within {:.0} s",
                    cfg.display_name(),
                    cfg.hello_timeout.as_secs_f64()
                ));
            }
            Ok(None) => {
                let why = exit_reason(&mut p).await;
                // Nothing was started anew: the start itself failed.
                let why = why.replace("; a new worker was started", "");
                return Err(format!(
                    "worker {} ended before answering hello: {why}",
                    cfg.display_name()
                ));
            }
            Ok(Some(l)) => l,
        };
        let Ok(ev) = serde_json::from_str::<Event>(&line) else {
            continue;
        };
        if ev.id() != id {
            continue;
        }
        p.took = t0.elapsed();
        if let Event::Error { message, .. } = ev {
            p.hello = Err(message);
            return Ok(p);
        }
        let host = match &ev {
            Event::Hello { host: Some(h), .. } => Some(format!("{h}:{}", cfg.device)),
            _ => None,
        };
        let name = cfg
            .label
            .clone()
            .or(host)
            .unwrap_or_else(|| cfg.display_name());
        return match super::handshake::check(&name, &ev) {
            Ok(_) => {
                p.who = name;
                p.hello = Ok(ev);
                Ok(p)
            }
            Err(e) => {
                p.stop(Ending::Answering).await;
                Err(e.to_string())
            }
        };
    }
}

/// Starts the worker process.
fn spawn(cfg: &WorkerConfig) -> Result<Proc, String> {
    let argv = cfg.argv();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd.env(
        "LD_LIBRARY_PATH",
        crate::worker::locate::worker_ld_library_path(),
    );
    crate::worker::env_scrub::scrub(cmd.as_std_mut());
    cmd.envs(crate::worker::compile_child::limits::worker_env());
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A launcher is asked to end rather than killed (see `stop`).
        .kill_on_drop(cfg.launch.is_none());
    let mut child = cmd.spawn().map_err(|e| {
        format!(
            "cannot start the worker {}: {e}",
            match &cfg.label {
                Some(l) => format!("{l} (`{}`)", cfg.command_line()),
                None => format!("`{}`", cfg.command_line()),
            }
        )
    })?;
    let stdin = child.stdin.take().ok_or("worker has no stdin")?;
    let stdout = child.stdout.take().ok_or("worker has no stdout")?;
    let stderr = child.stderr.take().ok_or("worker has no stderr")?;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut r = BufReader::new(stdout).lines();
        while let Ok(Some(l)) = r.next_line().await {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let last_words = std::sync::Arc::new(std::sync::Mutex::new(VecDeque::new()));
    {
        let last_words = last_words.clone();
        let log = cfg.log.clone();
        let tag = format!(
            "worker {} (GPU {}, pid {})",
            cfg.label.clone().unwrap_or_else(|| argv[0].clone()),
            cfg.device,
            child.id().unwrap_or(0)
        );
        tokio::spawn(async move {
            // Opened at the first line: a quiet worker leaves no file.
            let open = |p: &PathBuf| {
                if let Some(d) = p.parent() {
                    let _ = std::fs::create_dir_all(d);
                }
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .ok()
            };
            let mut file = None;
            let mut written = 0u64;
            let mut r = BufReader::new(stderr).lines();
            while let Ok(Some(l)) = r.next_line().await {
                if file.is_none() {
                    file = log.as_ref().and_then(open);
                }
                if let Some(f) = file.as_mut() {
                    use std::io::Write;
                    let line = format!("{} {tag}: {l}\n", crate::utc::now());
                    if written < LOG_LIMIT {
                        written += line.len() as u64;
                        let _ = f.write_all(line.as_bytes());
                    }
                }
                if let Ok(mut w) = last_words.lock() {
                    if w.len() >= 8 {
                        w.pop_front();
                    }
                    w.push_back(l);
                }
            }
        });
    }
    Ok(Proc {
        child: Launched::new(child, cfg.launch.is_some()),
        stdin,
        lines: rx,
        last_words,
        log: cfg.log.clone(),
        hello: Err("no hello yet".into()),
        who: cfg
            .label
            .clone()
            .unwrap_or_else(|| format!("GPU {}", cfg.device)),
        took: Duration::ZERO,
    })
}

async fn send(p: &mut Proc, r: &Request) -> Result<(), String> {
    let mut line = serde_json::to_string(r).map_err(|e| e.to_string())?;
    line.push('\n');
    p.stdin
        .write_all(line.as_bytes())
        .await
        .map_err(|e| format!("worker stdin: {e}"))?;
    p.stdin
        .flush()
        .await
        .map_err(|e| format!("worker stdin: {e}"))
}

/// Describes how a worker ended, with its last words on stderr and where its log is.
async fn exit_reason(p: &mut Proc) -> String {
    let how = match tokio::time::timeout(Duration::from_millis(500), p.child.child.wait()).await {
        Ok(Ok(st)) => {
            #[cfg(unix)]
            {
                use std::os::unix::process::ExitStatusExt;
                if let Some(sig) = st.signal() {
                    return with_words(p, format!("worker killed by signal {sig}")).await;
                }
            }
            format!("worker exited with {st}")
        }
        _ => "worker stopped answering".into(),
    };
    with_words(p, how).await
}

async fn with_words(p: &Proc, how: String) -> String {
    // Give the stderr reader a moment to catch the last lines.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let words = p
        .last_words
        .lock()
        .ok()
        .and_then(|w| w.iter().rev().find(|l| !l.trim().is_empty()).cloned());
    let mut s = how;
    if let Some(w) = words {
        let w: String = w.chars().take(200).collect();
        s.push_str(&format!(" (its last words: {w})"));
    }
    s.push_str("; a new worker was started");
    if let Some(l) = &p.log {
        s.push_str(&format!("; worker log: {}", l.display()));
    }
    s
}

/// Waits for one reply to a synchronous request (hello, calibrate).
async fn request_reply(
    p: &mut Proc,
    req: Request,
    id: u64,
    limit: Duration,
) -> Result<Event, String> {
    send(p, &req).await?;
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, p.lines.recv()).await {
            Err(_) => return Err("worker did not answer in time".into()),
            Ok(None) => return Err(exit_reason(p).await),
            Ok(Some(l)) => {
                if let Ok(ev) = serde_json::from_str::<Event>(&l)
                    && ev.id() == id
                {
                    return match ev {
                        Event::Error { message, .. } => Err(message),
                        other => Ok(other),
                    };
                }
            }
        }
    }
}

async fn supervise(
    cfg: WorkerConfig,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    restarts: std::sync::Arc<std::sync::atomic::AtomicU64>,
    start_us: std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    let mut proc: Option<Proc> = None;
    let mut queue: VecDeque<(u64, Box<Job>, mpsc::UnboundedSender<JobEvent>)> = VecDeque::new();
    loop {
        // Take the next message, or the next queued job.
        if queue.is_empty() {
            match rx.recv().await {
                None => break,
                Some(Msg::Submit { id, job, events }) => queue.push_back((id, job, events)),
                Some(Msg::Cancel { .. }) => {}
                Some(Msg::Hello { reply }) => {
                    // The handshake of the worker's start answers (it created the context).
                    let r = match ensure(&cfg, &mut proc, &start_us).await {
                        Ok(p) => p.hello.clone(),
                        Err(e) => Err(e),
                    };
                    if r.is_err() {
                        drop_proc(&mut proc, Ending::Answering).await;
                    }
                    answer(reply, r);
                }
                Some(Msg::Calibrate { reply }) => {
                    let r = match ensure(&cfg, &mut proc, &start_us).await {
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
                                drop_proc(&mut proc, Ending::Lost).await;
                            }
                            r
                        }
                        Err(e) => Err(e),
                    };
                    answer(reply, r);
                }
            }
            continue;
        }
        let Some((id, job, events)) = queue.pop_front() else {
            continue;
        };
        let watchdog = cfg.watchdog.max(Duration::from_secs_f64(
            job.watchdog_s.unwrap_or(0.0).clamp(0.0, 3600.0),
        ));
        let mut guard = JobGuard::new(id, &job);
        let mut job = job;
        let mut cancelled = false;
        // One pass per worker: a worker lost mid-shape costs that shape, and the shapes not yet
        // measured go to a restarted worker (see `guard`).
        'job: loop {
            let p = match ensure(&cfg, &mut proc, &start_us).await {
                Ok(p) => p,
                Err(e) => {
                    tell(
                        &events,
                        JobEvent::WorkerLost {
                            verdict: Verdict::Error,
                            message: e,
                        },
                    );
                    break 'job;
                }
            };
            let who = p.who.clone();
            // (verdict, message, a protocol error rather than a dead or hung worker)
            let mut lost: Option<(Verdict, String, bool)> = None;
            if let Err(e) = send(
                p,
                &Request::Job {
                    id,
                    job: job.clone(),
                },
            )
            .await
            {
                let reason = exit_reason(p).await;
                lost = Some((Verdict::Fault, format!("{e} ({reason})"), false));
            }
            // Forward events until Done, a crash, a protocol error, or the watchdog.
            while lost.is_none() {
                let Some(p) = proc.as_mut() else { break };
                let epoch = suspensions();
                tokio::select! {
                    line = tokio::time::timeout(watchdog, p.lines.recv()) => {
                        match line {
                            // This process was suspended meanwhile: wait again.
                            Err(_) if suspensions() != epoch => continue,
                            Err(_) => {
                                lost = Some((Verdict::Timeout, format!(
                                    "no progress for {:.1} s: the kernel hangs or runs too long; the worker was restarted",
                                    watchdog.as_secs_f64()
                                ), false));
                            }
                            Ok(None) => {
                                let reason = exit_reason(p).await;
                                lost = Some((Verdict::Fault, reason, false));
                            }
                            Ok(Some(l)) => {
                                let ev = match serde_json::from_str::<Event>(&l) {
                                    Ok(ev) => ev,
                                    Err(e) => {
                                        let l: String = l.chars().take(120).collect();
                                        lost = Some((Verdict::Error, format!("the worker sent a line that is not an event ({e}): {l}"), true));
                                        continue;
                                    }
                                };
                                match guard.accept(ev) {
                                    Err(e) => lost = Some((Verdict::Error, e, true)),
                                    Ok(None) => {}
                                    Ok(Some(mut ev)) => {
                                        let done = matches!(ev, Event::Done { .. });
                                        if let Event::ShapeDone { result, .. } = &mut ev {
                                            result.worker = Some(who.clone());
                                        }
                                        tell(&events, JobEvent::Worker(ev));
                                        if done { break 'job; }
                                    }
                                }
                            }
                        }
                    }
                    msg = rx.recv() => {
                        match msg {
                            None => return,
                            Some(Msg::Cancel { id: c }) if c == id => {
                                cancelled = true;
                                let _ = send(p, &Request::Cancel { id }).await;
                            }
                            Some(Msg::Cancel { id: c }) => {
                                queue.retain(|(q, _, ev)| {
                                    if *q == c {
                                        tell(ev, JobEvent::WorkerLost { verdict: Verdict::Cancelled, message: "cancelled before it started".into() });
                                    }
                                    *q != c
                                });
                            }
                            Some(Msg::Submit { id, job, events }) => queue.push_back((id, job, events)),
                            Some(Msg::Hello { reply }) => { answer(reply, p.hello.clone()); }
                            Some(Msg::Calibrate { reply }) => { answer(reply, Err("the worker is busy with a job".into())); }
                        }
                    }
                }
            }
            let Some((verdict, message, protocol)) = lost else {
                break 'job;
            };
            drop_proc(&mut proc, Ending::Lost).await;
            restarts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
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
                let _ = ensure(&cfg, &mut proc, &start_us).await;
                break 'job;
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
                    let _ = ensure(&cfg, &mut proc, &start_us).await;
                    break 'job;
                }
            }
        }
    }
    drop_proc(&mut proc, Ending::Answering).await;
}

/// The worker, started (and its start's time noted in `start_us`) unless it is running.
async fn ensure<'a>(
    cfg: &WorkerConfig,
    proc: &'a mut Option<Proc>,
    start_us: &std::sync::atomic::AtomicU64,
) -> Result<&'a mut Proc, String> {
    let alive = match proc.as_mut() {
        Some(p) => matches!(p.child.child.try_wait(), Ok(None)),
        None => false,
    };
    if !alive {
        let p = start(cfg).await?;
        let us = u64::try_from(p.took.as_micros()).unwrap_or(u64::MAX).max(1);
        start_us.store(us, std::sync::atomic::Ordering::SeqCst);
        *proc = Some(p);
    }
    proc.as_mut()
        .ok_or_else(|| "worker did not start".to_string())
}

/// Stops the worker, if there is one (see `stop`).
async fn drop_proc(proc: &mut Option<Proc>, ending: Ending) {
    if let Some(p) = proc.take() {
        p.stop(ending).await;
    }
}

/// Starts a worker, asks for the device description, and stops it (for `doctor`).
pub fn probe_blocking(device: u32) -> Result<ProbeInfo, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let c = WorkerClient::spawn(WorkerConfig::new(device));
        match c.hello().await? {
            Event::Hello { probe, .. } => Ok(probe),
            other => Err(format!("unexpected reply {other:?}")),
        }
    })
}
