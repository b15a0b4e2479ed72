//! Commands on a pool of workers from a workers file (docs/cluster.md), without a GPU: simulated
//! workers started through `sh -c` and a stand-in `ssh` first on PATH.

mod common;

use common::standins::{self, Drop};
use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(common::exe())
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A workers file entry for a simulated worker on `host`, reached through `sh -c`.
fn sim_entry(host: &str) -> String {
    sim_with(&format!("ATREX_SIM_HOST={host}"))
}

/// A workers file entry for a simulated worker started with the environment `env`.
fn sim_with(env: &str) -> String {
    format!(
        "[[workers]]\ncommand = \"sh -c '{env} exec {{exe}} worker --simulate=shapes --device {{device}}'\"\n"
    )
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn doctor_lists_every_configured_worker() {
    let dir = standins::scratch("doctor-workers");
    let old = standins::foreign_worker(&dir, "old-box", 2, None);
    let file = write(
        &dir,
        "workers.toml",
        &format!(
            "{}{}devices = [1]\ngroup = \"sim\"\n\n[[workers]]\ncommand = \"no-such-launcher-x7 atrex-tui worker --device {{device}}\"\n\n[[workers]]\ncommand = \"{old}\"\nlabel = \"old-box\"\n",
            sim_entry("box-a"),
            sim_entry("box-b"),
        ),
    );
    let out = bin()
        .args(["doctor", "--json", "--workers"])
        .arg(&file)
        .output()
        .unwrap();
    // Two configured workers did not answer: wrong, so exit 1, each named.
    assert_eq!(out.status.code(), Some(1));
    let d = json(&out);
    assert_eq!(d["ok"], false, "{d}");
    let problems = d["problems"].to_string();
    assert!(
        problems.contains("did not answer: cannot start the worker `no-such-launcher-x7")
            && problems.contains("worker old-box did not answer"),
        "{problems}"
    );
    let list = d["workers"]["list"].as_array().unwrap();
    assert_eq!(list.len(), 4, "{d}");
    let a = &list[0];
    assert_eq!(a["name"], "box-a:0");
    assert_eq!(a["answered_hello"], true);
    assert_eq!(a["host"], "box-a");
    assert_eq!(a["device"], 0);
    assert_eq!(a["gpu"], "Simulated GPU");
    assert_eq!(a["protocol"], 3);
    assert_eq!(a["tool_version"], env!("CARGO_PKG_VERSION"));
    assert!(a["command"].as_str().unwrap().starts_with("sh -c "), "{a}");
    // How long its start took, from launch to hello.
    let took = a["start_s"].as_f64().unwrap();
    assert!(took > 0.0 && took < 30.0, "{a}");
    assert!(list[2]["start_s"].is_null(), "never answered: {}", list[2]);
    assert_eq!(list[1]["name"], "box-b:1");
    assert_eq!(list[1]["group"], "sim");
    assert_eq!(list[2]["answered_hello"], false);
    assert!(
        list[2]["error"]
            .as_str()
            .unwrap()
            .contains("cannot start the worker `no-such-launcher-x7 atrex-tui worker --device 0`"),
        "{}",
        list[2]
    );
    assert_eq!(list[3]["answered_hello"], false);
    assert!(
        list[3]["error"]
            .as_str()
            .unwrap()
            .contains("worker old-box runs atrex-tui unknown (protocol 2)"),
        "{}",
        list[3]
    );
    // The text form: one line per worker and its command.
    let out = bin()
        .args(["doctor", "--workers"])
        .arg(&file)
        .output()
        .unwrap();
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(o.contains("workers:    4 from"), "{o}");
    assert!(o.contains("(2 up)"), "{o}");
    assert!(
        o.contains("  box-a:0: answered hello in ")
            && o.contains(" s · host box-a · GPU 0 Simulated GPU"),
        "{o}"
    );
    assert!(
        o.contains("  old-box: no answer: worker old-box runs atrex-tui unknown"),
        "{o}"
    );
    assert!(
        o.contains("      command: no-such-launcher-x7 atrex-tui worker --device 0"),
        "{o}"
    );
    assert!(o.contains("result:     2 problems (exit status 1)"), "{o}");
    // A workers file with a mistake is shown as a problem, and doctor exits 1.
    let bad = write(
        &dir,
        "bad.toml",
        "[[workers]]\ncommand = \"ssh box --device {dev}\"\n",
    );
    let out = bin()
        .args(["doctor", "--workers"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(
        o.contains("bad.toml:2: [[workers]]: command: unknown placeholder `{dev}`"),
        "{o}"
    );
}

/// Workers that cannot start are not "no GPU": bench, measure and agent say which worker failed
/// and why, and exit 1 (exit 2 is this machine without a GPU).
#[test]
fn a_pool_whose_workers_all_fail_says_so_and_exits_1() {
    let dir = standins::scratch("workers-fail");
    let file = write(
        &dir,
        "w.toml",
        "[[workers]]\ncommand = \"no-such-launcher-q9 atrex-tui worker --device {device}\"\nlabel = \"far-box\"\n",
    );
    let kernel = Path::new(env!("CARGO_MANIFEST_DIR")).join("problems/rms_norm/baseline.cu");
    let session = dir.join("s.jsonl");
    for args in [
        vec!["bench".into(), "rms_norm".into(), "--quick".into()],
        vec![
            "measure".into(),
            "rms_norm".into(),
            "--kernel".into(),
            kernel.display().to_string(),
            "--session".into(),
            session.display().to_string(),
        ],
        vec![
            "agent".into(),
            "rms_norm".into(),
            "--backend".into(),
            "tuner".into(),
            "--max-iters".into(),
            "1".into(),
            "--session".into(),
            session.display().to_string(),
        ],
    ] {
        let out = bin()
            .arg("--workspace")
            .arg(&dir)
            .args(&args)
            .arg("--workers")
            .arg(&file)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {e}");
        assert!(!e.contains("no GPU"), "{args:?}: {e}");
        assert!(!session.exists(), "{args:?}: nothing recorded");
        assert!(
            e.contains(&format!("no worker of {} started", file.display()))
                && e.contains("far-box: cannot start the worker far-box (`no-such-launcher-q9 atrex-tui worker --device 0`): No such file or directory"),
            "{args:?}: {e}"
        );
    }
}

/// `bench --all` through two templated workers: every shape of every operator measured once,
/// spread over both, each naming its worker.
#[test]
fn bench_all_spreads_over_a_workers_file() {
    let dir = standins::scratch("benchall-workers");
    let file = write(
        &dir,
        "workers.toml",
        &format!(
            "{}{}devices = [1]\n",
            sim_entry("box-a"),
            sim_entry("box-b")
        ),
    );
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let out = bin()
        .args(["bench", "--all", "--quick", "--json", "--hardware", "H200"])
        .arg("--workers")
        .arg(&file)
        .arg("--workspace")
        .arg(&ws)
        .output()
        .unwrap();
    // Simulated workers measure nothing: every shape is unchecked, so the exit code says so.
    assert_eq!(out.status.code(), Some(1));
    let d = json(&out);
    assert_eq!(d["workers"], serde_json::json!(["box-a:0", "box-b:1"]));
    let mut shapes = 0;
    let mut on = std::collections::BTreeMap::<String, usize>::new();
    for op in d["operators"].as_array().unwrap() {
        let list = op["shapes"].as_array().unwrap();
        assert_eq!(
            list.len() as u64,
            op["num_shapes"].as_u64().unwrap(),
            "{}",
            op["operator"]
        );
        for s in list {
            assert_eq!(s["verdict"], "unchecked");
            *on.entry(s["worker"].as_str().unwrap().to_string())
                .or_default() += 1;
            shapes += 1;
        }
    }
    assert_eq!(shapes, 440);
    assert_eq!(on.len(), 2, "both workers measured: {on:?}");
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("over 2 workers, the largest T_SOL first"), "{e}");
}

/// `bench` through a stand-in ssh (first on PATH) whose first connection to box-a drops
/// mid-shape: the shape is requeued and every shape still has its result.
#[test]
fn bench_survives_a_dropped_ssh_connection() {
    let dir = standins::scratch("bench-ssh");
    standins::ssh(&dir, &["box-a"], Drop::First(3));
    let file = write(
        &dir,
        "workers.toml",
        "[[workers]]\ncommand = \"ssh -T box-a {exe} worker --simulate=shapes --device {device}\"\n\n[[workers]]\ncommand = \"ssh -T box-b {exe} worker --simulate=shapes --device {device}\"\n",
    );
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = bin()
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
        .env("PATH", path)
        .output()
        .unwrap();
    let d = json(&out);
    let shapes = d["shapes"].as_array().unwrap();
    assert_eq!(shapes.len(), 56, "{d}");
    assert_eq!(d["shapes_asked"].as_array().unwrap().len(), 56, "{d}");
    assert!(shapes.iter().all(|s| s["verdict"] == "unchecked"), "{d}");
    assert_eq!(standins::drops(&dir), 1);
    assert_eq!(d["pool"]["requeued"], 1, "{}", d["pool"]);
    assert_eq!(d["pool"]["workers"][0]["restarts"], 1, "{}", d["pool"]);
}

#[test]
fn workers_flag_mistakes_are_clear() {
    let dir = standins::scratch("workers-mistakes");
    let file = write(
        &dir,
        "w.toml",
        "[[workers]]\ncommand = \"x\"\ndevices = []\n",
    );
    let out = bin()
        .args(["bench", "rms_norm", "--workers"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("w.toml:3: [[workers]]: devices: the list is empty"),
        "{e}"
    );
    let out = bin()
        .args(["bench", "rms_norm", "--device", "0", "--workers"])
        .arg(&file)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("--device picks a GPU of this machine and --workers a pool"),
        "{e}"
    );
    let out = bin()
        .args(["bench", "rms_norm", "--workers", "/nonexistent/w.toml"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("/nonexistent/w.toml"), "{e}");
}

/// `agent OP1,OP2` runs one agent per operator at once on the pool, both recording into one
/// session: one run start, each agent's own state events, every number used once.
#[test]
fn two_agents_run_at_once_into_one_session() {
    let dir = standins::scratch("agents-parallel");
    let file = write(
        &dir,
        "workers.toml",
        &format!(
            "{}{}devices = [1]\n",
            sim_entry("box-a"),
            sim_entry("box-b")
        ),
    );
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let session = dir.join("s.jsonl");
    let out = bin()
        .args(["agent", "rms_norm,silu_and_mul", "--backend", "tuner"])
        .args([
            "--max-iters",
            "1",
            "--hardware",
            "H200",
            "--json",
            "--seed",
            "7",
        ])
        .arg("--workers")
        .arg(&file)
        .arg("--session")
        .arg(&session)
        .arg("--workspace")
        .arg(&ws)
        .env("ATREX_TUI_CONFIG_DIR", dir.join("config"))
        .output()
        .unwrap();
    let d = json(&out);
    let agents = d["agents"].as_array().expect("one document per agent");
    let ops: Vec<&str> = agents
        .iter()
        .map(|a| a["operator"].as_str().unwrap())
        .collect();
    assert_eq!(ops, vec!["rms_norm", "silu_and_mul"]);
    assert_eq!(d["workers"], serde_json::json!(["box-a:0", "box-b:1"]));
    let text = std::fs::read_to_string(&session).unwrap();
    let recs: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kind = |r: &serde_json::Value| r["kind"].as_str().unwrap_or("").to_string();
    assert_eq!(recs.iter().filter(|r| kind(r) == "run_start").count(), 1);
    for op in ["rms_norm", "silu_and_mul"] {
        assert!(
            recs.iter()
                .any(|r| kind(r) == "agent_state" && r["op"] == op),
            "{op}: {text}"
        );
        assert!(
            recs.iter()
                .any(|r| kind(r) == "measure_start" && r["op"] == op),
            "{op}"
        );
    }
    let seqs: Vec<u64> = recs.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let mut mids: Vec<u64> = recs
        .iter()
        .filter(|r| kind(r) == "measure_start")
        .map(|r| r["mid"].as_u64().unwrap())
        .collect();
    let n = mids.len();
    mids.sort();
    mids.dedup();
    assert_eq!(mids.len(), n, "every measurement its own number");
}

/// `bench OP` reads the run against the standing's incumbent on the same GPU model: on a
/// (simulated) H200 the shipped record of rms_norm stands and is named with its S_op over the
/// run's shapes, in `--json` and under the table; on another GPU model it is stale and not
/// compared.
#[test]
fn bench_reads_a_run_against_the_incumbent() {
    let dir = standins::scratch("bench-against");
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let on = |gpu: &str, json_out: bool| {
        let file = write(
            &dir,
            "workers.toml",
            &sim_with(&format!("ATREX_SIM_GPU=\\\"{gpu}\\\"")),
        );
        let mut c = bin();
        c.args(["bench", "rms_norm", "--quick", "--hardware", "H200"]);
        c.args(["--shape", "0", "--shape", "55"]);
        if json_out {
            c.arg("--json");
        }
        c.arg("--workers").arg(&file).arg("--workspace").arg(&ws);
        c.output().unwrap()
    };
    let d = json(&on("NVIDIA H200", true));
    let inc = &d["incumbent"];
    assert_eq!(
        inc["kernel"], "knowledge/templates/rms_norm_warp_per_row.cu",
        "{d}"
    );
    assert_eq!(
        (inc["layer"].as_str(), inc["mode"].as_str()),
        (Some("shipped"), Some("full"))
    );
    // The incumbent's median over shapes 0 and 55 (the mean of the two), not over all 56.
    let s = inc["s_op"].as_f64().unwrap();
    assert!(s > 0.0 && (s - 0.246).abs() > 1e-3, "{inc}");
    let out = on("NVIDIA H200", false);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(" vs inc "), "{text}");
    assert!(
        text.contains("against the incumbent (shipped: knowledge/templates/rms_norm_warp_per_row.cu, full, 2026-12-03): S_op"),
        "{text}"
    );
    assert!(text.contains("on these 2 shapes"), "{text}");
    let d = json(&on("Simulated GPU", true));
    assert!(d["incumbent"].is_null(), "{d}");
    let text = String::from_utf8_lossy(&on("Simulated GPU", false).stdout).to_string();
    assert!(
        !text.contains("against the incumbent") && !text.contains(" vs inc "),
        "{text}"
    );
}

/// `measure` without `--decide` leaves the revision pending and says how to decide it.
#[test]
fn measure_says_how_to_decide_a_pending_revision() {
    let dir = standins::scratch("measure-pending");
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let file = write(&dir, "workers.toml", &sim_entry("box-a"));
    let kernel = write(
        &dir,
        "k.cu",
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("problems/rms_norm/baseline.cu"),
        )
        .unwrap(),
    );
    // One quick measure into the same session (each call appends a revision).
    let measure = |extra: &[&str]| {
        bin()
            .args(["measure", "rms_norm", "--quick"])
            .args(extra)
            .arg("--kernel")
            .arg(&kernel)
            .arg("--session")
            .arg(ws.join("s.jsonl"))
            .arg("--workers")
            .arg(&file)
            .arg("--workspace")
            .arg(&ws)
            .output()
            .unwrap()
    };
    let out = measure(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("decision: pending (--decide auto|accept|reject decides at once"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // With --json the result is also a bench document: the machine, the mode and each
    // shape's result (docs/measurements takes either).
    let out = measure(&["--json"]);
    let d: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(d["operator"], "rms_norm");
    assert_eq!(d["rev"], 2, "{d}");
    assert_eq!(d["mode"], "quick");
    assert!(d["kernel"].as_str().unwrap().ends_with("k.cu"), "{d}");
    assert!(d["gpu"]["name"].as_str().is_some(), "{d}");
    assert!(d["driver"].as_str().is_some(), "{d}");
    let shapes = d["shapes"].as_array().unwrap();
    // Every shape of the operator, in order, each naming the worker that measured it.
    assert_eq!(shapes.len(), 56, "{d}");
    for (i, r) in shapes.iter().enumerate() {
        assert_eq!(r["shape"], i, "{r}");
        assert_eq!(r["worker"], "box-a:0", "{r}");
    }
}

/// `bench --all --record` keeps a profile's standing for its own GPU model: on workers whose
/// GPU is another (here a simulated one) with `--hardware H200` it refuses before measuring,
/// and writes nothing.
#[test]
fn bench_all_record_refuses_a_gpu_that_is_not_the_profiles() {
    let dir = standins::scratch("benchall-record-gpu");
    let file = write(&dir, "workers.toml", &sim_entry("box-a"));
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let out = bin()
        .args(["bench", "--all", "--full", "--record", "--hardware", "H200"])
        .arg("--workers")
        .arg(&file)
        .arg("--workspace")
        .arg(&ws)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains("--record: this GPU is `Simulated GPU`, not the GPU of hardware profile H200"),
        "{e}"
    );
    assert!(!ws.join("standing").exists(), "nothing is recorded");
}

/// `bench OP --sweep` runs one job per combination on the pool and prints them side by side:
/// each combination's own kernel (its defines in its name and source), the best per shape; a
/// mistake in a sweep is refused before any worker starts (no workers file needed).
#[test]
fn bench_sweeps_a_tunable_parameter() {
    let dir = standins::scratch("bench-sweep");
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let file = write(&dir, "workers.toml", &sim_entry("box-a"));
    let kernel =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("knowledge/templates/rms_norm_regcache.cu");
    let sweep = |extra: &[&str], json_out: bool| {
        let mut c = bin();
        c.args([
            "bench",
            "rms_norm",
            "--quick",
            "--hardware",
            "H200",
            "--kernel",
        ]);
        c.arg(&kernel);
        c.args(["--shape", "0", "--shape", "3", "--define", "MAXV=8"]);
        c.args(extra);
        if json_out {
            c.arg("--json");
        }
        c.arg("--workers").arg(&file).arg("--workspace").arg(&ws);
        c.output().unwrap()
    };
    let out = sweep(&["--sweep", "THREADS=256,128"], true);
    // Simulated workers check nothing: every shape is unchecked, so the command exits 1.
    assert_eq!(out.status.code(), Some(1));
    let d = json(&out);
    assert_eq!(d["operator"], "rms_norm");
    assert_eq!(d["axes"][0]["name"], "THREADS");
    assert_eq!(
        d["combinations"],
        serde_json::json!([{"THREADS": "256"}, {"THREADS": "128"}])
    );
    let runs = d["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for (run, threads) in runs.iter().zip(["256", "128"]) {
        let name = run["kernel"].as_str().unwrap();
        assert!(
            name.contains(&format!("THREADS={threads}")) && name.contains("MAXV=8"),
            "{name}"
        );
        assert_eq!(run["shapes_asked"], serde_json::json!([0, 3]));
        assert_eq!(run["shapes"].as_array().unwrap().len(), 2, "{run}");
    }
    assert_ne!(runs[0]["source_sha256"], runs[1]["source_sha256"]);
    let best = &d["best_per_shape"];
    assert_eq!(best["s_op"], 0.0);
    assert!(best["shapes"][0]["combination"].is_null(), "{best}");
    let out = sweep(&["--sweep", "THREADS=256,128"], false);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sweep of THREADS (2 combinations)"), "{text}");
    assert!(text.contains("✗ 256 shape 0: unchecked"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("[2/2]"), "{err}");
    // Refused before the pool starts: no worker's command runs.
    let marker = dir.join("started");
    let tripwire = write(
        &dir,
        "tripwire.toml",
        &format!(
            "[[workers]]\ncommand = \"sh -c 'touch {}; exit 3'\"\n",
            marker.display()
        ),
    );
    let mut c = bin();
    c.args(["bench", "rms_norm", "--kernel"]).arg(&kernel);
    c.args(["--sweep", "THREADS=256,128", "--sweep", "NOPE=1,2"]);
    c.arg("--workers").arg(&tripwire);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`NOPE` is not a tunable parameter"), "{err}");
    assert!(!marker.exists(), "a worker started: {err}");
}
