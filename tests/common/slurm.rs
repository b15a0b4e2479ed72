//! A single-node Slurm cluster for one test: munged (its own key and socket), slurmctld and
//! slurmd, every file in the test's folder and both ports picked free. No cgroups
//! (`ProctrackType=proctrack/linuxproc`, `TaskPlugin=task/none`), `select/cons_tres` by CPU so
//! that each `srun --ntasks=1` takes one of the node's CPUs. The clients find it through
//! `SLURM_CONF` (nothing under /etc is read or written). Dropping it cancels its jobs and
//! stops its daemons and every process they started.

use super::daemons::{self, Daemon, Tag};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub struct Slurm {
    /// slurm.conf, for `SLURM_CONF`.
    pub conf: PathBuf,
    pub node: String,
    pub tag: Tag,
    /// Stopped in this order: the node, the controller, munge.
    daemons: Vec<Daemon>,
}

/// Why Slurm cannot run here, if it cannot.
pub fn available() -> Result<(), String> {
    if let Some(m) = daemons::missing(&[
        "munged",
        "slurmctld",
        "slurmd",
        "srun",
        "sbatch",
        "squeue",
        "scancel",
        "sinfo",
    ]) {
        return Err(format!(
            "`{m}` is not installed (apt-get install slurmctld slurmd slurm-client munge)"
        ));
    }
    if !daemons::is_root() {
        return Err("slurmd starts jobs as their user and needs root".into());
    }
    Ok(())
}

/// A `[[workers]]` entry for `count` simulated workers through `srun` (one CPU each).
pub fn srun_entry(count: u32, hello_timeout_secs: u32) -> String {
    format!(
        "[[workers]]\ncommand = \"srun --ntasks=1 --cpus-per-task=1 --time=10 --job-name=atrex-worker {{exe}} worker --simulate=shapes --device 0\"\ncount = {count}\nlabel = \"slurm\"\nhello_timeout_secs = {hello_timeout_secs}\n"
    )
}

impl Slurm {
    /// Starts a cluster of one node with `cpus` CPUs in `dir` (an absolute path) and waits
    /// until the node is idle.
    pub fn start(dir: &Path, tag: &Tag, cpus: u32) -> Result<Slurm, String> {
        let state = dir.join("state");
        let spool = dir.join("spool");
        for d in [&state, &spool] {
            std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
        }
        // munge: a key of its own (readable by its owner only), a socket of its own.
        let key = dir.join("munge.key");
        let mut bytes = vec![0u8; 1024];
        {
            use std::io::Read;
            std::fs::File::open("/dev/urandom")
                .and_then(|mut f| f.read_exact(&mut bytes))
                .map_err(|e| format!("/dev/urandom: {e}"))?;
        }
        std::fs::write(&key, &bytes).map_err(|e| e.to_string())?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| e.to_string())?;
        }
        let socket = dir.join("munge.socket");
        let mut munged = Command::new(daemons::which("munged").unwrap());
        munged
            .args(["--force", "--foreground"])
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", dir.join("munged.pid").display()))
            .arg(format!("--log-file={}", dir.join("munged.log").display()))
            .arg(format!("--seed-file={}", dir.join("munged.seed").display()));
        let mut daemons_up = vec![Daemon::start("munged", munged, dir, tag)?];
        if !daemons::wait_until(Duration::from_secs(20), || socket.exists()) {
            return Err(format!(
                "munged did not open its socket within 20 s:\n{}",
                daemons_up[0].tail()
            ));
        }
        let host = daemons::short_hostname();
        let ctld_port = daemons::free_port();
        let node_port = daemons::free_port();
        let node = format!("atrex{node_port}");
        let plugstack = dir.join("plugstack.conf");
        std::fs::write(&plugstack, "").map_err(|e| e.to_string())?;
        let conf = dir.join("slurm.conf");
        let p = |name: &str| dir.join(name).display().to_string();
        std::fs::write(
            &conf,
            format!(
                "ClusterName=atrex\n\
                 SlurmctldHost={host}(127.0.0.1)\n\
                 SlurmctldPort={ctld_port}\n\
                 SlurmdPort={node_port}\n\
                 SlurmUser=root\n\
                 SlurmdUser=root\n\
                 AuthType=auth/munge\n\
                 CredType=cred/munge\n\
                 AuthInfo=socket={socket}\n\
                 StateSaveLocation={state}\n\
                 SlurmdSpoolDir={spool}\n\
                 SlurmctldPidFile={ctld_pid}\n\
                 SlurmdPidFile={node_pid}\n\
                 SlurmctldLogFile={ctld_log}\n\
                 SlurmdLogFile={node_log}\n\
                 PlugStackConfig={plugstack}\n\
                 MailProg=/bin/true\n\
                 ProctrackType=proctrack/linuxproc\n\
                 TaskPlugin=task/none\n\
                 JobAcctGatherType=jobacct_gather/none\n\
                 AccountingStorageType=accounting_storage/none\n\
                 SelectType=select/cons_tres\n\
                 SelectTypeParameters=CR_CPU\n\
                 SlurmdParameters=config_overrides\n\
                 SchedulerType=sched/builtin\n\
                 MpiDefault=none\n\
                 ReturnToService=2\n\
                 KillWait=5\n\
                 MinJobAge=5\n\
                 NodeName={node} NodeAddr=127.0.0.1 NodeHostname={host} CPUs={cpus} State=UNKNOWN\n\
                 PartitionName=atrex Nodes={node} Default=YES MaxTime=INFINITE State=UP\n",
                socket = socket.display(),
                state = state.display(),
                spool = spool.display(),
                ctld_pid = p("slurmctld.pid"),
                node_pid = p("slurmd.pid"),
                ctld_log = p("slurmctld.log"),
                node_log = p("slurmd.log"),
                plugstack = plugstack.display(),
            ),
        )
        .map_err(|e| e.to_string())?;
        let mut ctld = Command::new(daemons::which("slurmctld").unwrap());
        ctld.args(["-D", "-c", "-f"])
            .arg(&conf)
            .env("SLURM_CONF", &conf);
        daemons_up.insert(0, Daemon::start("slurmctld", ctld, dir, tag)?);
        let mut slurmd = Command::new(daemons::which("slurmd").unwrap());
        slurmd
            .args(["-D", "-N", &node, "-f"])
            .arg(&conf)
            .env("SLURM_CONF", &conf);
        daemons_up.insert(0, Daemon::start("slurmd", slurmd, dir, tag)?);
        let s = Slurm {
            conf,
            node,
            tag: tag.clone(),
            daemons: daemons_up,
        };
        let mut last = String::new();
        let idle = daemons::wait_until(Duration::from_secs(60), || {
            let (_, out, err) = daemons::run(
                s.cmd("sinfo").args(["-h", "-o", "%T", "-n", &s.node]),
                Duration::from_secs(10),
            );
            last = format!("{}{}", out.trim(), err.trim());
            out.trim() == "idle"
        });
        if !idle {
            return Err(format!(
                "the Slurm node did not come up idle within 60 s (sinfo: {last}); slurmctld:\n{}\nslurmd:\n{}",
                s.log("slurmctld"),
                s.log("slurmd")
            ));
        }
        Ok(s)
    }

    /// A Slurm client command (or a command that runs one) for this cluster.
    pub fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf)
            .env(daemons::TAG_VAR, &self.tag.0);
        c
    }

    /// `sinfo --version`.
    pub fn version(&self) -> String {
        let (_, out, err) =
            daemons::run(self.cmd("sinfo").arg("--version"), Duration::from_secs(10));
        format!("{}{}", out.trim(), err.trim())
    }

    /// The jobs in the queue: (id, state, name).
    pub fn jobs(&self) -> Vec<(String, String, String)> {
        let (_, out, _) = daemons::run(
            self.cmd("squeue").args(["-h", "-o", "%i %T %j"]),
            Duration::from_secs(10),
        );
        out.lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                Some((
                    w.next()?.to_string(),
                    w.next()?.to_string(),
                    w.next().unwrap_or("").to_string(),
                ))
            })
            .collect()
    }

    pub fn scancel(&self, ids: &[String]) {
        if !ids.is_empty() {
            daemons::run(self.cmd("scancel").args(ids), Duration::from_secs(10));
        }
    }

    /// The end of a daemon's log.
    pub fn log(&self, name: &str) -> String {
        let t = std::fs::read_to_string(self.conf.parent().unwrap().join(format!("{name}.log")))
            .unwrap_or_default();
        let lines: Vec<&str> = t.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let ids: Vec<String> = self.jobs().into_iter().map(|(id, _, _)| id).collect();
        self.scancel(&ids);
        daemons::wait_until(Duration::from_secs(15), || self.jobs().is_empty());
        for d in &mut self.daemons {
            d.stop();
        }
        // slurmstepd and the tasks live outside the daemons' groups.
        self.tag.stop_all();
    }
}
