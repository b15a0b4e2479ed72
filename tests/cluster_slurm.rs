//! Workers through a real Slurm (a one-node cluster started here: munged, slurmctld, slurmd;
//! see tests/common/slurm.rs): `srun` allocations carry simulated workers. A job cancelled
//! with `scancel` mid-run is requeued and finished; an allocation that waits in the queue is
//! served when it comes within `hello_timeout_secs`, and reported (and withdrawn) after it;
//! three agents at once share the pool and one session. Says SKIPPED where Slurm cannot be
//! installed or started (docs/cluster.md).

mod common;

use common::daemons::{self, Tag, say, skip};
use common::slurm::{self, Slurm};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A started cluster in a fresh folder (`key` names it: short, as munge's socket path is
/// bounded), or why there is none.
fn cluster(test: &str, key: &str, cpus: u32) -> Option<(Slurm, PathBuf)> {
    if let Err(why) = slurm::available() {
        skip(test, &why);
        return None;
    }
    let dir = common::standins::scratch(&format!("slurm-{key}"));
    let tag = Tag::new("slurm");
    match Slurm::start(&dir, &tag, cpus) {
        Ok(s) => {
            say(&format!("{test}: {} on node {}", s.version(), s.node));
            Some((s, dir))
        }
        Err(why) => {
            skip(test, &why);
            let _ = std::fs::remove_dir_all(&dir);
            None
        }
    }
}

/// A command of this program run against the cluster, each shape of its simulated workers
/// taking `shape_ms` (srun passes the environment on); stdout and stderr go to files.
struct Run {
    child: std::process::Child,
    out: PathBuf,
    err: PathBuf,
    t0: Instant,
}

impl Run {
    fn start(s: &Slurm, dir: &Path, name: &str, args: &[&str], shape_ms: u64) -> Run {
        let out = dir.join(format!("{name}.out"));
        let err = dir.join(format!("{name}.err"));
        let child = s
            .cmd(common::exe())
            .args(args)
            .env("ATREX_SIM_SHAPE_MS", shape_ms.to_string())
            .env("ATREX_TUI_CONFIG_DIR", dir.join("config"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        Run {
            child,
            out,
            err,
            t0: Instant::now(),
        }
    }

    /// Waits for the end (at most `limit`); the JSON it printed.
    fn json(mut self, limit: Duration) -> serde_json::Value {
        let done = daemons::wait_until(limit, || matches!(self.child.try_wait(), Ok(Some(_))));
        if !done {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        let err = std::fs::read_to_string(&self.err).unwrap_or_default();
        assert!(done, "did not end within {limit:?}: {err}");
        let out = std::fs::read(&self.out).unwrap();
        serde_json::from_slice(&out)
            .unwrap_or_else(|e| panic!("{e}: {}\n{err}", String::from_utf8_lossy(&out)))
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The tasks of the cluster's allocations that are workers.
fn worker_tasks(s: &Slurm) -> usize {
    s.tag.workers().len()
}

/// Shapes per worker name, every shape `unchecked` (simulated).
fn shapes_by_worker(d: &serde_json::Value) -> std::collections::BTreeMap<String, usize> {
    let mut on = std::collections::BTreeMap::new();
    for s in d["shapes"].as_array().unwrap() {
        assert_eq!(s["verdict"], "unchecked", "{s}");
        *on.entry(s["worker"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    on
}

/// After a command: its allocations gone from the queue and its tasks ended.
fn nothing_left(s: &Slurm) {
    let t0 = Instant::now();
    let clean = daemons::wait_until(Duration::from_secs(30), || {
        s.jobs().is_empty()
            && worker_tasks(s) == 0
            && !s
                .tag
                .processes()
                .iter()
                .any(|(_, c)| c.starts_with("srun "))
    });
    say(&format!(
        "srun: queue empty, no srun and no task left {:.1} s after the command",
        t0.elapsed().as_secs_f64()
    ));
    assert!(
        clean,
        "left after the command: jobs {:?}, processes {:?}\nslurmctld:\n{}",
        s.jobs(),
        s.tag.processes(),
        s.log("slurmctld")
    );
}

#[test]
fn bench_over_srun_requeues_a_cancelled_job() {
    const TEST: &str = "bench_over_srun_requeues_a_cancelled_job";
    let Some((s, dir)) = cluster(TEST, "requeue", 2) else {
        return;
    };
    let file = write(&dir, "workers.toml", &slurm::srun_entry(2, 120));
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws_arg = ws.display().to_string();
    let file_arg = file.display().to_string();

    // How long a start through srun takes on an idle node (doctor starts each worker once).
    let d = Run::start(
        &s,
        &dir,
        "doctor",
        &[
            "doctor",
            "--json",
            "--workers",
            &file_arg,
            "--workspace",
            &ws_arg,
        ],
        0,
    )
    .json(Duration::from_secs(120));
    let starts: Vec<f64> = d["workers"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            assert_eq!(w["answered_hello"], true, "{w}");
            w["start_s"].as_f64().unwrap()
        })
        .collect();
    say(&format!(
        "worker start through srun (launch to hello, idle node): {}",
        starts
            .iter()
            .map(|t| format!("{t:.3} s"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    nothing_left(&s);

    // Two allocations measure rms_norm (250 ms a shape); one is cancelled mid-run.
    let run = Run::start(
        &s,
        &dir,
        "bench",
        &[
            "bench",
            "rms_norm",
            "--quick",
            "--json",
            "--hardware",
            "H200",
            "--workers",
            &file_arg,
            "--workspace",
            &ws_arg,
        ],
        250,
    );
    let both = daemons::wait_until(Duration::from_secs(120), || {
        worker_tasks(&s) >= 2 && s.jobs().iter().filter(|(_, st, _)| st == "RUNNING").count() >= 2
    });
    assert!(both, "two running allocations: {:?}", s.jobs());
    std::thread::sleep(Duration::from_millis(1000));
    let victim = s
        .jobs()
        .into_iter()
        .find(|(_, st, name)| st == "RUNNING" && name == "atrex-worker")
        .map(|(id, _, _)| id)
        .unwrap();
    s.scancel(std::slice::from_ref(&victim));
    let cut_at = run.t0.elapsed().as_secs_f64();
    let t0 = run.t0;
    let d = run.json(Duration::from_secs(240));

    let on = shapes_by_worker(&d);
    assert_eq!(d["shapes"].as_array().unwrap().len(), 56, "{d}");
    assert_eq!(
        on.keys().cloned().collect::<Vec<_>>(),
        vec!["slurm:0#1", "slurm:0#2"],
        "{on:?}"
    );
    let pool = &d["pool"];
    assert_eq!(pool["requeued"], 1, "{pool}");
    let workers = pool["workers"].as_array().unwrap();
    let restarted: Vec<&serde_json::Value> =
        workers.iter().filter(|w| w["restarts"] == 1).collect();
    assert_eq!(restarted.len(), 1, "{pool}");
    assert!(
        workers.iter().all(|w| w["restarts"].as_u64() <= Some(1)),
        "{pool}"
    );
    say(&format!(
        "srun: job {victim} cancelled at {cut_at:.1} s, bench done in {:.1} s (wall_s {:.1}); the new allocation's worker answered in {:.3} s; shapes per worker {on:?}",
        t0.elapsed().as_secs_f64(),
        d["wall_s"].as_f64().unwrap_or(0.0),
        restarted[0]["start_s"].as_f64().unwrap_or(0.0),
    ));
    nothing_left(&s);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_queued_allocation_is_served_within_its_hello_timeout_and_reported_after_it() {
    const TEST: &str =
        "a_queued_allocation_is_served_within_its_hello_timeout_and_reported_after_it";
    let Some((s, dir)) = cluster(TEST, "queued", 2) else {
        return;
    };
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws_arg = ws.display().to_string();

    // Another job holds one of the two CPUs for 6 s: the second worker's allocation waits in
    // the queue, within its hello timeout, and joins once the job ends.
    let (ok, out, err) = daemons::run(
        s.cmd("sbatch")
            .args([
                "--job-name=holder",
                "--ntasks=1",
                "--cpus-per-task=1",
                "--output=/dev/null",
            ])
            .args(["--wrap", "sleep 6"]),
        Duration::from_secs(30),
    );
    assert!(ok, "sbatch: {out}{err}");
    assert!(
        daemons::wait_until(Duration::from_secs(30), || s
            .jobs()
            .iter()
            .any(|(_, st, n)| n == "holder" && st == "RUNNING")),
        "{:?}",
        s.jobs()
    );
    let file = write(&dir, "late.toml", &slurm::srun_entry(2, 120));
    let file_arg = file.display().to_string();
    let args = [
        "bench",
        "rms_norm",
        "--quick",
        "--json",
        "--hardware",
        "H200",
        "--workers",
        &file_arg,
        "--workspace",
        &ws_arg,
    ];
    let d = Run::start(&s, &dir, "late", &args, 50).json(Duration::from_secs(240));
    let on = shapes_by_worker(&d);
    assert_eq!(d["shapes"].as_array().unwrap().len(), 56, "{d}");
    assert_eq!(on.len(), 2, "both workers measured: {on:?}");
    let mut starts: Vec<f64> = d["pool"]["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["start_s"].as_f64().unwrap())
        .collect();
    starts.sort_by(f64::total_cmp);
    assert!(
        starts[0] < 4.0 && starts[1] >= 4.0,
        "one started at once, the other after the holder's 6 s: {starts:?}"
    );
    say(&format!(
        "srun: a queued allocation answered hello after {:.1} s (the other in {:.3} s); shapes per worker {on:?}",
        starts[1], starts[0]
    ));
    nothing_left(&s);

    // Three workers on two CPUs with a 4 s hello timeout: the third waits in the queue, is
    // reported after 4 s, and the other two measure everything (150 ms a shape, so that the
    // third is tried again meanwhile). Each allocation that timed out is withdrawn: never two
    // waiting at once, and nothing is left queued.
    let file = write(&dir, "full.toml", &slurm::srun_entry(3, 4));
    let file_arg = file.display().to_string();
    let args = [
        "bench",
        "rms_norm",
        "--quick",
        "--json",
        "--hardware",
        "H200",
        "--workers",
        &file_arg,
        "--workspace",
        &ws_arg,
    ];
    let run = Run::start(&s, &dir, "full", &args, 150);
    let t0 = run.t0;
    let running = std::sync::atomic::AtomicBool::new(true);
    let (d, most_pending) = std::thread::scope(|scope| {
        let watch = scope.spawn(|| {
            let mut most = 0;
            while running.load(std::sync::atomic::Ordering::SeqCst) {
                let pending = s
                    .jobs()
                    .iter()
                    .filter(|(_, st, name)| st == "PENDING" && name == "atrex-worker")
                    .count();
                most = most.max(pending);
                std::thread::sleep(Duration::from_millis(100));
            }
            most
        });
        let d = run.json(Duration::from_secs(240));
        running.store(false, std::sync::atomic::Ordering::SeqCst);
        (d, watch.join().unwrap())
    });
    let took = t0.elapsed().as_secs_f64();
    assert_eq!(
        most_pending, 1,
        "one allocation waits at a time: a timed-out start withdraws its own"
    );
    let on = shapes_by_worker(&d);
    assert_eq!(d["shapes"].as_array().unwrap().len(), 56, "{d}");
    let workers = d["pool"]["workers"].as_array().unwrap();
    let late: Vec<&serde_json::Value> = workers
        .iter()
        .filter(|w| {
            w["error"]
                .as_str()
                .is_some_and(|e| e.contains("did not answer hello within 4 s"))
        })
        .collect();
    assert_eq!(late.len(), 1, "{}", d["pool"]);
    let late_name = late[0]["name"].as_str().unwrap();
    assert!(!on.contains_key(late_name), "{on:?}");
    assert_eq!(on.len(), 2, "{on:?}");
    assert!(
        took >= 4.0,
        "the command waited for the hello timeout: {took:.1} s"
    );
    say(&format!(
        "srun: node full, {late_name} reported after its 4 s hello timeout; bench done in {took:.1} s; shapes per worker {on:?}"
    ));
    // Its allocation (and that of any start tried again since) was withdrawn, not left to
    // take the node later.
    nothing_left(&s);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn three_agents_share_a_slurm_pool_and_one_session() {
    const TEST: &str = "three_agents_share_a_slurm_pool_and_one_session";
    let Some((s, dir)) = cluster(TEST, "agents", 3) else {
        return;
    };
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let file = write(&dir, "workers.toml", &slurm::srun_entry(3, 120));
    let session = dir.join("s.jsonl");
    let ops = ["rms_norm", "silu_and_mul", "l2_norm"];
    let joined = ops.join(",");
    let (file_arg, ws_arg, session_arg) = (
        file.display().to_string(),
        ws.display().to_string(),
        session.display().to_string(),
    );
    let args = [
        "agent",
        &joined,
        "--backend",
        "tuner",
        "--max-iters",
        "1",
        "--hardware",
        "H200",
        "--json",
        "--seed",
        "7",
        "--workers",
        &file_arg,
        "--session",
        &session_arg,
        "--workspace",
        &ws_arg,
    ];
    let run = Run::start(&s, &dir, "agent", &args, 100);
    let t0 = run.t0;
    let d = run.json(Duration::from_secs(300));
    let names: Vec<&str> = d["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["operator"].as_str().unwrap())
        .collect();
    assert_eq!(names, ops, "{d}");
    assert_eq!(
        d["workers"],
        serde_json::json!(["slurm:0#1", "slurm:0#2", "slurm:0#3"]),
        "{d}"
    );

    let text = std::fs::read_to_string(&session).unwrap();
    let recs: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kind = |r: &serde_json::Value| r["kind"].as_str().unwrap_or("").to_string();
    assert_eq!(recs.iter().filter(|r| kind(r) == "run_start").count(), 1);
    let seqs: Vec<u64> = recs.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    // All three measuring at once: each operator's first measurement starts before any
    // measurement is done.
    let first_done = recs
        .iter()
        .position(|r| kind(r) == "measure_done")
        .expect("a measurement done");
    for op in ops {
        let started = recs
            .iter()
            .position(|r| kind(r) == "measure_start" && r["op"] == op)
            .unwrap_or_else(|| panic!("{op}: {text}"));
        assert!(
            started < first_done,
            "{op} started after a measurement was done"
        );
        assert!(
            recs.iter()
                .any(|r| kind(r) == "measure_done" && r["op"] == op),
            "{op}"
        );
        assert!(
            recs.iter()
                .any(|r| kind(r) == "agent_state" && r["op"] == op && r["state"] == "stopped"),
            "{op}"
        );
    }
    // Interleaved: the operator changes from one record to the next more often than three
    // operators recorded one after the other would.
    let by_op: Vec<&str> = recs.iter().filter_map(|r| r["op"].as_str()).collect();
    let switches = by_op.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(switches > 2, "{by_op:?}");
    // The shapes were measured on the Slurm workers.
    let mut on = std::collections::BTreeSet::new();
    for r in recs.iter().filter(|r| kind(r) == "shape_result") {
        on.insert(r["result"]["worker"].as_str().unwrap_or("").to_string());
    }
    assert!(
        on.iter().all(|w| w.starts_with("slurm:0#")) && on.len() >= 2,
        "{on:?}"
    );
    say(&format!(
        "srun: three agents at once in {:.1} s (wall_s {:.1}), {} records, shapes on {on:?}",
        t0.elapsed().as_secs_f64(),
        d["wall_s"].as_f64().unwrap_or(0.0),
        recs.len()
    ));
    nothing_left(&s);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
