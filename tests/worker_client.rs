//! The worker client's supervision, against the protocol simulator (`worker --simulate`) and the
//! real worker on a machine without a GPU.

mod common;

use atrex_tui::contract::compare::Tol;
use atrex_tui::contract::protocol::*;
use atrex_tui::contract::runner::JobEvent;
use atrex_tui::pool::client::{WorkerClient, WorkerConfig};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn job(name: &str) -> Job {
    Job {
        operator: "rms_norm".into(),
        kind: JobKind::All,
        mode: Mode::Quick,
        candidate: Source {
            name: name.into(),
            code: String::new(),
            defines: Default::default(),
        },
        reference: None,
        shapes: vec![],
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

fn simulated(watchdog_ms: u64) -> WorkerClient {
    let mut cfg = WorkerConfig::new(0);
    cfg.exe = common::exe();
    cfg.extra_args = vec!["--simulate".into()];
    cfg.watchdog = Duration::from_millis(watchdog_ms);
    WorkerClient::spawn(cfg)
}

async fn last(rx: &mut tokio::sync::mpsc::UnboundedReceiver<JobEvent>) -> JobEvent {
    let mut last = None;
    while let Some(e) = tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("job never ended")
    {
        let end = matches!(
            e,
            JobEvent::WorkerLost { .. } | JobEvent::Worker(Event::Done { .. })
        );
        last = Some(e);
        if end {
            break;
        }
    }
    last.expect("no events")
}

#[tokio::test]
async fn a_worker_killed_mid_job_is_reported_and_restarted() {
    let c = simulated(5000);
    let (_, mut rx) = c.submit(job("v1 crash"));
    let t0 = Instant::now();
    match last(&mut rx).await {
        JobEvent::WorkerLost { verdict, message } => {
            assert_eq!(verdict, Verdict::Fault);
            assert!(
                message.contains("signal") || message.contains("exited"),
                "{message}"
            );
        }
        other => panic!("expected WorkerLost, got {other:?}"),
    }
    // The next job runs on a restarted worker, within 2 s of the crash.
    let (_, mut rx) = c.submit(job("v2 fine"));
    match last(&mut rx).await {
        JobEvent::Worker(Event::Done { message, .. }) => {
            assert!(message.unwrap().contains("simulated"))
        }
        other => panic!("expected Done, got {other:?}"),
    }
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "restart took {:?}",
        t0.elapsed()
    );
    assert_eq!(c.restarts.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_hanging_job_hits_the_watchdog_and_the_next_job_succeeds() {
    let c = simulated(400);
    let (_, mut rx) = c.submit(job("v1 hang"));
    match last(&mut rx).await {
        JobEvent::WorkerLost { verdict, message } => {
            assert_eq!(verdict, Verdict::Timeout);
            assert!(message.contains("no progress"), "{message}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    let (_, mut rx) = c.submit(job("v2 fine"));
    assert!(matches!(
        last(&mut rx).await,
        JobEvent::Worker(Event::Done { .. })
    ));
}

/// A suspended TUI (Ctrl-Z) reads nothing from its workers while its clock runs on: a watchdog
/// that expires across a suspension waits again instead of killing a healthy job; without one,
/// the watchdog still fires.
#[tokio::test]
async fn a_suspension_does_not_count_against_the_watchdog() {
    let c = simulated(400);
    let (_, mut rx) = c.submit(job("v1 hang"));
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(1600) {
        atrex_tui::pool::client::note_suspend();
        tokio::time::sleep(Duration::from_millis(150)).await;
        while let Ok(e) = rx.try_recv() {
            assert!(
                !matches!(
                    e,
                    JobEvent::WorkerLost { .. } | JobEvent::Worker(Event::Done { .. })
                ),
                "the job ended across suspensions after {:?}: {e:?}",
                t0.elapsed()
            );
        }
    }
    match last(&mut rx).await {
        JobEvent::WorkerLost { verdict, .. } => assert_eq!(verdict, Verdict::Timeout),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(t0.elapsed() >= Duration::from_millis(1600));
}

#[tokio::test]
async fn queued_jobs_can_be_cancelled_before_they_start() {
    let c = simulated(1000);
    let (_, mut rx1) = c.submit(job("v1 hang"));
    let (id2, mut rx2) = c.submit(job("v2 fine"));
    c.cancel(id2);
    match last(&mut rx2).await {
        JobEvent::WorkerLost { verdict, .. } => assert_eq!(verdict, Verdict::Cancelled),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        last(&mut rx1).await,
        JobEvent::WorkerLost {
            verdict: Verdict::Timeout,
            ..
        }
    ));
}

#[tokio::test]
async fn a_missing_worker_binary_is_an_error_not_a_panic() {
    let mut cfg = WorkerConfig::new(0);
    cfg.exe = PathBuf::from("/nonexistent/atrex-tui");
    let c = WorkerClient::spawn(cfg);
    let (_, mut rx) = c.submit(job("v1"));
    match last(&mut rx).await {
        JobEvent::WorkerLost { message, .. } => {
            assert!(message.contains("cannot start the worker"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert!(c.hello().await.is_err());
}

fn has_gpu() -> bool {
    let out = Command::new(common::exe())
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    d["gpu"].get("error").is_none()
}

#[test]
fn bench_without_a_gpu_exits_2_with_one_clear_line() {
    if has_gpu() {
        eprintln!("SKIPPED: this machine has a GPU");
        return;
    }
    let out = Command::new(common::exe())
        .args(["bench", "rms_norm", "--quick"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(e.contains("no GPU") && !e.contains("panicked"), "{e}");
}

#[test]
fn bench_all_without_a_gpu_exits_2_and_records_nothing() {
    if has_gpu() {
        eprintln!("SKIPPED: this machine has a GPU");
        return;
    }
    let ws = std::env::temp_dir().join(format!("atrex-benchall-{}", std::process::id()));
    std::fs::create_dir_all(&ws).unwrap();
    let out = Command::new(common::exe())
        .args(["bench", "--all", "--full", "--record", "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(e.contains("no GPU") && !e.contains("panicked"), "{e}");
    assert!(!ws.join("standing").exists(), "nothing is recorded");
    // --record goes with --all, and keeps full measurements only.
    let out = Command::new(common::exe())
        .args(["bench", "--all", "--quick", "--record", "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("drop --quick"));
    let out = Command::new(common::exe())
        .args(["bench", "rms_norm", "--record"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--record goes with --all"));
    std::fs::remove_dir_all(&ws).ok();
}

#[test]
fn the_real_worker_answers_without_a_gpu() {
    if has_gpu() {
        eprintln!("SKIPPED: this machine has a GPU");
        return;
    }
    use std::io::{BufRead, BufReader, Write};
    let mut child = Command::new(common::exe())
        .args(["worker"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "not json").unwrap();
    writeln!(stdin, r#"{{"type":"hello","id":5}}"#).unwrap();
    let mut j = serde_json::to_value(Request::Job {
        id: 6,
        job: Box::new(job("x")),
    })
    .unwrap();
    j["job"]["operator"] = "rms_norm".into();
    writeln!(stdin, "{j}").unwrap();
    drop(stdin);
    let lines: Vec<String> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .collect();
    assert!(child.wait().unwrap().success());
    let evs: Vec<Event> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        matches!(&evs[0], Event::Error { id: 0, message } if message.contains("malformed")),
        "{lines:?}"
    );
    assert!(
        matches!(&evs[1], Event::Error { id: 5, message } if message.contains("libcuda")),
        "{lines:?}"
    );
    assert!(
        matches!(&evs[2], Event::Done { id: 6, verdict: Verdict::Error, message: Some(m) } if m.contains("no GPU")),
        "{lines:?}"
    );
}

fn job_with_shapes(name: &str, shapes: &[u32]) -> Job {
    let mut j = job(name);
    j.shapes = shapes
        .iter()
        .map(|id| ShapeJob {
            id: *id,
            env: Default::default(),
            inputs: vec![],
            outputs: vec![],
            sol_s: 0.0,
        })
        .collect();
    j
}

async fn all(rx: &mut tokio::sync::mpsc::UnboundedReceiver<JobEvent>) -> Vec<JobEvent> {
    let mut v = Vec::new();
    while let Some(e) = tokio::time::timeout(Duration::from_secs(20), rx.recv())
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

/// What a kernel prints to fd 1 (here the simulated worker prints a forged `shape_done` line
/// and an escape sequence, as a kernel's printf would) never reaches the protocol: the shapes
/// keep their real results, once each, and the text arrives as `output`, escapes made visible.
#[tokio::test]
async fn printed_lines_cannot_forge_events_and_arrive_as_output() {
    let c = simulated(5000);
    let (_, mut rx) = c.submit(job_with_shapes("v1 print", &[1, 2]));
    let evs = all(&mut rx).await;
    let r = results(&evs);
    assert_eq!(r.len(), 2, "{evs:?}");
    assert!(
        r.iter()
            .all(|r| r.verdict == Verdict::Unchecked && r.s.is_none())
    );
    let out: Vec<(Option<u32>, String)> = evs
        .iter()
        .filter_map(|e| match e {
            JobEvent::Worker(Event::Output { shape, text, .. }) => Some((*shape, text.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(out.len(), 2, "{evs:?}");
    assert_eq!(out[0].0, Some(1));
    assert!(out[0].1.contains(r#""type":"shape_done""#), "{}", out[0].1);
    assert!(
        out[0].1.contains("debug: row 0 sum = 1.5\u{241b}[2J"),
        "{}",
        out[0].1
    );
    assert!(!out[0].1.contains('\x1b'));
    assert!(matches!(
        evs.last(),
        Some(JobEvent::Worker(Event::Done {
            verdict: Verdict::Pass,
            ..
        }))
    ));
}

#[tokio::test]
async fn a_second_result_for_a_shape_ends_the_job_as_a_protocol_error() {
    for (name, needle) in [
        ("v1 duplicate", "second result for shape 1"),
        ("v1 foreign", "shape 999, which is not in job"),
    ] {
        let c = simulated(5000);
        let (_, mut rx) = c.submit(job_with_shapes(name, &[1, 2]));
        let evs = all(&mut rx).await;
        assert!(results(&evs).len() <= 1, "{evs:?}");
        match evs.last() {
            Some(JobEvent::WorkerLost { verdict, message }) => {
                assert_eq!(*verdict, Verdict::Error);
                assert!(
                    message.contains("protocol error") && message.contains(needle),
                    "{message}"
                );
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(c.restarts.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}

/// A worker that dies on one shape costs that shape only: it is recorded as a fault with the
/// worker's last words and log, and the remaining shapes run on a restarted worker.
#[tokio::test]
async fn a_worker_lost_on_one_shape_costs_only_that_shape() {
    let log = std::env::temp_dir().join(format!("atrex-worker-log-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let mut cfg = WorkerConfig::new(0);
    cfg.exe = common::exe();
    cfg.extra_args = vec!["--simulate".into()];
    cfg.log = Some(log.clone());
    let c = WorkerClient::spawn(cfg);
    let (_, mut rx) = c.submit(job_with_shapes("v1 crash-shape-2", &[1, 2, 3]));
    let evs = all(&mut rx).await;
    let r = results(&evs);
    let ids: Vec<(u32, Verdict)> = r.iter().map(|r| (r.shape, r.verdict.clone())).collect();
    assert_eq!(
        ids,
        vec![
            (1, Verdict::Unchecked),
            (2, Verdict::Fault),
            (3, Verdict::Unchecked)
        ]
    );
    let m = r[1].message.clone().unwrap();
    assert!(m.contains("signal"), "{m}");
    assert!(m.contains("aborting on shape 2"), "{m}");
    assert!(m.contains(&log.display().to_string()), "{m}");
    match evs.last() {
        Some(JobEvent::Worker(Event::Done {
            verdict, message, ..
        })) => {
            assert_eq!(*verdict, Verdict::Fault);
            assert!(message.as_deref().unwrap().starts_with("shape 2:"));
        }
        other => panic!("{other:?}"),
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("simulated worker: aborting on shape 2"),
        "{text}"
    );
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn a_kernel_that_kills_the_worker_on_every_shape_stops_after_three() {
    let c = simulated(5000);
    let t0 = Instant::now();
    let (_, mut rx) = c.submit(job_with_shapes("v1 crash-shape-all", &[1, 2, 3, 4, 5, 6]));
    let evs = all(&mut rx).await;
    assert_eq!(results(&evs).len(), 3, "{evs:?}");
    match evs.last() {
        Some(JobEvent::WorkerLost { verdict, message }) => {
            assert_eq!(*verdict, Verdict::Fault);
            assert!(message.contains("3 shapes in a row"), "{message}");
            assert!(message.contains("3 shapes not run"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}
