//! GPU tests: run on a machine with a CUDA GPU (`cargo test -- --include-ignored`).
//! Results are printed and, where `$OUT` is set, written there as JSON.

mod common;

use atrex_tui::contract::protocol::*;
use atrex_tui::contract::runner::JobEvent;
use atrex_tui::pool::client::{WorkerClient, WorkerConfig};
use atrex_tui::suite::{Suite, SuiteSource};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn save(name: &str, text: &str) {
    if let Ok(out) = std::env::var("OUT") {
        let _ = std::fs::write(PathBuf::from(out).join(name), text);
    }
}

/// Runs `bench` and returns (exit code, JSON document).
fn bench(args: &[&str]) -> (i32, serde_json::Value) {
    let out = Command::new(common::exe())
        .arg("bench")
        .args(args)
        .arg("--json")
        .current_dir(root())
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "bench {args:?}: exit {code}, no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (code, doc)
}

fn verdicts(doc: &serde_json::Value) -> Vec<(u64, String, Option<String>)> {
    doc["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["shape"].as_u64().unwrap(),
                s["verdict"].as_str().unwrap().to_string(),
                s["message"].as_str().map(|m| m.to_string()),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pilot_references_and_baselines_pass_every_shape() {
    let suite = Suite::load(SuiteSource::Dir(root().join("problems"))).unwrap();
    let mut table = String::new();
    for op in ["rms_norm", "silu_and_mul", "fused_add_rms_norm"] {
        let p = suite.problem(op).unwrap();
        // The reference against itself: every shape, quick mode (it must be deterministic,
        // write every element and keep its inputs).
        let refk = format!("problems/{op}/reference.cu");
        let (code, doc) = bench(&[op, "--kernel", &refk, "--quick"]);
        let bad: Vec<_> = verdicts(&doc)
            .into_iter()
            .filter(|v| v.1 != "pass")
            .collect();
        assert!(bad.is_empty() && code == 0, "{op} reference: {bad:?}");
        // The baseline: full mode (5 seeds), every shape.
        let (code, doc) = bench(&[op, "--full"]);
        save(
            &format!("bench-{op}.json"),
            &serde_json::to_string_pretty(&doc).unwrap(),
        );
        let v = verdicts(&doc);
        assert_eq!(v.len(), p.shapes.len(), "{op}: every shape reported");
        let bad: Vec<_> = v.iter().filter(|v| v.1 != "pass").collect();
        assert!(bad.is_empty() && code == 0, "{op} baseline: {bad:?}");
        for s in doc["shapes"].as_array().unwrap() {
            assert_eq!(s["seeds_checked"], 5);
            let sv = s["s"].as_f64().unwrap();
            assert!(sv > 0.0 && sv <= 1.0, "{op} shape {}: S = {sv}", s["shape"]);
        }
        let line = format!(
            "{op}: S_op {:.4} over {} shapes on {} (driver {})\n",
            doc["s_op"].as_f64().unwrap(),
            v.len(),
            doc["gpu"]["name"],
            doc["driver"]
        );
        eprint!("{line}");
        table.push_str(&line);
    }
    save("pilots.txt", &table);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_kernels_get_the_right_verdicts() {
    let cases: &[(&str, &str, &str)] = &[
        ("bad_unwritten.cu", "incorrect", "never written"),
        ("bad_constant.cu", "incorrect", "constant output"),
        ("bad_modifies_input.cu", "incorrect", "modified input `x`"),
        ("bad_racy.cu", "incorrect", "nondeterministic"),
        ("bad_fault.cu", "fault", "ILLEGAL_ADDRESS"),
    ];
    for (file, verdict, needle) in cases {
        let k = format!("tests/kernels/{file}");
        let (code, doc) = bench(&[
            "rms_norm", "--kernel", &k, "--quick", "--shape", "0", "--shape", "13",
        ]);
        assert_eq!(code, 1, "{file}");
        let text = serde_json::to_string(&doc).unwrap();
        assert_eq!(doc["verdict"], *verdict, "{file}: {text}");
        assert!(text.contains(needle), "{file}: `{needle}` not in {text}");
        eprintln!("{file}: {} — {}", doc["verdict"], doc["message"]);
    }
}

fn rms_norm_job(suite: &Suite, code: &str, shapes: &[u32]) -> Job {
    let p = suite.problem("rms_norm").unwrap();
    let reference = Source {
        name: "reference".into(),
        code: std::fs::read_to_string(root().join("problems/rms_norm/reference.cu")).unwrap(),
        defines: Default::default(),
    };
    let hw = suite.hardware("H200").unwrap();
    atrex_tui::contract::job::build_job(
        p,
        Source {
            name: "candidate".into(),
            code: code.to_string(),
            defines: Default::default(),
        },
        Some(reference),
        shapes,
        JobKind::All,
        Mode::Quick,
        Some(hw),
    )
    .unwrap()
}

async fn finish(c: &WorkerClient, job: Job) -> (Vec<JobEvent>, Duration) {
    let t0 = Instant::now();
    let (_, mut rx) = c.submit(job);
    let mut evs = Vec::new();
    while let Some(e) = rx.recv().await {
        let end = matches!(
            e,
            JobEvent::WorkerLost { .. } | JobEvent::Worker(Event::Done { .. })
        );
        evs.push(e);
        if end {
            break;
        }
    }
    (evs, t0.elapsed())
}

fn final_verdict(evs: &[JobEvent]) -> (Verdict, String) {
    match evs.last() {
        Some(JobEvent::Worker(Event::Done {
            verdict, message, ..
        })) => (verdict.clone(), message.clone().unwrap_or_default()),
        Some(JobEvent::WorkerLost { verdict, message }) => (verdict.clone(), message.clone()),
        other => panic!("no end: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a CUDA GPU"]
async fn a_spinning_kernel_is_killed_and_the_worker_restarted() {
    let suite = Suite::load(SuiteSource::Dir(root().join("problems"))).unwrap();
    let mut cfg = WorkerConfig::new(0);
    cfg.exe = common::exe();
    cfg.watchdog = Duration::from_secs(4);
    let c = WorkerClient::spawn(cfg);
    assert!(matches!(
        c.hello().await,
        Ok(Event::Hello {
            device: Some(_),
            ..
        })
    ));
    let spin = std::fs::read_to_string(root().join("tests/kernels/bad_spin.cu")).unwrap();
    let (evs, took) = finish(&c, rms_norm_job(&suite, &spin, &[0])).await;
    let (v, m) = final_verdict(&evs);
    assert_eq!(v, Verdict::Timeout, "{m}");
    eprintln!("spin: {} after {:.1} s — {m}", v.name(), took.as_secs_f64());
    let t0 = Instant::now();
    let good = std::fs::read_to_string(root().join("problems/rms_norm/baseline.cu")).unwrap();
    let (evs, _) = finish(&c, rms_norm_job(&suite, &good, &[0])).await;
    let (v, m) = final_verdict(&evs);
    assert_eq!(v, Verdict::Pass, "{m}");
    eprintln!(
        "next job after the restart: pass in {:.2} s",
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(c.restarts.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a CUDA GPU"]
async fn speed_cold_start_and_hand_edit_to_verdict() {
    let suite = Suite::load(SuiteSource::Dir(root().join("problems"))).unwrap();
    let mut figures = String::new();
    // Cold start to ready: spawn → hello answered (context created, harness loaded).
    let mut colds = Vec::new();
    for _ in 0..3 {
        let mut cfg = WorkerConfig::new(0);
        cfg.exe = common::exe();
        let t0 = Instant::now();
        let c = WorkerClient::spawn(cfg);
        assert!(matches!(
            c.hello().await,
            Ok(Event::Hello {
                device: Some(_),
                ..
            })
        ));
        colds.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    figures.push_str(&format!("worker cold start to ready (ms, first run compiles the harness, later runs use the disk cache): {colds:.0?}\n"));
    // Hand edit → first verdict, worker warm: a new source each time (a real NVRTC compile),
    // 1-seed check and quick timing of one shape.
    let mut cfg = WorkerConfig::new(0);
    cfg.exe = common::exe();
    let c = WorkerClient::spawn(cfg);
    c.hello().await.unwrap();
    let base = std::fs::read_to_string(root().join("problems/rms_norm/baseline.cu")).unwrap();
    let mut times = Vec::new();
    for i in 0..9 {
        let code = format!("{base}\n// edit {i} {}\n", std::process::id());
        let (evs, took) = finish(&c, rms_norm_job(&suite, &code, &[0])).await;
        let (v, m) = final_verdict(&evs);
        assert_eq!(v, Verdict::Pass, "{m}");
        times.push(took.as_secs_f64() * 1e3);
    }
    let mut sorted = times.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    figures.push_str(&format!(
        "hand edit -> first verdict (compile + 1-seed check + quick timing, rms_norm shape 0), ms: median {:.0}, all {:?}\n",
        sorted[sorted.len() / 2],
        times.iter().map(|t| t.round()).collect::<Vec<_>>()
    ));
    eprint!("{figures}");
    save("speed.txt", &figures);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_plain_copy_times_at_the_calibrated_bandwidth() {
    let out = Command::new(common::exe())
        .args(["calibrate", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cal: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bw_cal = cal["copy_bytes_per_s"].as_f64().unwrap();
    let ws = root().join("tests/fixtures/copy_ws");
    let out = Command::new(common::exe())
        .args([
            "bench",
            "copy",
            "--json",
            "--shape",
            "0",
            "--hardware",
            "H200",
        ])
        .arg("--workspace")
        .arg(&ws)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    let s = &doc["shapes"][0];
    assert_eq!(s["verdict"], "pass", "{doc}");
    let ms = s["timing"]["median_ms"].as_f64().unwrap();
    let bw = 2.0 * 268435456.0 * 4.0 / (ms * 1e-3);
    let ratio = bw / bw_cal;
    let line = format!(
        "copy: timed {:.3} TB/s, calibrated {:.3} TB/s, ratio {ratio:.4}; S vs datasheet {:.3}\n",
        bw / 1e12,
        bw_cal / 1e12,
        s["s"].as_f64().unwrap_or(0.0)
    );
    eprint!("{line}");
    save("copy.txt", &line);
    assert!((ratio - 1.0).abs() <= 0.02, "{line}");
}

/// `profile --source`: the report is exported and its source page read back — where the warps
/// of the rms_norm baseline were sampled, per instruction.
#[test]
#[ignore = "needs a CUDA GPU"]
fn profile_source_says_where_the_warps_wait() {
    let out = Command::new(common::exe())
        .args(["profile", "rms_norm", "--shape", "27", "--source", "--json"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The figures come from the exported report as they come from the printed page.
    assert!(
        d["kernels"][0]["duration_ns"].as_f64().unwrap() > 0.0,
        "{d}"
    );
    let s = &d["source"][0];
    let name = d["kernels"][0]["name"].as_str().unwrap();
    assert!(name.contains(s["kernel"].as_str().unwrap()), "{d}");
    assert!(s["samples"].as_u64().unwrap() > 0, "{s}");
    assert!(s["executed"].as_u64().unwrap() > 0, "{s}");
    let hot = s["hot"].as_array().unwrap();
    assert!(!hot.is_empty() && hot.len() <= 12, "{s}");
    assert!(hot[0]["sass"].as_str().unwrap().len() > 2, "{s}");
    save(
        "profile-source.json",
        &serde_json::to_string_pretty(&d).unwrap(),
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn profiling_the_rms_norm_baseline_gives_plausible_figures() {
    let keep = std::env::var("OUT").unwrap_or_else(|_| std::env::temp_dir().display().to_string());
    let mut report = String::new();
    for (kernel, shape) in [
        ("problems/rms_norm/baseline.cu", "27"),
        ("problems/rms_norm/baseline.cu", "47"),
        ("tests/kernels/bad_racy.cu", "0"),
    ] {
        let t0 = Instant::now();
        let out = Command::new(common::exe())
            .args([
                "profile", "rms_norm", "--kernel", kernel, "--shape", shape, "--json",
            ])
            .env("ATREX_NCU_KEEP", &keep)
            .current_dir(root())
            .output()
            .unwrap();
        let took = t0.elapsed().as_secs_f64();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let k = &d["kernels"][0];
        let line = format!(
            "{kernel} shape {shape}: {took:.1} s wall; duration {:.2} µs, DRAM {:.1}%, SM {:.1}%, occupancy {:.1}% (theoretical {:.1}%), regs {}, waves {:.2}, L2 hit {:.1}%, DRAM/Q {:.3}, stalls {}, findings {}\n",
            k["duration_ns"].as_f64().unwrap_or(-1.0) / 1e3,
            k["dram_throughput_pct"].as_f64().unwrap_or(-1.0),
            k["sm_throughput_pct"].as_f64().unwrap_or(-1.0),
            k["achieved_occupancy_pct"].as_f64().unwrap_or(-1.0),
            k["theoretical_occupancy_pct"].as_f64().unwrap_or(-1.0),
            k["registers_per_thread"],
            k["waves_per_sm"].as_f64().unwrap_or(-1.0),
            k["l2_hit_pct"].as_f64().unwrap_or(-1.0),
            d["redundant_traffic_ratio"].as_f64().unwrap_or(-1.0),
            k["stalls"],
            d["findings"]
                .as_array()
                .map(|f| f
                    .iter()
                    .map(|x| x["rule"].as_str().unwrap_or("").to_string())
                    .collect::<Vec<_>>()
                    .join(","))
                .unwrap_or_default(),
        );
        eprint!("{line}");
        report.push_str(&line);
        assert!(k["duration_ns"].as_f64().unwrap() > 0.0);
        if shape == "27" {
            // 260 MB through one 32-thread block per 128-wide row: DRAM bytes close to Q, but
            // the baseline is latency-bound (half-idle warps, low occupancy) and says so.
            let dram = k["dram_throughput_pct"].as_f64().unwrap();
            assert!(dram > 0.0 && dram <= 100.0, "{line}");
            assert!(line.contains("low_occupancy"), "{line}");
            let r = d["redundant_traffic_ratio"].as_f64().unwrap();
            assert!(r > 0.9 && r < 1.3, "{line}");
            assert!(took < 15.0, "a profile of one shape took {took:.1} s");
        }
        if shape == "47" {
            assert!(
                line.contains("grid_too_small") || line.contains("latency_bound"),
                "{line}"
            );
        }
    }
    save("profile.txt", &report);
}

/// Without `--device`, `bench` runs one worker per GPU and spreads the shapes over them: every
/// shape is measured once, all pass, each names its worker, and on a machine with two or more
/// GPUs both are used.
#[test]
#[ignore = "needs a CUDA GPU"]
fn bench_spreads_the_shapes_over_every_gpu() {
    let (code, doc) = bench(&["rms_norm", "--quick"]);
    save("pool-rms_norm.json", &doc.to_string());
    assert_eq!(code, 0, "{}", doc["message"]);
    let gpus = doc["workers"].as_array().expect("workers listed").len();
    let shapes = doc["shapes"].as_array().unwrap();
    assert_eq!(shapes.len(), 56);
    let mut ids: Vec<u64> = shapes
        .iter()
        .map(|s| s["shape"].as_u64().unwrap())
        .collect();
    ids.dedup();
    assert_eq!(ids.len(), 56, "every shape exactly once, in order");
    assert!(
        shapes.iter().all(|s| s["worker"].as_str().is_some()),
        "each shape names its worker"
    );
    let used: std::collections::BTreeSet<u64> = shapes
        .iter()
        .map(|s| s["device"].as_u64().expect("each shape names its GPU"))
        .collect();
    eprintln!(
        "{gpus} GPU(s); shapes per GPU: {:?}; wall {:.1} s",
        used.iter()
            .map(|d| (
                *d,
                shapes
                    .iter()
                    .filter(|s| s["device"].as_u64() == Some(*d))
                    .count()
            ))
            .collect::<Vec<_>>(),
        doc["wall_s"].as_f64().unwrap_or(0.0)
    );
    assert_eq!(used.len(), gpus.min(56), "shapes spread over every GPU");
}

/// `bench` of a kernel on rms_norm shapes on GPU 0: (exit code, document).
fn bench_k(kernel: &str, mode: &str, shapes: &[u32]) -> (i32, serde_json::Value) {
    let k = format!("tests/kernels/{kernel}");
    let mut args: Vec<String> = vec![
        "rms_norm".into(),
        "--kernel".into(),
        k,
        mode.into(),
        "--device".into(),
        "0".into(),
    ];
    for s in shapes {
        args.push("--shape".into());
        args.push(s.to_string());
    }
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    bench(&a)
}

fn output_text(doc: &serde_json::Value) -> String {
    doc["output"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|o| o["text"].as_str().unwrap_or("").to_string())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Each class of hostile kernel in tests/kernels/ is caught with the right verdict and message
/// (docs/kernel-contract.md, "What the harness defends against").
#[test]
#[ignore = "needs a CUDA GPU"]
fn hostile_kernels_are_caught() {
    let mut report = String::new();
    // Forged events printed by the kernel: the real results, once per shape; the forgery shows
    // up as the kernel's output, bounded.
    let (code, doc) = bench_k("hostile_forged_events.cu", "--quick", &[0, 13]);
    let v = verdicts(&doc);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(v.len(), 2, "{v:?}");
    for s in doc["shapes"].as_array().unwrap() {
        let sv = s["s"].as_f64().unwrap();
        assert!(sv != 0.95 && sv < 0.9, "forged S taken: {s}");
    }
    let out = output_text(&doc);
    assert!(out.contains(r#""type":"shape_done""#), "{out}");
    let dropped: u64 = doc["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["dropped"].as_u64().unwrap())
        .sum();
    assert!(
        out.len() <= 64 * 1024 + 400 && dropped > 0,
        "{} kept, {dropped} dropped",
        out.len()
    );
    report.push_str(&format!(
        "forged events: verdicts {v:?}, S {:?}; output kept {} bytes, {dropped} dropped\n",
        doc["shapes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["s"].as_f64().unwrap())
            .collect::<Vec<_>>(),
        out.len()
    ));
    // Printf noise with an escape sequence: kept (bounded) and made visible.
    let (code, doc) = bench_k("hostile_noise.cu", "--quick", &[5]);
    assert_eq!(code, 0, "{doc}");
    let out = output_text(&doc);
    assert!(
        out.contains("\u{241b}[2Jrow 0 of 360"),
        "{}",
        &out[..out.len().min(300)]
    );
    assert!(!out.contains('\x1b') && out.contains("not kept"));
    report.push_str(&format!(
        "noise: pass, {} bytes of output kept\n",
        out.len()
    ));
    save("hostile.txt", &report);
    // Skipping outputs left by an earlier launch: every timed run starts from poisoned
    // outputs, so the kernel does the whole work and times like the baseline.
    let shapes = [3, 12, 13, 14];
    let (code, skip) = bench_k("hostile_skip_stale.cu", "--quick", &shapes);
    assert_eq!(code, 0, "{skip}");
    let (_, base) = bench(&[
        "rms_norm", "--quick", "--device", "0", "--shape", "3", "--shape", "12", "--shape", "13",
        "--shape", "14",
    ]);
    for (a, b) in skip["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .zip(base["shapes"].as_array().unwrap())
    {
        let (sa, sb) = (a["s"].as_f64().unwrap(), b["s"].as_f64().unwrap());
        report.push_str(&format!(
            "skip-stale shape {}: S {sa:.4} vs baseline {sb:.4} ({:+.1} %)\n",
            a["shape"],
            (sa / sb - 1.0) * 100.0
        ));
        assert!(
            sa <= sb * 1.10,
            "shape {}: S {sa} vs baseline {sb}",
            a["shape"]
        );
    }
    // Behaviour that changes after a number of launches (a launch counter in a module global):
    // timed outputs are checked; in full mode the check's own launches (random seeds and
    // structured draws) already pass the counter, and the check catches it.
    for mode in ["--quick", "--full"] {
        let (code, doc) = bench_k("hostile_launch_counter.cu", mode, &[5]);
        assert_eq!(code, 1, "{doc}");
        assert_eq!(doc["verdict"], "incorrect", "{doc}");
        let m = doc["shapes"][0]["message"].as_str().unwrap();
        assert!(
            m.contains("output of a timed run differs from the check")
                || (mode == "--full" && m.starts_with("output `out`")),
            "{m}"
        );
        assert_eq!(doc["shapes"][0]["strict_ok"], false);
        report.push_str(&format!("launch counter {mode}: {m}\n"));
        save("hostile.txt", &report);
    }
    // Inputs modified only when timed.
    let (code, doc) = bench_k("hostile_input_when_timed.cu", "--quick", &[5]);
    assert_eq!(code, 1, "{doc}");
    let m = doc["shapes"][0]["message"].as_str().unwrap();
    assert!(m.contains("input `x` was modified during timing"), "{m}");
    report.push_str(&format!("input modified when timed: {m}\n"));
    save("hostile.txt", &report);
    // A host file through #include: refused on its line, nothing of the file shown.
    let (code, doc) = bench_k("hostile_include_host_file.cu", "--quick", &[5]);
    assert_eq!(code, 1);
    assert_eq!(doc["verdict"], "compile error", "{doc}");
    let text = serde_json::to_string(&doc).unwrap();
    assert!(
        text.contains("include refused") && text.contains("\"line\":12"),
        "{text}"
    );
    assert!(!text.contains("root:"), "{text}");
    report.push_str(&format!(
        "include: {}\n",
        doc["compile"][0]["diagnostics"][0]["msg"]
    ));
    // A fault on one shape costs that shape only.
    let (code, doc) = bench_k("hostile_fault_one_shape.cu", "--quick", &[0, 13, 5]);
    assert_eq!(code, 1);
    let mut v = verdicts(&doc);
    v.sort_by_key(|x| x.0);
    let got: Vec<(u64, &str)> = v.iter().map(|x| (x.0, x.1.as_str())).collect();
    assert_eq!(got, vec![(0, "pass"), (5, "pass"), (13, "fault")], "{doc}");
    assert!(v[2].2.as_deref().unwrap().contains("ILLEGAL"), "{v:?}");
    report.push_str(&format!(
        "fault on one shape: {got:?} — {}\n",
        v[2].2.as_deref().unwrap()
    ));
    eprint!("{report}");
    save("hostile.txt", &report);
}

/// The second round of hostile kernels against the timing protocol, each caught in quick and
/// full mode with its verdict and the defence named in the message; the honest baseline on the
/// same shape passes with every timed sample checked in full mode and a quarter in quick mode.
#[test]
#[ignore = "needs a CUDA GPU"]
fn timing_protocol_hostile_kernels_are_caught() {
    let mut report = String::new();
    let cases = [
        (
            "hostile_input_checksum_fixup.cu",
            "input `x` was modified during timing",
        ),
        (
            "hostile_checked_sample_only.cu",
            "output of a timed run differs from the check",
        ),
        (
            "hostile_scaled_when_timed.cu",
            "outside the strict tolerance",
        ),
    ];
    for (kernel, want) in cases {
        for mode in ["--quick", "--full"] {
            // One shape: the kernels' launch counters are global, so a second shape's check
            // would catch them before its timing does.
            let (code, doc) = bench_k(kernel, mode, &[5]);
            let shapes = doc["shapes"].as_array().expect("shapes");
            assert_eq!(code, 1, "{kernel} {mode}: {doc}");
            assert_eq!(doc["verdict"], "incorrect", "{kernel} {mode}: {doc}");
            for s in shapes {
                assert_eq!(s["verdict"], "incorrect", "{kernel} {mode}: {s}");
                let m = s["message"].as_str().unwrap_or("");
                assert!(m.contains(want), "{kernel} {mode}: {m}");
                assert_eq!(s["strict_ok"], false, "{kernel} {mode}: {s}");
            }
            report.push_str(&format!(
                "{kernel} {mode}: {}\n",
                shapes[0]["message"].as_str().unwrap_or("")
            ));
            save("hostile_timing.txt", &report);
        }
    }
    for mode in ["--quick", "--full"] {
        let (code, doc) = bench(&[
            "rms_norm", mode, "--device", "0", "--shape", "5", "--shape", "27",
        ]);
        assert_eq!(code, 0, "{doc}");
        for s in doc["shapes"].as_array().unwrap() {
            let t = &s["timing"];
            let (n, checked) = (t["n"].as_u64().unwrap(), t["checked"].as_u64().unwrap());
            if mode == "--full" {
                assert_eq!(checked, n, "every timed sample checked: {s}");
            } else {
                assert!(checked * 4 >= n && checked >= 1, "a quarter checked: {s}");
            }
            report.push_str(&format!(
                "baseline {mode} shape {}: {n} samples, {checked} checked, S {:.4}\n",
                s["shape"],
                s["s"].as_f64().unwrap_or(0.0)
            ));
        }
    }
    // Host files through the compiler, hidden from a line-based scan: a raw string, digit
    // separators, an include inside a macro's arguments. Refused before NVRTC sees them.
    for kernel in [
        "hostile_include_raw_string.cu",
        "hostile_include_digit_separator.cu",
        "hostile_include_macro_argument.cu",
    ] {
        let (code, doc) = bench_k(kernel, "--quick", &[5]);
        assert_eq!(code, 1, "{kernel}: {doc}");
        assert_eq!(doc["verdict"], "compile error", "{kernel}: {doc}");
        let text = serde_json::to_string(&doc).unwrap();
        assert!(text.contains("include refused"), "{kernel}: {text}");
        assert!(!text.contains("root:"), "{kernel}: {text}");
        report.push_str(&format!(
            "{kernel}: {}\n",
            doc["compile"][0]["diagnostics"][0]["msg"]
        ));
    }
    eprint!("{report}");
    save("hostile_timing.txt", &report);
}

/// Hostile launch plans through the worker on the GPU: an expression in 20,000 parentheses is a
/// plan error naming its line (the worker neither aborts nor faults), and a tensor map whose
/// reach wraps 64 bits is refused on every shape before anything is launched.
#[test]
#[ignore = "needs a CUDA GPU"]
fn hostile_plans_are_refused_by_the_worker() {
    let (code, doc) = bench_k("hostile_plan_deep_parens.cu", "--quick", &[5]);
    assert_eq!(code, 1, "{doc}");
    let text = serde_json::to_string(&doc).unwrap();
    assert!(
        text.contains("plan error") && text.contains("at most 4096"),
        "{text}"
    );
    assert!(!text.contains("fault"), "{text}");
    let deep = doc["message"].to_string();
    let (code, doc) = bench_k("hostile_tensor_map_wrap.cu", "--quick", &[5, 27]);
    assert_eq!(code, 1, "{doc}");
    for s in doc["shapes"].as_array().expect("shapes") {
        assert_eq!(s["verdict"], "error", "{s}");
        let m = s["message"].as_str().unwrap_or("");
        assert!(m.contains("reach more than 2^64 bytes of `x`"), "{m}");
    }
    save(
        "hostile_plans.txt",
        &format!(
            "deep parentheses: {deep}\ntensor map wrap: {}\n",
            doc["shapes"][0]["message"]
        ),
    );
}

/// Inputs only ever random (docs/kernel-contract.md): an RMSNorm that ignores eps, gives NaN on
/// a zero row and 0 for |x| > 256 is right on every random draw; the structured draws catch it
/// in full mode (every draw) and in quick mode (one draw, chosen by the seed), with a message
/// that names the draw. The baseline passes every draw.
#[test]
#[ignore = "needs a CUDA GPU"]
fn hostile_random_only_is_caught_by_the_structured_draws() {
    let mut report = String::new();
    let names = ["zero_rows", "const_rows", "large", "tiny", "outliers"];
    for mode in ["--full", "--quick", "--quick", "--quick"] {
        let (code, doc) = bench_k("hostile_random_only.cu", mode, &[5]);
        assert_eq!(code, 1, "{mode}: exit {code}: {doc}");
        assert_eq!(doc["verdict"], "incorrect", "{mode}: {doc}");
        let m = doc["shapes"][0]["message"].as_str().unwrap_or_default();
        let named = names
            .iter()
            .find(|n| m.contains(&format!("on the structured draw `{n}` (seed ")));
        assert!(
            m.starts_with("output `out` on the structured draw") && named.is_some(),
            "{mode}: the message should name a structured draw: {m}"
        );
        assert_eq!(doc["shapes"][0]["strict_ok"], false, "{mode}: {doc}");
        report.push_str(&format!("random-only {mode}: {m}\n"));
    }
    let (code, doc) = bench(&[
        "rms_norm", "--full", "--device", "0", "--shape", "5", "--shape", "15", "--shape", "47",
    ]);
    assert_eq!(
        code,
        0,
        "the baseline on the structured draws: {:?}",
        verdicts(&doc)
    );
    report.push_str(&format!("baseline on the draws: {:?}\n", verdicts(&doc)));
    eprint!("{report}");
    save("hostile-random-only.txt", &report);
}

/// Pages in order (docs/kernel-contract.md, "Inputs only ever random"): a reshape_and_cache
/// that ignores slot_mapping and writes token t to slot t is right on every random draw (slots
/// 0..T); the structured draw `scattered_slots` catches it in full mode, naming the draw. The
/// baseline, which follows slot_mapping, passes every draw.
#[test]
#[ignore = "needs a CUDA GPU"]
fn hostile_slots_in_order_are_caught_by_the_scattered_draw() {
    let (code, doc) = bench(&[
        "reshape_and_cache",
        "--kernel",
        "tests/kernels/hostile_slots_in_order.cu",
        "--full",
        "--device",
        "0",
        "--shape",
        "3",
    ]);
    assert_eq!(code, 1, "exit {code}: {doc}");
    assert_eq!(doc["verdict"], "incorrect", "{doc}");
    let m = doc["shapes"][0]["message"].as_str().unwrap_or_default();
    assert!(
        m.contains("on the structured draw `scattered_slots` (seed "),
        "the message should name the draw: {m}"
    );
    let (code, base) = bench(&[
        "reshape_and_cache",
        "--full",
        "--device",
        "0",
        "--shape",
        "0",
        "--shape",
        "3",
    ]);
    assert_eq!(code, 0, "the baseline on the draws: {:?}", verdicts(&base));
    save(
        "hostile-slots-in-order.txt",
        &format!(
            "slots in order --full: {m}\nbaseline: {:?}\n",
            verdicts(&base)
        ),
    );
}

/// The check's comparison on the device gives what the host's comparison gives: the same jobs
/// (fixed seeds, so the same inputs) through a worker comparing on the device and one comparing
/// on the host (ATREX_HOST_CHECK), on float, fp8 and integer outputs, passing and failing kernels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a CUDA GPU"]
async fn the_device_check_agrees_with_the_host_check() {
    let suite = Suite::load(SuiteSource::Dir(root().join("problems"))).unwrap();
    let hw = suite.hardware("H200").unwrap();
    let cases: [(&str, &str, &[u32]); 8] = [
        ("rms_norm", "problems/rms_norm/baseline.cu", &[5, 27]),
        ("rms_norm", "tests/kernels/bad_constant.cu", &[5]),
        ("rms_norm", "tests/kernels/bad_unwritten.cu", &[5]),
        ("rms_norm", "tests/kernels/hostile_random_only.cu", &[5]),
        ("silu_and_mul", "problems/silu_and_mul/baseline.cu", &[0, 3]),
        (
            "fp8_dynamic_per_token_quant",
            "problems/fp8_dynamic_per_token_quant/baseline.cu",
            &[0, 2],
        ),
        (
            "moe_align_block_size",
            "problems/moe_align_block_size/baseline.cu",
            &[0, 2],
        ),
        ("fused_moe", "problems/fused_moe/baseline.cu", &[0]),
    ];
    let run = |host: bool| {
        let suite = &suite;
        async move {
            if host {
                unsafe { std::env::set_var("ATREX_HOST_CHECK", "1") };
            } else {
                unsafe { std::env::remove_var("ATREX_HOST_CHECK") };
            }
            let mut cfg = WorkerConfig::new(0);
            cfg.exe = common::exe();
            let c = WorkerClient::spawn(cfg);
            let mut all = Vec::new();
            for (op, kernel, shapes) in cases {
                let p = suite.problem(op).unwrap();
                let read = |f: &str| std::fs::read_to_string(root().join(f)).unwrap();
                let src = |name: &str, code: String| Source {
                    name: name.into(),
                    code,
                    defines: Default::default(),
                };
                let mut job = atrex_tui::contract::job::build_job(
                    p,
                    src("candidate", read(kernel)),
                    Some(src(
                        "reference",
                        read(&format!("problems/{op}/reference.cu")),
                    )),
                    shapes,
                    JobKind::Check,
                    Mode::Quick,
                    Some(hw),
                )
                .unwrap();
                job.seeds = vec![0x1234_5678, 0x9abc_def0];
                let (evs, _) = finish(&c, job).await;
                for e in evs {
                    if let JobEvent::Worker(Event::ShapeDone { result, .. }) = e {
                        all.push((op, kernel, result.shape, result.verdict, result.checks));
                    }
                }
            }
            all
        }
    };
    let device = run(false).await;
    let host = run(true).await;
    unsafe { std::env::remove_var("ATREX_HOST_CHECK") };
    assert_eq!(device.len(), host.len());
    assert!(device.len() >= 11, "{device:?}");
    let mut report = String::new();
    for (d, h) in device.iter().zip(&host) {
        assert_eq!((d.0, d.1, d.2), (h.0, h.1, h.2));
        assert_eq!(d.3, h.3, "verdict of {} {} shape {}", d.0, d.1, d.2);
        assert_eq!(d.4.len(), h.4.len());
        for (a, b) in d.4.iter().zip(&h.4) {
            let close = |x: f64, y: f64| x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs());
            assert!(
                a.bench_ok == b.bench_ok
                    && a.strict_ok == b.strict_ok
                    && a.mismatches == b.mismatches
                    && a.first_bad == b.first_bad
                    && a.reason == b.reason
                    && a.shared_nan == b.shared_nan
                    && close(a.max_abs, b.max_abs)
                    && close(a.max_rel, b.max_rel)
                    && close(a.rel_l2, b.rel_l2),
                "{} {} shape {}:\ndevice {a:?}\nhost   {b:?}",
                d.0,
                d.1,
                d.2
            );
        }
        report.push_str(&format!(
            "{} {} shape {}: {:?}, {} outputs agree\n",
            d.0,
            d.1,
            d.2,
            d.3,
            d.4.len()
        ));
    }
    eprint!("{report}");
    save("device_check.txt", &report);
}

/// Timing-only jobs (the agent's A B B A runs) check their timed outputs too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a CUDA GPU"]
async fn timing_only_jobs_check_what_timed_runs_wrote() {
    let suite = Suite::load(SuiteSource::Dir(root().join("problems"))).unwrap();
    let mut cfg = WorkerConfig::new(0);
    cfg.exe = common::exe();
    let c = WorkerClient::spawn(cfg);
    let code =
        std::fs::read_to_string(root().join("tests/kernels/hostile_launch_counter.cu")).unwrap();
    let mut job = rms_norm_job(&suite, &code, &[5]);
    job.kind = JobKind::Time;
    job.mode = Mode::Full;
    let (evs, _) = finish(&c, job).await;
    let r = evs
        .iter()
        .find_map(|e| match e {
            JobEvent::Worker(Event::ShapeDone { result, .. }) => Some(result.clone()),
            _ => None,
        })
        .expect("a result");
    assert_eq!(r.verdict, Verdict::Incorrect, "{r:?}");
    let base = std::fs::read_to_string(root().join("problems/rms_norm/baseline.cu")).unwrap();
    let mut job = rms_norm_job(&suite, &base, &[5]);
    job.kind = JobKind::Time;
    let (evs, _) = finish(&c, job).await;
    let (v, m) = final_verdict(&evs);
    assert_eq!(v, Verdict::Pass, "{m}");
}

/// ptxas's spill warning reaches the compile result as a warning on the whole kernel (line 0),
/// and a kernel that spills but is correct still passes; the baseline compiles without one.
#[test]
#[ignore = "needs a CUDA GPU"]
fn ptxas_spills_are_reported_on_the_kernel() {
    let (code, doc) = bench_k("perf_spills.cu", "--quick", &[5]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(verdicts(&doc)[0].1, "pass", "{doc}");
    let diags = doc["compile"][0]["diagnostics"].as_array().unwrap();
    assert!(
        diags.iter().any(|d| d["line"] == 0
            && d["severity"] == "warning"
            && d["msg"].as_str().unwrap().contains("spilled")),
        "{diags:?}"
    );
    let (_, doc) = bench(&["rms_norm", "--quick", "--shape", "5", "--device", "0"]);
    let diags = doc["compile"][0]["diagnostics"].as_array().unwrap();
    assert!(diags.iter().all(|d| d["line"] != 0), "{diags:?}");
}

/// The contract's Hopper extensions on the GPU: a kernel that loads and stores through TMA
/// tensor maps, runs in clusters of two and asks for more than 48 KiB of dynamic shared memory
/// passes every silu_and_mul shape; the CCCL headers (cuda/barrier, cuda/pipeline, cuda/ptx)
/// compile under NVRTC and a kernel using cuda::barrier passes; a tensor map that reaches past its
/// buffer is refused with the plan's line.
#[test]
#[ignore = "needs a CUDA GPU"]
fn hopper_contract_tma_clusters_large_shared_memory_and_cccl() {
    let (code, tma) = bench(&[
        "silu_and_mul",
        "--kernel",
        "knowledge/templates/silu_and_mul_tma.cu",
        "--quick",
        "--device",
        "0",
    ]);
    save("hopper_tma.json", &tma.to_string());
    let bad: Vec<_> = verdicts(&tma)
        .into_iter()
        .filter(|(_, v, _)| v != "pass")
        .collect();
    assert!(
        code == 0 && bad.is_empty(),
        "TMA kernel: exit {code}: {bad:?}"
    );
    let (_, base) = bench(&["silu_and_mul", "--quick", "--device", "0"]);
    println!(
        "silu_and_mul quick: TMA template S_op {} · baseline S_op {}",
        tma["s_op"], base["s_op"]
    );
    let (code, cccl) = bench(&[
        "rms_norm",
        "--kernel",
        "tests/kernels/contract_cccl_barrier.cu",
        "--quick",
        "--device",
        "0",
    ]);
    save("hopper_cccl.json", &cccl.to_string());
    assert_eq!(code, 0, "CCCL kernel: {cccl}");
    let (code, past) = bench(&[
        "silu_and_mul",
        "--kernel",
        "tests/kernels/contract_tma_past_the_buffer.cu",
        "--quick",
        "--device",
        "0",
        "--shape",
        "5",
    ]);
    save("hopper_tma_past.json", &past.to_string());
    let text = past.to_string();
    assert_ne!(code, 0);
    assert!(
        text.contains("launch plan line 4") && text.contains("reach") && text.contains("`x`"),
        "{text}"
    );
}

/// A cooperative launch (`cooperative = true`) runs its grid barrier when the grid fits
/// (reshape_and_cache's template, every shape strict), and a grid that cannot be resident at
/// once is refused by the driver with a message naming the kernel — not a barrier that hangs
/// until the watchdog.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cooperative_launches_run_or_are_refused_never_hang() {
    let tpl = root().join("knowledge/templates/reshape_and_cache.cu");
    let (code, ok) = bench(&[
        "reshape_and_cache",
        "--kernel",
        tpl.to_str().unwrap(),
        "--quick",
        "--device",
        "0",
    ]);
    save("cooperative_ok.json", &ok.to_string());
    let bad: Vec<_> = verdicts(&ok)
        .into_iter()
        .filter(|(_, v, _)| v != "pass")
        .collect();
    assert!(code == 0 && bad.is_empty(), "exit {code}: {bad:?}");
    let text = std::fs::read_to_string(&tpl).unwrap();
    let grid = text
        .lines()
        .find(|l| l.starts_with("grid = "))
        .expect("the template's grid line");
    let big = text.replacen(grid, "grid = [\"132 * 64\"]", 1);
    let dir = std::env::temp_dir().join(format!("atrex-coop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("too_large.cu");
    std::fs::write(&file, big).unwrap();
    // Refused by the driver (a hang would end as the watchdog's `timeout` instead).
    let (code, refused) = bench(&[
        "reshape_and_cache",
        "--kernel",
        file.to_str().unwrap(),
        "--quick",
        "--device",
        "0",
        "--shape",
        "4",
    ]);
    save("cooperative_refused.json", &refused.to_string());
    let text = refused.to_string();
    assert_ne!(code, 0);
    assert!(
        text.contains("reshape_and_cache_one")
            && text.contains("cooperative")
            && text.contains("COOPERATIVE_LAUNCH_TOO_LARGE"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Every template of the knowledge base compiles under the kernel contract for its operator,
/// through `atrex-tui compile` — the include rule, the launch plan, NVRTC for the GPU's
/// architecture (sm_90a on Hopper), and on a GPU the module load and the lookup of every plan
/// kernel — with its plan's defines and with each value of each `[tune]` parameter.
#[test]
#[ignore = "needs a CUDA GPU"]
fn knowledge_templates_compile_under_the_contract() {
    use atrex_tui::agent::knowledge;
    use atrex_tui::contract::plan::rewrite;
    let dir = std::env::temp_dir().join(format!("atrex-templates-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let templates: Vec<_> = knowledge::docs()
        .into_iter()
        .filter(|d| d.meta.kind == "template")
        .collect();
    assert!(templates.len() >= 12, "{} templates", templates.len());
    let (mut report, mut failed) = (String::new(), Vec::new());
    for d in &templates {
        let plan =
            atrex_tui::contract::plan::parse(&d.body).unwrap_or_else(|e| panic!("{}: {e}", d.path));
        let mut configs = vec![plan.defines.clone()];
        for (k, vals) in &plan.tune {
            for v in vals {
                let mut c = plan.defines.clone();
                c.insert(k.clone(), v.clone());
                if !configs.contains(&c) {
                    configs.push(c);
                }
            }
        }
        for (i, c) in configs.iter().enumerate() {
            let src =
                rewrite::set_defines(&d.body, c).unwrap_or_else(|e| panic!("{}: {e}", d.path));
            let file = dir.join(format!("{}-{i}.cu", d.meta.id));
            std::fs::write(&file, &src).unwrap();
            let out = Command::new(common::exe())
                .args(["compile", &d.meta.operator, "--kernel"])
                .arg(&file)
                .args(["--arch", "sm_90a", "--json"])
                .current_dir(root())
                .output()
                .unwrap();
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                panic!(
                    "{} config {c:?}: no JSON ({e}): {}",
                    d.path,
                    String::from_utf8_lossy(&out.stderr)
                )
            });
            let verdict = doc["verdict"].as_str().unwrap_or("none");
            let line = format!("{} ({}) {c:?}: {verdict}\n", d.meta.id, d.meta.operator);
            eprint!("{line}");
            report.push_str(&line);
            if verdict != "pass" || !out.status.success() {
                failed.push(format!("{} {c:?}: {verdict}: {}", d.path, doc["message"]));
            }
        }
    }
    save("templates-compile.txt", &report);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failed.is_empty(), "{failed:#?}");
}

/// The shipped two-GPU workers file (docs/examples/workers-local-2gpu.toml): `bench` through
/// two templated workers measures every shape once, all pass, each naming its worker, and both
/// workers measure.
#[test]
#[ignore = "needs a CUDA GPU"]
fn bench_through_templated_workers() {
    let (code, doc) = bench(&[
        "rms_norm",
        "--quick",
        "--workers",
        "docs/examples/workers-local-2gpu.toml",
    ]);
    save("templated-rms_norm.json", &doc.to_string());
    let workers: Vec<String> = doc["workers"]
        .as_array()
        .expect("workers listed")
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    assert_eq!(code, 0, "{} {:?}", doc["message"], workers);
    let shapes = doc["shapes"].as_array().unwrap();
    assert_eq!(shapes.len(), 56);
    let used: std::collections::BTreeSet<&str> = shapes
        .iter()
        .map(|s| s["worker"].as_str().expect("each shape names its worker"))
        .collect();
    eprintln!(
        "workers {workers:?}; used {used:?}; wall {:.1} s",
        doc["wall_s"].as_f64().unwrap_or(0.0)
    );
    assert_eq!(
        used.len(),
        workers.len().min(2),
        "both templated workers measure"
    );
    assert_eq!(doc["pool"]["requeued"], 0);
}

/// `compile --sass` on the GPU machine: the toolkit's cuobjdump disassembles the unified_attention
/// template and the summary counts its wgmma (HGMMA) and uniform-datapath instructions.
#[test]
#[ignore = "needs a CUDA GPU"]
fn compile_sass_disassembles_and_summarises_the_kernel() {
    let dir = std::env::temp_dir().join(format!("atrex-sass-gpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ua.sass");
    let out = Command::new(common::exe())
        .current_dir(root())
        .args(["compile", "unified_attention", "--kernel"])
        .arg("knowledge/templates/unified_attention_wgmma.cu")
        .arg("--sass")
        .arg(&file)
        .arg("--json")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let f = &doc["sass"]["functions"][0];
    assert_eq!(f["name"], "unified_attention_wgmma", "{doc}");
    assert!(f["wgmma"].as_u64().unwrap() > 100, "{f}");
    assert!(f["uniform"].as_u64().unwrap() > 0, "{f}");
    let sass = std::fs::read_to_string(&file).unwrap();
    assert!(
        sass.contains("HGMMA.64x128x16"),
        "{}",
        &sass[..sass.len().min(2000)]
    );
    std::fs::remove_dir_all(&dir).ok();
}
