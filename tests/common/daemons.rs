//! Daemons started by a test (sshd, munged, slurmctld, slurmd): each in its own process group,
//! its output in a log file, stopped when the test's guard drops — also when the test fails.
//! Every process a test starts carries its [`Tag`] in its environment (launchers pass the
//! environment on: `srun` exports it, the ssh templates set it on the remote command), so what a
//! daemon started outside its group (sshd's connections, slurmstepd, the remote workers) is
//! found by that tag and stopped too, and nothing of another test is touched.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that marks a test's processes.
pub const TAG_VAR: &str = "ATREX_CLUSTER_TEST";

/// Says something in the test's output even when cargo captures it (a skip, a measured time).
pub fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Ends a test that cannot run here, saying why (never a silent pass).
pub fn skip(test: &str, why: &str) {
    say(&format!("SKIPPED: {test}: {why}"));
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The program's path: on PATH, or in the sbin folders (daemons live there, often off PATH).
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The first of `names` that is missing, if any.
pub fn missing(names: &[&str]) -> Option<String> {
    names
        .iter()
        .find(|n| which(n).is_none())
        .map(|n| n.to_string())
}

/// A port on 127.0.0.1 that nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

/// Waits until `ok` holds, checking every 50 ms; false after `limit`.
pub fn wait_until(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        if ok() {
            return true;
        }
        if t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A unique mark for one test's processes (see the module).
#[derive(Clone)]
pub struct Tag(pub String);

impl Tag {
    pub fn new(test: &str) -> Tag {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        Tag(format!("{test}-{}-{nanos}", std::process::id()))
    }

    /// `ATREX_CLUSTER_TEST=<tag>`, as a remote command's `env` sets it.
    pub fn assignment(&self) -> String {
        format!("{TAG_VAR}={}", self.0)
    }

    /// The processes carrying this tag (not this test process), with their command lines.
    pub fn processes(&self) -> Vec<(u32, String)> {
        let want = self.assignment().into_bytes();
        let me = std::process::id();
        let mut out = Vec::new();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return out;
        };
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid == me {
                continue;
            }
            let Ok(env) = std::fs::read(e.path().join("environ")) else {
                continue;
            };
            if env.split(|b| *b == 0).any(|v| v == want.as_slice()) {
                let cmd = std::fs::read(e.path().join("cmdline"))
                    .map(|c| {
                        String::from_utf8_lossy(&c)
                            .replace('\0', " ")
                            .trim()
                            .to_string()
                    })
                    .unwrap_or_default();
                // A zombie has no command line and is gone once reaped.
                if !cmd.is_empty() {
                    out.push((pid, cmd));
                }
            }
        }
        out
    }

    /// The workers (`atrex-tui worker …`) carrying the tag: not their launchers.
    pub fn workers(&self) -> Vec<(u32, String)> {
        let exe = super::exe().display().to_string();
        self.processes()
            .into_iter()
            .filter(|(_, cmd)| cmd.starts_with(&format!("{exe} worker ")))
            .collect()
    }

    /// Sends `sig` to every process carrying the tag.
    pub fn signal_all(&self, sig: libc::c_int) {
        for (pid, _) in self.processes() {
            // SAFETY: kill(2) on a pid just read from /proc whose environment carries this
            // test's unique tag.
            unsafe {
                libc::kill(pid as libc::pid_t, sig);
            }
        }
    }

    /// Stops every process carrying the tag: SIGTERM, then SIGKILL what is left after 5 s.
    pub fn stop_all(&self) {
        self.signal_all(libc::SIGTERM);
        if !wait_until(Duration::from_secs(5), || self.processes().is_empty()) {
            self.signal_all(libc::SIGKILL);
            wait_until(Duration::from_secs(5), || self.processes().is_empty());
        }
    }
}

/// A daemon in its own process group; stopped (the whole group) when dropped.
pub struct Daemon {
    pub name: String,
    pub child: Child,
    pub log: PathBuf,
}

impl Daemon {
    /// Starts `cmd` (with the tag in its environment), its stdout and stderr in `dir/NAME.out`.
    pub fn start(name: &str, mut cmd: Command, dir: &Path, tag: &Tag) -> Result<Daemon, String> {
        use std::os::unix::process::CommandExt;
        let log = dir.join(format!("{name}.out"));
        let out = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        cmd.env(TAG_VAR, &tag.0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        Ok(Daemon {
            name: name.to_string(),
            child,
            log,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// What it wrote (the last lines), for a message.
    pub fn tail(&self) -> String {
        let t = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = t.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// Stops the process group: SIGTERM, SIGKILL after 5 s.
    pub fn stop(&mut self) {
        let pg = self.child.id() as libc::pid_t;
        if !self.alive() {
            return;
        }
        // SAFETY: kill(2) on the process group this daemon leads (`process_group(0)`).
        unsafe {
            libc::kill(-pg, libc::SIGTERM);
        }
        if !wait_until(Duration::from_secs(5), || !self.alive()) {
            // SAFETY: as above.
            unsafe {
                libc::kill(-pg, libc::SIGKILL);
            }
            let _ = self.child.wait();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The short host name (what Slurm calls this machine).
pub fn short_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().split('.').next().unwrap_or("").to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Runs a command to its end, with a time limit: (success, stdout, stderr).
pub fn run(cmd: &mut Command, limit: Duration) -> (bool, String, String) {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        return (false, String::new(), format!("cannot run {cmd:?}"));
    };
    let done = wait_until(limit, || matches!(child.try_wait(), Ok(Some(_))));
    if !done {
        let _ = child.kill();
    }
    match child.wait_with_output() {
        Ok(o) => (
            done && o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        ),
        Err(e) => (false, String::new(), e.to_string()),
    }
}
