//! Workers through a real `ssh` to a real OpenSSH `sshd` (started here on a loopback port, with
//! throwaway keys): `bench --workers FILE` measures every shape on simulated workers reached
//! over ssh, and a connection cut mid-job (sshd's per-connection process killed) costs nothing
//! but a requeue. Says SKIPPED where sshd cannot be installed or started (docs/cluster.md).

mod common;

use common::daemons::{self, Tag, say, skip};
use common::sshd::Sshd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A `[[workers]]` entry for a simulated worker on `host`, reached over ssh to `sshd`; each
/// shape takes `shape_ms`.
fn ssh_entry(sshd: &Sshd, tag: &Tag, host: &str, shape_ms: u64) -> String {
    format!(
        "[[workers]]\ncommand = \"ssh {} 127.0.0.1 env {} ATREX_SIM_HOST={host} ATREX_SIM_SHAPE_MS={shape_ms} {{exe}} worker --simulate=shapes --device {{device}}\"\n\n",
        sshd.args().join(" "),
        tag.assignment(),
    )
}

fn json(stdout: &[u8], stderr: &str) -> serde_json::Value {
    serde_json::from_slice(stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(stdout)))
}

/// Each worker's start time, as `doctor --json` measured it.
fn doctor_starts(file: &Path, ws: &Path) -> Vec<(String, f64)> {
    let out = Command::new(common::exe())
        .args(["doctor", "--json", "--workers"])
        .arg(file)
        .arg("--workspace")
        .arg(ws)
        .output()
        .unwrap();
    let d = json(&out.stdout, &String::from_utf8_lossy(&out.stderr));
    d["workers"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            assert_eq!(w["answered_hello"], true, "{w}");
            (
                w["name"].as_str().unwrap().to_string(),
                w["start_s"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn bench_over_sshd_survives_a_cut_connection() {
    const TEST: &str = "bench_over_sshd_survives_a_cut_connection";
    let sshd_bin = match common::sshd::available() {
        Ok(p) => p,
        Err(why) => return skip(TEST, &why),
    };
    let dir = common::standins::scratch("sshd");
    let tag = Tag::new("sshd");
    let sshd = match Sshd::start(&sshd_bin, &dir, &tag) {
        Ok(s) => s,
        Err(why) => {
            let _ = std::fs::remove_dir_all(&dir);
            return skip(TEST, &why);
        }
    };
    say(&format!(
        "sshd: {} on 127.0.0.1:{}",
        common::sshd::version(&sshd_bin),
        sshd.port
    ));
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();

    // How long a start takes through ssh, next to the same worker started through `sh -c`.
    let probe = dir.join("probe.toml");
    std::fs::write(
        &probe,
        format!(
            "[[workers]]\ncommand = \"sh -c 'ATREX_SIM_HOST=local exec {{exe}} worker --simulate=shapes --device {{device}}'\"\n\n{}",
            ssh_entry(&sshd, &tag, "ssh-probe", 0)
        ),
    )
    .unwrap();
    let starts = doctor_starts(&probe, &ws);
    assert_eq!(starts.len(), 2, "{starts:?}");
    say(&format!(
        "worker start (launch to hello): sh -c {:.3} s, ssh to sshd {:.3} s",
        starts[0].1, starts[1].1
    ));

    // Two workers over ssh; each shape takes 200 ms, so a cut lands mid-job.
    let file = dir.join("workers.toml");
    std::fs::write(
        &file,
        format!(
            "{}{}",
            ssh_entry(&sshd, &tag, "ssh-a", 200),
            ssh_entry(&sshd, &tag, "ssh-b", 200)
        ),
    )
    .unwrap();
    let out_path = dir.join("bench.json");
    let err_path = dir.join("bench.err");
    let t0 = Instant::now();
    let mut bench = Command::new(common::exe())
        .args([
            "bench",
            "rms_norm",
            "--quick",
            "--json",
            "--hardware",
            "H200",
        ])
        .arg("--workers")
        .arg(&file)
        .arg("--workspace")
        .arg(&ws)
        .env(daemons::TAG_VAR, &tag.0)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    // Both remote workers started (logged in, the command run) and measuring: cut one
    // connection a second later, while every worker is on a shape.
    let connected = daemons::wait_until(Duration::from_secs(60), || tag.workers().len() >= 2);
    assert!(
        connected && sshd.connections().len() >= 2,
        "two workers over ssh: {:?}\n{}",
        tag.processes(),
        sshd.daemon.tail()
    );
    std::thread::sleep(Duration::from_millis(1000));
    let victim = sshd.connections()[0];
    // SAFETY: kill(2) on a child of the sshd this test started.
    unsafe {
        libc::kill(victim as libc::pid_t, libc::SIGKILL);
    }
    let cut_at = t0.elapsed().as_secs_f64();
    let done = daemons::wait_until(Duration::from_secs(180), || {
        matches!(bench.try_wait(), Ok(Some(_)))
    });
    if !done {
        let _ = bench.kill();
    }
    let _ = bench.wait();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert!(done, "bench did not end within 180 s: {stderr}");
    let d = json(&std::fs::read(&out_path).unwrap(), &stderr);

    // Every shape measured once, each naming one of the two workers.
    let shapes = d["shapes"].as_array().unwrap();
    assert_eq!(shapes.len(), 56, "{d}");
    let mut on = std::collections::BTreeMap::<String, usize>::new();
    for s in shapes {
        assert_eq!(s["verdict"], "unchecked", "{s}");
        *on.entry(s["worker"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    assert_eq!(
        on.keys().cloned().collect::<Vec<_>>(),
        vec!["ssh-a:0", "ssh-b:0"],
        "{on:?}"
    );
    // The cut cost one requeue and one new connection.
    let pool = &d["pool"];
    assert_eq!(pool["requeued"], 1, "{pool}");
    let restarts: u64 = pool["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["restarts"].as_u64().unwrap())
        .sum();
    assert_eq!(restarts, 1, "{pool}");
    let reconnect = pool["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["restarts"] == 1)
        .and_then(|w| w["start_s"].as_f64())
        .unwrap();
    say(&format!(
        "ssh: cut at {cut_at:.1} s, bench done in {:.1} s (wall_s {:.1}); the new connection's worker answered in {reconnect:.3} s; shapes per worker {on:?}",
        t0.elapsed().as_secs_f64(),
        d["wall_s"].as_f64().unwrap_or(0.0),
    ));

    // Once the command ended, its connections, ssh clients and remote workers are gone.
    let gone = daemons::wait_until(Duration::from_secs(20), || {
        sshd.connections().is_empty()
            && !tag
                .processes()
                .iter()
                .any(|(_, cmd)| cmd.contains(" worker ") || cmd.starts_with("ssh "))
    });
    assert!(
        gone,
        "left after the command: connections {:?}, processes {:?}",
        sshd.connections(),
        tag.processes()
    );
    drop(sshd);
    assert!(tag.processes().is_empty(), "{:?}", tag.processes());
    let _ = std::fs::remove_dir_all(&dir);
}
