//! One worker process as the client runs it: started (`atrex-tui worker`, or a launch
//! template's command) with the environment a worker may have, greeted, written to and read
//! from, its stderr kept in the worker log, and stopped.
//!
//! Invariants: a process is usable only after it answered `hello` with this build's versions
//! (`handshake`); a worker that ends or stops answering is described by its exit, its last
//! words on stderr and where its log is, never by a bare "broken pipe".

use super::client::WorkerConfig;
use super::error::{Exit, ExitCause, WorkerError};
use super::stop::{Ending, Launched};
use crate::contract::protocol::*;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, Command};
use tokio::sync::mpsc;

pub(super) struct Proc {
    /// The process (a launcher's, for a templated worker: see `stop`).
    child: Launched,
    stdin: ChildStdin,
    pub(super) lines: mpsc::UnboundedReceiver<String>,
    /// The last lines the worker wrote to stderr.
    last_words: std::sync::Arc<std::sync::Mutex<VecDeque<String>>>,
    log: Option<PathBuf>,
    /// Its answer to the handshake's `hello` (Err: it answered with an error, e.g. no GPU; it
    /// still compiles).
    pub(super) hello: Result<Event, WorkerError>,
    /// The name its results carry: the label, else `host:device`.
    pub(super) who: String,
    /// How long it took from launch to its answer to `hello`.
    took: Duration,
}

impl Proc {
    /// Stops the worker's process (see `stop`).
    pub(super) async fn stop(self, ending: Ending) {
        let Proc {
            mut child, stdin, ..
        } = self;
        child.stop(Some(stdin), ending).await;
    }
}

/// Request ids of hello and calibrate (far above job ids).
static SYNC_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1 << 62);

pub(super) fn sync_id() -> u64 {
    SYNC_ID.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
}

/// The most a worker's stderr adds to its log.
const LOG_LIMIT: u64 = 16 << 20;

/// Starts the worker and greets it: a worker that does not answer `hello`, or whose versions
/// differ from this build's, is stopped and the start fails.
pub(super) async fn start(cfg: &WorkerConfig) -> Result<Proc, WorkerError> {
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
                return Err(WorkerError::HelloTimeout {
                    worker: cfg.display_name(),
                    secs: cfg.hello_timeout.as_secs_f64(),
                });
            }
            Ok(None) => {
                // Nothing was started anew: the start itself failed.
                let exit = Exit {
                    restarted: false,
                    ..exit_reason(&mut p).await
                };
                return Err(WorkerError::EndedBeforeHello {
                    worker: cfg.display_name(),
                    exit,
                });
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
            p.hello = Err(WorkerError::Refused(message));
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
                Err(e.into())
            }
        };
    }
}

/// Starts the worker process.
pub(super) fn spawn(cfg: &WorkerConfig) -> Result<Proc, WorkerError> {
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
    let mut child = cmd.spawn().map_err(|e| WorkerError::Spawn {
        worker: match &cfg.label {
            Some(l) => format!("{l} (`{}`)", cfg.command_line()),
            None => format!("`{}`", cfg.command_line()),
        },
        source: e.into(),
    })?;
    let stdin = child.stdin.take().ok_or(WorkerError::NoStream("stdin"))?;
    let stdout = child.stdout.take().ok_or(WorkerError::NoStream("stdout"))?;
    let stderr = child.stderr.take().ok_or(WorkerError::NoStream("stderr"))?;
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
        hello: Err(WorkerError::NoHello),
        who: cfg
            .label
            .clone()
            .unwrap_or_else(|| format!("GPU {}", cfg.device)),
        took: Duration::ZERO,
    })
}

pub(super) async fn send(p: &mut Proc, r: &Request) -> Result<(), WorkerError> {
    let mut line = serde_json::to_string(r).map_err(|e| WorkerError::Encode(e.into()))?;
    line.push('\n');
    let stdin = |e: std::io::Error| WorkerError::Stdin(e.into());
    p.stdin.write_all(line.as_bytes()).await.map_err(stdin)?;
    p.stdin.flush().await.map_err(stdin)
}

/// Describes how a worker ended, with its last words on stderr and where its log is (a new
/// worker takes its place).
pub(super) async fn exit_reason(p: &mut Proc) -> Exit {
    let how = match tokio::time::timeout(Duration::from_millis(500), p.child.child.wait()).await {
        Ok(Ok(st)) => {
            #[cfg(unix)]
            {
                use std::os::unix::process::ExitStatusExt;
                match st.signal() {
                    Some(sig) => ExitCause::Signal(sig),
                    None => ExitCause::Status(st.to_string()),
                }
            }
            #[cfg(not(unix))]
            ExitCause::Status(st.to_string())
        }
        _ => ExitCause::StoppedAnswering,
    };
    // Give the stderr reader a moment to catch the last lines.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let last_words = p
        .last_words
        .lock()
        .ok()
        .and_then(|w| w.iter().rev().find(|l| !l.trim().is_empty()).cloned())
        .map(|w| w.chars().take(200).collect());
    Exit {
        how,
        last_words,
        log: p.log.clone(),
        restarted: true,
    }
}

/// Waits for one reply to a synchronous request (hello, calibrate).
pub(super) async fn request_reply(
    p: &mut Proc,
    req: Request,
    id: u64,
    limit: Duration,
) -> Result<Event, WorkerError> {
    send(p, &req).await?;
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, p.lines.recv()).await {
            Err(_) => return Err(WorkerError::NoAnswer),
            Ok(None) => return Err(WorkerError::Ended(exit_reason(p).await)),
            Ok(Some(l)) => {
                if let Ok(ev) = serde_json::from_str::<Event>(&l)
                    && ev.id() == id
                {
                    return match ev {
                        Event::Error { message, .. } => Err(WorkerError::Refused(message)),
                        other => Ok(other),
                    };
                }
            }
        }
    }
}

/// The worker, started (and its start's time noted in `start_us`) unless it is running.
pub(super) async fn ensure<'a>(
    cfg: &WorkerConfig,
    proc: &'a mut Option<Proc>,
    start_us: &std::sync::atomic::AtomicU64,
) -> Result<&'a mut Proc, WorkerError> {
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
    proc.as_mut().ok_or(WorkerError::NotStarted)
}

/// Stops the worker, if there is one (see `stop`).
pub(super) async fn drop_proc(proc: &mut Option<Proc>, ending: Ending) {
    if let Some(p) = proc.take() {
        p.stop(ending).await;
    }
}
