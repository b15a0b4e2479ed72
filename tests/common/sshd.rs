//! OpenSSH's `sshd` on a loopback port, for one test: a throwaway host key and user key in the
//! test's folder, its own config (`-f`, absolute paths, `StrictModes no`), in the foreground
//! (`-D -e`). Logs in as the user running the test. Stopped with its connections when dropped.

use super::daemons::{self, Daemon, Tag};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub struct Sshd {
    pub port: u16,
    /// The user key (`ssh -i`).
    pub key: PathBuf,
    pub daemon: Daemon,
    pub tag: Tag,
}

/// What a test needs to start sshd here, or why it cannot (the reason to skip).
pub fn available() -> Result<PathBuf, String> {
    if let Some(m) = daemons::missing(&["sshd", "ssh", "ssh-keygen"]) {
        return Err(format!(
            "`{m}` is not installed (apt-get install openssh-server openssh-client)"
        ));
    }
    // sshd refuses to start without its privilege separation folder, which only root creates.
    let privsep = Path::new("/run/sshd");
    if !privsep.is_dir() {
        if !daemons::is_root() {
            return Err("sshd needs /run/sshd, which only root can create".into());
        }
        std::fs::create_dir_all(privsep).map_err(|e| format!("cannot create /run/sshd: {e}"))?;
    }
    daemons::which("sshd").ok_or_else(|| "sshd is not installed".into())
}

/// `sshd -V`'s answer (OpenSSH prints its version on stderr).
pub fn version(sshd: &Path) -> String {
    let (_, out, err) = daemons::run(Command::new(sshd).arg("-V"), Duration::from_secs(10));
    let text = format!("{err}{out}");
    text.lines()
        .find(|l| l.contains("OpenSSH"))
        .unwrap_or(text.trim())
        .trim()
        .to_string()
}

fn keygen(path: &Path) -> Result<(), String> {
    let (ok, _, err) = daemons::run(
        Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(path),
        Duration::from_secs(30),
    );
    if ok {
        Ok(())
    } else {
        Err(format!("ssh-keygen {}: {err}", path.display()))
    }
}

impl Sshd {
    /// Starts sshd in `dir` (an absolute path) and waits until it accepts a login.
    pub fn start(sshd: &Path, dir: &Path, tag: &Tag) -> Result<Sshd, String> {
        let host_key = dir.join("host_key");
        let key = dir.join("user_key");
        keygen(&host_key)?;
        keygen(&key)?;
        let pubkey =
            std::fs::read_to_string(dir.join("user_key.pub")).map_err(|e| e.to_string())?;
        let authorized = dir.join("authorized_keys");
        std::fs::write(&authorized, pubkey).map_err(|e| e.to_string())?;
        let port = daemons::free_port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nAuthorizedKeysFile {auth}\n\
                 PidFile {pid}\nStrictModes no\nPubkeyAuthentication yes\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\n\
                 MaxStartups 100\nMaxSessions 100\nLogLevel VERBOSE\n",
                host = host_key.display(),
                auth = authorized.display(),
                pid = dir.join("sshd.pid").display(),
            ),
        )
        .map_err(|e| e.to_string())?;
        let mut cmd = Command::new(sshd);
        cmd.args(["-D", "-e", "-f"]).arg(&config);
        let daemon = Daemon::start("sshd", cmd, dir, tag)?;
        let s = Sshd {
            port,
            key,
            daemon,
            tag: tag.clone(),
        };
        // Up once a login runs a command.
        let mut last = String::new();
        let up = daemons::wait_until(Duration::from_secs(30), || {
            let (ok, out, err) = daemons::run(
                Command::new("ssh")
                    .args(s.args())
                    .args(["127.0.0.1", "echo", "ready"]),
                Duration::from_secs(10),
            );
            last = err;
            ok && out.trim() == "ready"
        });
        if !up {
            return Err(format!(
                "sshd did not accept a login within 30 s ({}); its log:\n{}",
                last.trim(),
                s.daemon.tail()
            ));
        }
        Ok(s)
    }

    /// The options of an `ssh` to it (before the host): no terminal, this key only, no
    /// prompt, no known-hosts file.
    pub fn args(&self) -> Vec<String> {
        [
            "-T",
            "-p",
            &self.port.to_string(),
            "-i",
            &self.key.display().to_string(),
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// sshd's per-connection processes (its children: one per connection).
    pub fn connections(&self) -> Vec<u32> {
        children(self.daemon.pid())
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // Connections run in sessions of their own (outside the daemon's group): they and the
        // commands they started go by the tag.
        self.daemon.stop();
        self.tag.stop_all();
    }
}

/// The processes whose parent is `parent`.
pub fn children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid …: the command may hold spaces and parentheses.
        let ppid = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}
