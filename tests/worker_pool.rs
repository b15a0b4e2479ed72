//! The worker pool (docs/cluster.md) without a GPU: workers started by launch templates through
//! `sh -c` and a stand-in `ssh` (tests/common/standins.rs) that can drop the connection mid-job,
//! simulated workers (`worker --simulate=shapes`), and foreign workers for the version check.

mod common;

use atrex_tui::contract::compare::Tol;
use atrex_tui::contract::protocol::*;
use atrex_tui::contract::runner::{JobEvent, Runner};
use atrex_tui::pool::client::{WorkerClient, WorkerConfig};
use atrex_tui::pool::config::WorkerSpec;
use atrex_tui::pool::launch_command::LaunchTemplate;
use atrex_tui::pool::{Pool, PoolOptions, SeatState, WorkerError};
use common::standins::{self, Drop};
use std::path::Path;
use std::time::Duration;

fn job(shapes: &[(u32, f64)]) -> Job {
    Job {
        operator: "rms_norm".into(),
        kind: JobKind::All,
        mode: Mode::Quick,
        candidate: Source {
            name: "v1".into(),
            code: String::new(),
            defines: Default::default(),
        },
        reference: None,
        shapes: shapes
            .iter()
            .map(|(id, sol_s)| ShapeJob {
                id: *id,
                env: Default::default(),
                inputs: vec![],
                outputs: vec![],
                sol_s: *sol_s,
            })
            .collect(),
        tolerance: Tol {
            atol: 0.0,
            rtol: 0.0,
            rel_l2: 0.0,
        },
        seeds: vec![1],
        generator: None,
        arch: None,
        watchdog_s: None,
        sass: false,
        draws: Vec::new(),
    }
}

fn spec(command: &str, device: u32) -> WorkerSpec {
    let mut s = WorkerSpec::local(device);
    s.launch = Some(LaunchTemplate::parse(command).unwrap());
    s
}

fn opts(dir: &Path) -> PoolOptions {
    PoolOptions {
        log: Some(dir.join("workers.log")),
        watchdog: Some(Duration::from_secs(5)),
    }
}

async fn all(rx: &mut tokio::sync::mpsc::UnboundedReceiver<JobEvent>) -> Vec<JobEvent> {
    let mut v = Vec::new();
    while let Some(e) = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("job never ended")
    {
        let end = matches!(
            e,
            JobEvent::WorkerLost { .. } | JobEvent::Worker(Event::Done { .. })
        );
        v.push(e);
        if end {
            break;
        }
    }
    v
}

fn results(evs: &[JobEvent]) -> Vec<ShapeResult> {
    evs.iter()
        .filter_map(|e| match e {
            JobEvent::Worker(Event::ShapeDone { result, .. }) => Some(result.clone()),
            _ => None,
        })
        .collect()
}

fn last(evs: &[JobEvent]) -> (Verdict, String) {
    match evs.last() {
        Some(JobEvent::Worker(Event::Done {
            verdict, message, ..
        })) => (verdict.clone(), message.clone().unwrap_or_default()),
        Some(JobEvent::WorkerLost { verdict, message }) => (verdict.clone(), message.clone()),
        other => panic!("no end: {other:?}"),
    }
}

/// A job cut into one-shape units keeps the kernel-output bound of one job (64 KiB kept, the
/// rest counted as dropped), whichever workers ran its shapes: 4 shapes printing 40 KiB each.
#[tokio::test]
async fn a_jobs_kernel_output_stays_bounded_across_its_shapes() {
    let dir = standins::scratch("pool-flood");
    let pool = Pool::spawn(
        vec![
            spec(&standins::sim_template("box-a", "Simulated GPU"), 0),
            spec(&standins::sim_template("box-b", "Simulated GPU"), 1),
        ],
        opts(&dir),
    );
    assert_eq!(pool.ready().await.up(), 2);
    let mut j = job(&[(0, 1e-3), (1, 2e-3), (2, 3e-3), (3, 4e-3)]);
    j.candidate.name = "v1 flood".into();
    let (_, mut rx) = pool.submit(j);
    let evs = all(&mut rx).await;
    assert_eq!(results(&evs).len(), 4, "{evs:?}");
    let (text, dropped) = evs.iter().fold((String::new(), 0u64), |(k, d), e| match e {
        JobEvent::Worker(Event::Output { text, dropped, .. }) => (k + text, d + dropped),
        _ => (k, d),
    });
    // Said once, at the first event that dropped something; the note is not kernel output.
    assert_eq!(
        text.matches("more bytes not kept").count(),
        1,
        "{}",
        text.len()
    );
    let note = text.find("\n[").unwrap();
    let note_len = text[note..].find(']').unwrap() + 1;
    let kept = text.len() - note_len;
    let limit = atrex_tui::worker::stdio::JOB_OUTPUT_LIMIT;
    assert!(kept <= limit, "{kept} bytes kept");
    assert!(kept >= limit - 4, "{kept} bytes kept");
    assert!(
        dropped >= (4 * 40 * 1024 - limit) as u64,
        "{dropped} dropped"
    );
}

/// Two workers started through `sh -c` as if on two hosts: one job's shapes are spread over
/// both, each result names the worker (host:device) that measured it, and the job ends once.
#[tokio::test]
async fn templated_workers_share_one_queue_and_results_name_them() {
    let dir = standins::scratch("pool-share");
    let pool = Pool::spawn(
        vec![
            spec(&standins::sim_template("box-a", "Simulated GPU"), 0),
            spec(&standins::sim_template("box-b", "Simulated GPU"), 1),
        ],
        opts(&dir),
    );
    let st = pool.ready().await;
    assert_eq!(st.up(), 2, "{st:?}");
    assert_eq!(st.workers[0].name, "box-a:0");
    assert_eq!(st.workers[1].host.as_deref(), Some("box-b"));
    assert_eq!(st.workers[1].tool_version.as_deref(), Some(TOOL_VERSION));
    assert_eq!(st.workers[1].protocol, Some(PROTOCOL_VERSION));
    let shapes: Vec<(u32, f64)> = (0..8).map(|i| (i, 1e-3 * (i + 1) as f64)).collect();
    let (_, mut rx) = pool.submit(job(&shapes));
    let evs = all(&mut rx).await;
    let r = results(&evs);
    assert_eq!(r.len(), 8, "{evs:?}");
    assert!(r.iter().all(|r| r.verdict == Verdict::Unchecked));
    let on: std::collections::BTreeSet<&str> =
        r.iter().filter_map(|r| r.worker.as_deref()).collect();
    assert_eq!(
        on,
        ["box-a:0", "box-b:1"].into_iter().collect(),
        "both workers measured, each result names its worker"
    );
    assert_eq!(last(&evs).0, Verdict::Pass);
    let compiled = evs
        .iter()
        .filter(|e| matches!(e, JobEvent::Worker(Event::Compiled { .. })))
        .count();
    assert!(compiled <= 1, "compile results are said once per job");
}

/// One worker takes the largest T_SOL first, across every job in the queue.
#[tokio::test]
async fn the_queue_runs_the_largest_t_sol_first_across_jobs() {
    let dir = standins::scratch("pool-order");
    let pool = Pool::spawn(
        vec![spec(&standins::sim_template("box-a", "Simulated GPU"), 0)],
        opts(&dir),
    );
    pool.ready().await;
    // Hold the only worker while both jobs are queued, then let it go.
    let lease = pool.lease().await.unwrap();
    let (_, mut a) = pool.submit(job(&[(10, 1e-3), (11, 4e-3)]));
    let (_, mut b) = pool.submit(job(&[(20, 3e-3), (21, 5e-3)]));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(pool.status().queued, 4);
    drop(lease);
    let mut order = Vec::new();
    let (mut a_open, mut b_open) = (true, true);
    while a_open || b_open {
        let (ev, from_a) = tokio::select! {
            Some(e) = a.recv(), if a_open => (e, true),
            Some(e) = b.recv(), if b_open => (e, false),
            else => break,
        };
        match ev {
            JobEvent::Worker(Event::ShapeDone { result, .. }) => order.push(result.shape),
            JobEvent::Worker(Event::Done { .. }) if from_a => a_open = false,
            JobEvent::Worker(Event::Done { .. }) => b_open = false,
            JobEvent::WorkerLost { message, .. } => panic!("{message}"),
            _ => {}
        }
    }
    assert_eq!(order, vec![21, 11, 20, 10]);
}

/// A worker reached through a stand-in `ssh` whose connection drops mid-shape: the shape goes
/// back on the queue once and finishes on the other worker; the lost worker is restarted.
#[tokio::test]
async fn a_dropped_connection_requeues_the_shape_on_another_worker() {
    let dir = standins::scratch("pool-drop");
    standins::ssh(&dir, &["box-a"], Drop::First(2));
    let exe = common::exe();
    let t = |host: &str| {
        format!(
            "sh -c 'PATH={}:$PATH exec ssh -T {host} {} worker --simulate=shapes --device {{device}}'",
            dir.display(),
            exe.display()
        )
    };
    let pool = Pool::spawn(vec![spec(&t("box-a"), 0), spec(&t("box-b"), 1)], opts(&dir));
    assert_eq!(pool.ready().await.up(), 2);
    let (_, mut rx) = pool.submit(job(&[(7, 1e-3)]));
    let evs = all(&mut rx).await;
    let r = results(&evs);
    assert_eq!(r.len(), 1, "{evs:?}");
    assert_eq!(r[0].verdict, Verdict::Unchecked, "{:?}", r[0]);
    assert_eq!(r[0].worker.as_deref(), Some("box-b:1"));
    assert_eq!(last(&evs).0, Verdict::Pass);
    assert_eq!(standins::drops(&dir), 1);
    let st = pool.status();
    assert_eq!(st.requeued, 1);
    assert_eq!(st.workers[0].restarts, 1, "{st:?}");
    // The restarted worker is back in the pool.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(pool.status().workers[0].state, SeatState::Idle);
}

/// A shape lost twice (both connections drop mid-shape) gets its verdict from the second loss,
/// naming both workers; the job ends with it.
#[tokio::test]
async fn a_second_loss_is_the_shapes_verdict() {
    let dir = standins::scratch("pool-twice");
    standins::ssh(&dir, &["box-a", "box-b"], Drop::Every(2));
    let exe = common::exe();
    let t = |host: &str| {
        format!(
            "sh -c 'PATH={}:$PATH exec ssh -T {host} {} worker --simulate=shapes --device 0'",
            dir.display(),
            exe.display()
        )
    };
    let pool = Pool::spawn(vec![spec(&t("box-a"), 0), spec(&t("box-b"), 0)], opts(&dir));
    assert_eq!(pool.ready().await.up(), 2);
    let (_, mut rx) = pool.submit(job(&[(3, 1e-3)]));
    let evs = all(&mut rx).await;
    let r = results(&evs);
    assert_eq!(r.len(), 1, "{evs:?}");
    assert_eq!(r[0].verdict, Verdict::Fault);
    let m = r[0].message.clone().unwrap();
    assert!(m.contains("lost with its worker twice"), "{m}");
    assert!(
        m.contains("on box-a:0") && m.contains("then on box-b:0"),
        "{m}"
    );
    assert!(m.contains("signal 15"), "{m}");
    let (v, m) = last(&evs);
    assert_eq!(v, Verdict::Fault);
    assert!(m.starts_with("shape 3:"), "{m}");
    assert_eq!(standins::drops(&dir), 2);
}

/// A worker whose command does not exist is down (and retried later); the others finish the
/// work.
#[tokio::test]
async fn a_worker_that_cannot_start_is_down_and_the_others_finish() {
    let dir = standins::scratch("pool-down");
    let pool = Pool::spawn(
        vec![
            spec("no-such-launcher-x7 worker --device {device}", 0),
            spec(&standins::sim_template("box-b", "Simulated GPU"), 1),
        ],
        opts(&dir),
    );
    let st = pool.ready().await;
    assert_eq!(st.workers[0].state, SeatState::Down);
    let e = st.workers[0].error.clone().unwrap();
    assert!(
        e.contains("cannot start the worker `no-such-launcher-x7 worker --device 0`"),
        "{e}"
    );
    let (_, mut rx) = pool.submit(job(&[(0, 3e-3), (1, 2e-3), (2, 1e-3)]));
    let evs = all(&mut rx).await;
    let r = results(&evs);
    assert_eq!(r.len(), 3, "{evs:?}");
    assert!(r.iter().all(|r| r.worker.as_deref() == Some("box-b:1")));
    assert_eq!(last(&evs).0, Verdict::Pass);
    // With no worker up at all, a job ends at once, saying why.
    let pool = Pool::spawn(vec![spec("no-such-launcher-x7 worker", 0)], opts(&dir));
    pool.ready().await;
    let (_, mut rx) = pool.submit(job(&[(0, 1e-3)]));
    let (v, m) = last(&all(&mut rx).await);
    assert_eq!(v, Verdict::Error);
    assert!(
        m.contains("no worker is up") && m.contains("no-such-launcher-x7"),
        "{m}"
    );
}

/// A worker of another version is refused before any job, naming the worker and both versions.
#[tokio::test]
async fn a_version_mismatch_is_refused_naming_the_worker_and_both_versions() {
    let dir = standins::scratch("pool-versions");
    let old = standins::foreign_worker(&dir, "old-box", 2, None);
    let newer = standins::foreign_worker(&dir, "new-box", PROTOCOL_VERSION, Some("9.9.9"));
    let mut cfg = WorkerConfig::new(0);
    cfg.launch = Some(LaunchTemplate::parse(&old).unwrap());
    cfg.label = Some("old-box".into());
    let c = WorkerClient::spawn(cfg);
    let e = c.hello().await.unwrap_err();
    assert!(matches!(e, WorkerError::Handshake(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "worker old-box runs atrex-tui unknown (protocol 2); this is atrex-tui {TOOL_VERSION} (protocol {PROTOCOL_VERSION}): install the same atrex-tui version on both sides"
        )
    );
    let (_, mut rx) = c.submit(job(&[(0, 1e-3)]));
    let (v, m) = last(&all(&mut rx).await);
    assert_eq!(v, Verdict::Error);
    assert!(m.contains("protocol 2"), "{m}");
    // Without a label the worker is named by the host its hello gives.
    let pool = Pool::spawn(vec![spec(&newer, 0)], opts(&dir));
    let st = pool.ready().await;
    assert_eq!(st.workers[0].state, SeatState::Down);
    let e = st.workers[0].error.clone().unwrap();
    assert!(
        e.starts_with("worker new-box:0 runs atrex-tui 9.9.9 (protocol 3); this is atrex-tui "),
        "{e}"
    );
}

/// Workers of two GPU models in one group are refused for a measurement (S is per GPU model);
/// grouped by model, each group runs jobs.
#[tokio::test]
async fn mixed_gpu_models_are_refused_unless_grouped() {
    let dir = standins::scratch("pool-models");
    let h200 = standins::sim_template("box-a", "NVIDIA H200");
    let h100 = standins::sim_template("box-b", "NVIDIA H100 80GB HBM3");
    let pool = Pool::spawn(vec![spec(&h200, 0), spec(&h100, 0)], opts(&dir));
    assert_eq!(pool.ready().await.up(), 2);
    let (_, mut rx) = pool.submit(job(&[(0, 1e-3)]));
    let evs = all(&mut rx).await;
    assert!(results(&evs).is_empty());
    let (v, m) = last(&evs);
    assert_eq!(v, Verdict::Error);
    assert!(m.contains("the pool mixes GPU models"), "{m}");
    assert!(
        m.contains("box-a:0 has NVIDIA H200") && m.contains("box-b:0 has NVIDIA H100"),
        "{m}"
    );
    let (mut a, mut b) = (spec(&h200, 0), spec(&h100, 0));
    a.group = "h200".into();
    b.group = "h100".into();
    let pool = Pool::spawn(vec![a, b], opts(&dir));
    pool.ready().await;
    let on_h100 = pool.for_model(Some("NVIDIA H100 80GB HBM3".into()));
    let (_, mut rx) = on_h100.submit(job(&[(0, 1e-3), (1, 2e-3)]));
    let evs = all(&mut rx).await;
    let r = results(&evs);
    assert_eq!(r.len(), 2, "{evs:?}");
    assert!(r.iter().all(|r| r.worker.as_deref() == Some("box-b:0")));
}

/// A lease holds one worker: the jobs run on it go nowhere else, and nothing else runs there.
#[tokio::test]
async fn a_lease_keeps_its_jobs_on_one_worker() {
    let dir = standins::scratch("pool-lease");
    let pool = Pool::spawn(
        vec![
            spec(&standins::sim_template("box-a", "Simulated GPU"), 0),
            spec(&standins::sim_template("box-b", "Simulated GPU"), 1),
        ],
        opts(&dir),
    );
    pool.ready().await;
    let lease = pool.lease().await.unwrap();
    let held = lease.name.clone();
    let other = if held == "box-a:0" {
        "box-b:1"
    } else {
        "box-a:0"
    };
    let (_, mut spread) = pool.submit(job(&[(0, 1e-3), (1, 1e-3), (2, 1e-3), (3, 1e-3)]));
    for _ in 0..3 {
        let (_, mut rx) = lease.submit(job(&[(0, 1e-3), (1, 2e-3)]));
        let r = results(&all(&mut rx).await);
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|r| r.worker.as_deref() == Some(held.as_str())));
    }
    let r = results(&all(&mut spread).await);
    assert_eq!(r.len(), 4);
    assert!(
        r.iter().all(|r| r.worker.as_deref() == Some(other)),
        "nothing else runs on a leased worker: {r:?}"
    );
    drop(lease);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        pool.status()
            .workers
            .iter()
            .all(|w| w.state == SeatState::Idle)
    );
}

/// A worker whose first start fails is down, then started again after the backoff (1 s): once
/// its command works it comes up and takes work.
#[tokio::test]
async fn a_down_worker_is_started_again_after_its_backoff() {
    let dir = standins::scratch("pool-retry");
    let script = dir.join("flaky.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ ! -e '{m}' ]; then : > '{m}'; echo 'node not ready' >&2; exit 1; fi\nATREX_SIM_HOST=box-r exec '{exe}' worker --simulate=shapes --device \"$1\"\n",
            m = dir.join("tried").display(),
            exe = common::exe().display()
        ),
    )
    .unwrap();
    let pool = Pool::spawn(
        vec![spec(&format!("sh {} {{device}}", script.display()), 0)],
        opts(&dir),
    );
    let st = pool.ready().await;
    assert_eq!(st.workers[0].state, SeatState::Down);
    let e = st.workers[0].error.clone().unwrap();
    assert!(
        e.contains("ended before answering hello") && e.contains("node not ready"),
        "{e}"
    );
    let mut rx = pool.watch();
    tokio::time::timeout(
        Duration::from_secs(5),
        rx.wait_for(|s| s.workers[0].state == SeatState::Idle),
    )
    .await
    .expect("started again within the backoff")
    .unwrap();
    let (_, mut jobs) = pool.submit(job(&[(0, 1e-3)]));
    let r = results(&all(&mut jobs).await);
    assert_eq!(r[0].worker.as_deref(), Some("box-r:0"));
}
