//! How a worker's process is stopped. A templated worker's process is its launcher (`ssh`,
//! `srun`, `kubectl exec`), which holds something elsewhere: a connection, a job step, an
//! allocation still waiting in a queue. Killed with SIGKILL, `srun` can clean none of it up: a
//! pending allocation stays in the queue (it is granted later and holds the node), a running
//! step keeps its task alive until its time limit. Asked to end, every launcher does it:
//! `srun` cancels its step or withdraws its pending allocation on SIGTERM, `ssh` closes the
//! connection and the remote worker reads the end of its input.
//!
//! Invariants:
//! - a launcher is asked first: its input closed (when the worker is answering, so that it
//!   ends as after its last job), then SIGTERM, and SIGKILL only when it is still there after
//!   [`TERM_GRACE`];
//! - this program's own worker (no template) holds nothing elsewhere and is killed at once, as
//!   a hung kernel answers no request;
//! - a [`Launched`] dropped without being stopped (the command ended and its runtime with it)
//!   sends SIGTERM to a launcher still running, SIGKILL to its own worker: nothing is waited
//!   for, and nothing of a launcher's is left behind for want of asking.

use std::time::Duration;
use tokio::process::{Child, ChildStdin};

/// How long a launcher has to end after its input closed.
pub const EOF_GRACE: Duration = Duration::from_secs(2);

/// How long a launcher has to end after SIGTERM before it is killed.
pub const TERM_GRACE: Duration = Duration::from_secs(5);

/// A worker's process: the launcher of a template, or this program's own worker.
pub struct Launched {
    pub child: Child,
    /// Started by a launch template (its process is a launcher).
    pub templated: bool,
}

/// Whether the worker can still be asked to end by closing its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It answers: close its input first (the end of a command, a worker that said no GPU).
    Answering,
    /// It is lost, hung or never answered (a hello timeout): signals only.
    Lost,
}

impl Launched {
    pub fn new(child: Child, templated: bool) -> Launched {
        Launched { child, templated }
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn signal(&self, sig: libc::c_int) {
        if let Some(pid) = self.child.id() {
            // SAFETY: kill(2) on the pid of a child this process started and has not reaped
            // (`id()` is None once it was), so the pid cannot name another process.
            unsafe {
                libc::kill(pid as libc::pid_t, sig);
            }
        }
    }

    async fn exited_within(&mut self, limit: Duration) -> bool {
        matches!(
            tokio::time::timeout(limit, self.child.wait()).await,
            Ok(Ok(_))
        )
    }

    /// Stops the process (its input is `stdin`, dropped here), as the module says.
    pub async fn stop(&mut self, stdin: Option<ChildStdin>, ending: Ending) {
        if !self.templated {
            drop(stdin);
            let _ = self.child.start_kill();
            let _ = self.exited_within(Duration::from_secs(2)).await;
            return;
        }
        drop(stdin);
        if !self.running() {
            return;
        }
        if ending == Ending::Answering && self.exited_within(EOF_GRACE).await {
            return;
        }
        self.signal(libc::SIGTERM);
        if self.exited_within(TERM_GRACE).await {
            return;
        }
        let _ = self.child.start_kill();
        let _ = self.exited_within(Duration::from_secs(2)).await;
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        if !self.running() {
            return;
        }
        if self.templated {
            self.signal(libc::SIGTERM);
        } else {
            let _ = self.child.start_kill();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    /// A launcher that notes the end of its input and SIGTERM in `dir/said`, and ignores both
    /// when `stubborn` (so only SIGKILL ends it).
    fn launcher(dir: &std::path::Path, stubborn: bool) -> Launched {
        let said = dir.join("said");
        let script = if stubborn {
            format!(
                "trap 'echo term >> {s}' TERM; while :; do read l || echo eof >> {s}; sleep 0.05; done",
                s = said.display()
            )
        } else {
            format!(
                "trap 'echo term >> {s}; exit 0' TERM; while read l; do :; done; echo eof >> {s}; while :; do sleep 0.05; done",
                s = said.display()
            )
        };
        let child = tokio::process::Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .kill_on_drop(false)
            .spawn()
            .unwrap();
        Launched::new(child, true)
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("atrex-stop-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn said(dir: &std::path::Path) -> String {
        std::fs::read_to_string(dir.join("said")).unwrap_or_default()
    }

    #[tokio::test]
    async fn a_launcher_hears_the_end_of_its_input_then_sigterm() {
        let dir = scratch("polite");
        let mut l = launcher(&dir, false);
        let stdin = l.child.stdin.take();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let t0 = std::time::Instant::now();
        l.stop(stdin, Ending::Answering).await;
        assert!(!l.running());
        // It read the end of its input, waited (as a launcher whose remote side lingers), and
        // SIGTERM ended it after the grace, before any SIGKILL would have.
        assert_eq!(said(&dir), "eof\nterm\n");
        let took = t0.elapsed();
        assert!(
            took >= EOF_GRACE && took < EOF_GRACE + TERM_GRACE,
            "{took:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_lost_launcher_gets_sigterm_at_once_and_sigkill_only_when_it_stays() {
        let dir = scratch("lost");
        let mut l = launcher(&dir, true);
        let stdin = l.child.stdin.take();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let t0 = std::time::Instant::now();
        l.stop(stdin, Ending::Lost).await;
        assert!(!l.running(), "SIGKILL ends what SIGTERM did not");
        assert!(said(&dir).contains("term"), "{}", said(&dir));
        let took = t0.elapsed();
        assert!(
            took >= TERM_GRACE && took < TERM_GRACE + EOF_GRACE,
            "{took:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_launcher_dropped_running_gets_sigterm() {
        let dir = scratch("dropped");
        let mut l = launcher(&dir, false);
        let pid = l.child.id().unwrap();
        let _stdin = l.child.stdin.take();
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(l);
        let t0 = std::time::Instant::now();
        while !said(&dir).contains("term") && t0.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(said(&dir), "term\n", "asked to end, not killed (pid {pid})");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
