//! The parent's side: starts the child, hands it the request on stdin, reads its answer from
//! stdout, and kills it at the time limit. A child that dies, or runs past a limit, is an
//! `Ended` that says which limit, never a hang.

use super::limits::Limits;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How a child ended without an answer, in words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Ended {
    /// It could not be started (names the program and the system's reason).
    #[error("{0}")]
    Start(String),
    /// Killed at the time limit.
    #[error("{0}")]
    Time(String),
    /// Ran out of its address space (killed by it, or said so).
    #[error("{0}")]
    Memory(String),
    /// Died otherwise: its status and the end of what it wrote on stderr.
    #[error("{0}")]
    Died(String),
}

impl Ended {
    pub fn message(&self) -> &str {
        match self {
            Ended::Start(m) | Ended::Time(m) | Ended::Memory(m) | Ended::Died(m) => m,
        }
    }
}

/// The time-limit message.
pub fn time_message(l: &Limits) -> String {
    format!(
        "compile exceeded the {} time limit: the compiler was stopped",
        l.time_text()
    )
}

/// The memory-limit message.
pub fn memory_message(l: &Limits) -> String {
    format!(
        "compile exceeded the {} memory limit: the compiler was stopped",
        l.memory_text()
    )
}

/// Starts `cmd` with its three streams piped.
pub fn spawn(mut cmd: Command) -> Result<Child, Ended> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().map_err(|e| {
        Ended::Start(format!(
            "cannot start the compiler process {}: {e}",
            cmd.get_program().to_string_lossy()
        ))
    })
}

/// Hands `input` to a child `spawn` started and closes its stdin; its stdout once it exited
/// successfully. Killed (and reaped) `limits.time` after this call.
pub fn run(mut child: Child, input: Vec<u8>, limits: &Limits) -> Result<Vec<u8>, Ended> {
    let t0 = Instant::now();
    let pid = child.id();
    let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Ended::Start("the compiler process has no pipes".into()));
    };
    // A child that stops reading (it died) makes the write fail; that is seen from its exit.
    std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let errs = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        let _ = tx.send(v);
    });
    let mut peak = 0u64;
    let deadline = t0 + limits.time;
    let answer = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break None;
        }
        match rx.recv_timeout(left.min(Duration::from_millis(100))) {
            Ok(v) => break Some(v),
            Err(mpsc::RecvTimeoutError::Disconnected) => break Some(Vec::new()),
            Err(mpsc::RecvTimeoutError::Timeout) => peak = peak.max(vm_peak(pid)),
        }
    };
    // Its stdout is closed: it has exited or is about to; it still gets no more than the limit.
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if answer.is_some() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let (Some(out), Some(status)) = (answer, status) else {
        return Err(Ended::Time(time_message(limits)));
    };
    let err = String::from_utf8_lossy(&errs.join().unwrap_or_default()).into_owned();
    if status.success() {
        return Ok(out);
    }
    let memory = peak >= limits.memory_bytes / 10 * 9
        || ["bad_alloc", "out of memory", "memory allocation of"]
            .iter()
            .any(|m| err.contains(m));
    if memory {
        return Err(Ended::Memory(memory_message(limits)));
    }
    let tail: Vec<&str> = err.lines().rev().take(3).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(Ended::Died(format!(
        "the compiler process ended without an answer ({status}){}",
        if tail.is_empty() {
            String::new()
        } else {
            format!(": {}", tail.join(" / "))
        }
    )))
}

/// The largest address space the process has had (`VmPeak`), 0 when unknown.
fn vm_peak(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmPeak:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(ms: u64) -> Limits {
        Limits {
            time: Duration::from_millis(ms),
            memory_bytes: 8 << 30,
        }
    }

    fn sh(script: &str) -> Child {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(script);
        spawn(c).unwrap()
    }

    /// A child that never answers is killed at the limit, reaped, and reported as such: the
    /// call returns soon after the limit, not when the child would have ended.
    #[test]
    fn a_child_past_the_time_limit_is_killed_and_named() {
        let t0 = Instant::now();
        let r = run(sh("exec sleep 30"), Vec::new(), &limits(300));
        let took = t0.elapsed();
        let l = limits(300);
        assert_eq!(r, Err(Ended::Time(time_message(&l))));
        assert!(r.unwrap_err().message().contains("0.3 s time limit"));
        assert!(took < Duration::from_secs(3), "returned after {took:?}");
        // One that closes its stdout and lingers is killed as well.
        let t0 = Instant::now();
        let r = run(sh("exec >&- ; sleep 30"), Vec::new(), &limits(300));
        assert!(matches!(r, Err(Ended::Time(_))), "{r:?}");
        assert!(t0.elapsed() < Duration::from_secs(3));
    }

    /// The request reaches the child's stdin and its stdout comes back; a large input does not
    /// block on the pipe.
    #[test]
    fn the_request_goes_in_and_the_answer_comes_back() {
        let input = vec![b'x'; 1 << 20];
        let out = run(sh("wc -c"), input, &limits(10_000)).unwrap();
        assert_eq!(String::from_utf8(out).unwrap().trim(), "1048576");
    }

    /// A child that dies says how, with what it wrote last; one that ran out of memory says
    /// which limit.
    #[test]
    fn a_dying_child_is_named_with_its_status() {
        let r = run(
            sh("echo 'it broke' >&2; exit 3"),
            Vec::new(),
            &limits(10_000),
        );
        let m = r.unwrap_err();
        assert!(matches!(m, Ended::Died(_)), "{m:?}");
        assert!(m.message().contains("exit status: 3") && m.message().contains("it broke"));
        let r = run(
            sh(
                "echo \"terminate called after throwing an instance of 'std::bad_alloc'\" >&2; kill -ABRT $$",
            ),
            Vec::new(),
            &limits(10_000),
        );
        assert_eq!(r, Err(Ended::Memory(memory_message(&limits(10_000)))));
        let r = spawn(Command::new("/nonexistent/atrex-child"));
        assert!(matches!(r, Err(Ended::Start(ref m)) if m.contains("/nonexistent/atrex-child")));
    }
}
