//! Stand-ins for the launchers a cluster uses, for tests without a cluster or a GPU: an `ssh`
//! that runs the command here (as if on the named host) and can drop the connection mid-job,
//! and old or foreign workers that answer `hello` with other versions.

use std::path::{Path, PathBuf};

/// A fresh folder for one test's scripts and files.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("atrex-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// When the stand-in ssh drops a connection.
#[derive(Clone, Copy)]
pub enum Drop {
    Never,
    /// The first connection to each of these hosts, after this many lines from the worker.
    First(usize),
    /// Every connection to these hosts, after this many lines.
    Every(usize),
}

/// Writes `DIR/ssh`: skips ssh's options, takes the host, and runs the remote command here with
/// `ATREX_SIM_HOST` set to the host (so a simulated worker names it). For the hosts in `drop`
/// it cuts the connection after `n` lines of the worker's output: the worker's output stops,
/// and this "ssh" dies as a real one does when the link goes. Put `DIR` first on PATH.
pub fn ssh(dir: &Path, drop_hosts: &[&str], drop: Drop) -> PathBuf {
    let (n, every) = match drop {
        Drop::Never => (0, false),
        Drop::First(n) => (n, false),
        Drop::Every(n) => (n, true),
    };
    let path = dir.join("ssh");
    let script = format!(
        r#"#!/bin/sh
# A stand-in for ssh (tests): options skipped, the host taken, the command run here.
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1; shift
export ATREX_SIM_HOST="$host"
drop=no
case " {hosts} " in *" $host "*) drop=yes ;; esac
if [ "$drop" = yes ] && [ "{every}" = false ]; then
  if [ -e "{dir}/$host.dropped" ]; then drop=no; else : > "{dir}/$host.dropped"; fi
fi
if [ "$drop" = no ] || [ {n} -eq 0 ]; then exec sh -c "$*"; fi
sh -c "$*" | {{
  i=0
  while [ $i -lt {n} ] && IFS= read -r l; do printf '%s\n' "$l"; i=$((i+1)); done
  if [ $i -ge {n} ]; then echo "$host" >> "{dir}/drops"; fi
  kill -TERM $$
}}
"#,
        hosts = drop_hosts.join(" "),
        every = every,
        dir = dir.display(),
        n = n,
    );
    executable(&path, &script);
    path
}

/// How many connections the stand-in ssh of `dir` dropped.
pub fn drops(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("drops"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Writes a worker that answers hello as another atrex-tui would: `protocol`, and the tool
/// version (None: a worker from before protocol 3, which sent none), then reads until its input
/// ends. Returns the command that starts it.
pub fn foreign_worker(dir: &Path, name: &str, protocol: u32, tool: Option<&str>) -> String {
    let path = dir.join(format!("{name}.sh"));
    let extra = match tool {
        Some(t) => format!(r#","tool_version":"{t}","host":"{name}""#),
        None => String::new(),
    };
    let script = format!(
        r#"#!/bin/sh
read line
id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
printf '{{"type":"hello","id":%s,"protocol":{protocol}{extra},"probe":{{"driver_version":"12.4","nvrtc_version":null,"devices":[]}},"device":null}}\n' "$id"
cat > /dev/null
"#
    );
    executable(&path, &script);
    format!("sh {}", path.display())
}

/// A launch template that starts a simulated worker (every shape gets a result) on this machine
/// as if on `host`, with `gpu` as its GPU model.
pub fn sim_template(host: &str, gpu: &str) -> String {
    format!(
        "sh -c 'ATREX_SIM_HOST={host} ATREX_SIM_GPU=\"{gpu}\" exec {} worker --simulate=shapes --device {{device}}'",
        super::exe().display()
    )
}
