//! The suite in problems/ against the benchmark's data files, and the CLI on it.

mod common;

use atrex_tui::suite::import;
use atrex_tui::suite::roofline;
use atrex_tui::suite::{PhaseFilter, Suite, SuiteSource};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bench_dir() -> Option<PathBuf> {
    let d = root().join("..").join("shared").join("atrex-bench-data");
    if d.join("data").is_dir() {
        Some(d)
    } else {
        eprintln!("SKIPPED: ../shared/atrex-bench-data is absent");
        None
    }
}

fn suite() -> Suite {
    Suite::load(SuiteSource::Dir(root().join("problems"))).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn thirty_operators_and_440_shapes() {
    let s = suite();
    assert_eq!(s.problems.len(), 30);
    assert_eq!(s.shape_count(), 440);
    let total: f64 = s.weights(PhaseFilter::All).values().sum();
    assert!((total - 1.0).abs() < 1e-9, "{total}");
    assert!(
        (s.importance_total() - 1.09478).abs() < 1e-4,
        "{}",
        s.importance_total()
    );
    for ph in [PhaseFilter::Prefill, PhaseFilter::Decode] {
        let w: f64 = s.weights(ph).values().sum();
        assert!((w - 1.0).abs() < 1e-9);
        assert!(s.by_weight(ph).len() < 30);
    }
    let keys: Vec<&str> = s.hardware.iter().map(|h| h.key.as_str()).collect();
    for k in ["H20", "XPU-A", "H100_SXM", "H200", "B200"] {
        assert!(keys.contains(&k), "{k} missing from {keys:?}");
    }
}

#[test]
fn embedded_suite_equals_the_checkout() {
    let e = Suite::load(SuiteSource::Embedded).unwrap();
    let d = suite();
    assert_eq!(e.problems.len(), d.problems.len());
    for (a, b) in e.problems.iter().zip(&d.problems) {
        assert_eq!(a.name, b.name);
        assert_eq!(a.shapes.len(), b.shapes.len());
    }
}

#[test]
fn w_q_and_sol_match_the_benchmark_exactly() {
    let Some(dir) = bench_dir() else { return };
    let s = suite();
    let h20 = s.hardware("H20").unwrap();
    let xpu = s.hardware("XPU-A").unwrap();
    let mut n = 0;
    for p in &s.problems {
        let b = import::read_bench_op(&dir.join("data"), &p.name).unwrap();
        assert_eq!(b.shapes.len(), p.shapes.len(), "{}", p.name);
        for sh in &p.shapes {
            let r = &b.roofline[&sh.id];
            let w = p.work(sh).unwrap();
            assert_eq!(w.flops, r.flops, "{} shape {} W", p.name, sh.id);
            assert_eq!(
                w.read_bytes, r.read_bytes,
                "{} shape {} Q_read",
                p.name, sh.id
            );
            assert_eq!(
                w.write_bytes, r.write_bytes,
                "{} shape {} Q_write",
                p.name, sh.id
            );
            for (hw, key) in [(h20, "H20"), (xpu, "XPU-A")] {
                let ours = roofline::sol(&w, hw).unwrap().sol_ms();
                let theirs = r.sol_ms[key];
                assert!(
                    ((ours - theirs) / theirs).abs() <= 1e-6,
                    "{} shape {} SOL on {key}: {ours} vs {theirs}",
                    p.name,
                    sh.id
                );
            }
            n += 1;
        }
    }
    assert_eq!(n, 440);
}

#[test]
fn import_reports_agreement_and_disagreement() {
    let Some(dir) = bench_dir() else { return };
    let s = suite();
    let rep = import::import(&s, &dir, None).unwrap();
    assert_eq!(rep.operators_compared, 30);
    assert_eq!(rep.shapes_compared, 440);
    assert!(rep.disagreements.is_empty(), "{:?}", rep.disagreements);
    assert!(rep.missing_in_bench.is_empty() && rep.missing_in_problems.is_empty());

    // A changed shape and a changed formula are both reported.
    let tmp = tempdir("import");
    copy_dir(&root().join("problems"), &tmp.join("problems"));
    let f = tmp.join("problems/rms_norm/problem.toml");
    let t = std::fs::read_to_string(&f).unwrap();
    assert!(t.contains("token_count = 2500,"));
    let t = t.replacen("token_count = 2500,", "token_count = 2501,", 1);
    let t = t.replace(
        "read_bytes = \"2*T*H + 2*H\"",
        "read_bytes = \"2*T*H + 4*H\"",
    );
    std::fs::write(&f, t).unwrap();
    let s2 = Suite::load(SuiteSource::Dir(tmp.join("problems"))).unwrap();
    let rep = import::import(&s2, &dir, None).unwrap();
    assert!(
        rep.disagreements
            .iter()
            .any(|d| d.operator == "rms_norm" && d.what == "Q_read"),
        "{:?}",
        rep.disagreements
    );
    assert!(
        rep.disagreements
            .iter()
            .any(|d| d.operator == "rms_norm" && d.what == "parameters" && d.shape == Some(0))
    );
    // The command says so with its exit code, like diff: 1 on differences, 0 on agreement.
    let code = |ws: &Path| {
        bin()
            .arg("import-atrex-bench")
            .arg(&dir)
            .arg("--workspace")
            .arg(ws)
            .output()
            .unwrap()
            .status
            .code()
    };
    assert_eq!(code(&root()), Some(0));
    assert_eq!(code(&tmp), Some(1));
    // --write restores the shapes from the benchmark.
    let rep = import::import(&s2, &dir, Some(&tmp.join("problems"))).unwrap();
    assert!(rep.written.iter().any(|w| w.contains("rms_norm")));
    let s3 = Suite::load(SuiteSource::Dir(tmp.join("problems"))).unwrap();
    let p = s3.problem("rms_norm").unwrap();
    assert_eq!(p.shapes.len(), 56);
    // ... as a small diff: the parameters keep the file's order, so only the line changed by
    // hand above (the formula, which --write leaves alone) differs from the original.
    let orig = std::fs::read_to_string(root().join("problems/rms_norm/problem.toml")).unwrap();
    let now = std::fs::read_to_string(&f).unwrap();
    let differ: Vec<(&str, &str)> = orig
        .lines()
        .zip(now.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(orig.lines().count(), now.lines().count());
    assert_eq!(differ.len(), 1, "{differ:?}");
    assert!(differ[0].1.contains("4*H"), "{differ:?}");
    assert!(
        !import::compare_op(
            p,
            &import::read_bench_op(&dir.join("data"), "rms_norm").unwrap()
        )
        .iter()
        .any(|d| d.what == "parameters")
    );
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "atrex-test-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

fn bin() -> Command {
    Command::new(common::exe())
}

#[test]
fn suite_json_lists_operators_in_descending_weight() {
    let out = bin()
        .args(["suite", "--json", "--shapes", "--hardware", "H20"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["hardware"], "H20");
    let ops = d["operators"].as_array().unwrap();
    assert_eq!(ops.len(), 30);
    let shapes: usize = ops
        .iter()
        .map(|o| o["shapes"].as_array().unwrap().len())
        .sum();
    assert_eq!(shapes, 440);
    let w: Vec<f64> = ops.iter().map(|o| o["weight"].as_f64().unwrap()).collect();
    assert!(w.windows(2).all(|p| p[0] >= p[1]));
    assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    assert_eq!(ops[0]["name"], "unified_attention");
    let s0 = &ops[0]["shapes"][0];
    for k in [
        "id",
        "params",
        "w_flops",
        "q_read_bytes",
        "q_write_bytes",
        "sol_ms",
        "bottleneck",
    ] {
        assert!(s0.get(k).is_some(), "missing {k}");
    }
    // Decode view renormalizes over decode operators only.
    let out = bin()
        .args(["suite", "--json", "--phase", "decode"])
        .current_dir(root())
        .output()
        .unwrap();
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ops = d["operators"].as_array().unwrap();
    assert!(
        ops.iter()
            .all(|o| o["phase"].as_str().unwrap().contains("decode"))
    );
    assert!(ops.iter().all(|o| o["name"] != "attention_forward"));
    let sum: f64 = ops.iter().map(|o| o["weight"].as_f64().unwrap()).sum();
    assert!((sum - 1.0).abs() < 1e-9);
}

#[test]
fn unknown_hardware_is_a_clear_error() {
    let out = bin()
        .args(["suite", "--hardware", "Z80"])
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("unknown hardware `Z80`") && e.contains("H200"),
        "{e}"
    );
}

/// With no settings file and the repository's workspace nothing is wrong (a GPU or none):
/// doctor exits 0 and names the workspace; it never prints a key.
#[test]
fn doctor_exits_zero_when_nothing_is_wrong_and_names_the_workspace() {
    let cfg = tempdir("doctor-no-config");
    let out = bin()
        .args(["doctor"])
        .env("ATREX_TUI_CONFIG_DIR", &cfg)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(
        o.contains("workspace:") && o.contains("current directory"),
        "{o}"
    );
    let out = bin()
        .args(["doctor", "--json"])
        .env("ATREX_TUI_CONFIG_DIR", &cfg)
        .env("OPENAI_API_KEY", "sk-secret-value")
        .current_dir(root())
        .output()
        .unwrap();
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(!o.contains("sk-secret-value"), "doctor printed a key");
    let d: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert!(d.get("gpu").is_some() && d.get("terminal_colours").is_some());
}

#[test]
fn workspace_flag_and_embedded_fallback() {
    let tmp = tempdir("ws");
    let out = bin()
        .args(["suite", "--json"])
        .current_dir(&tmp)
        .env("XDG_DATA_HOME", tmp.join("data"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["suite"], "built-in suite");
    assert_eq!(d["operators"].as_array().unwrap().len(), 30);
    let out = bin()
        .args(["doctor", "--workspace"])
        .arg(&tmp)
        .current_dir(root())
        .output()
        .unwrap();
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(o.contains("--workspace"), "{o}");
}

#[test]
fn a_calibrated_profile_uses_the_measured_bandwidth() {
    let cache = tempdir("cal");
    std::fs::create_dir_all(cache.join("atrex-tui")).unwrap();
    std::fs::write(
        cache.join("atrex-tui/calibration-NVIDIA_H200.json"),
        r#"{"gpu":"NVIDIA H200","hardware_key":"H200","copy_bytes_per_s":4.0e12}"#,
    )
    .unwrap();
    let sol = |hw: &str| -> f64 {
        let out = bin()
            .args(["suite", "--json", "--shapes", "--hardware", hw])
            .env("XDG_CACHE_HOME", &cache)
            .current_dir(root())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let op = d["operators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == "rms_norm")
            .unwrap()
            .clone();
        op["shapes"][0]["sol_ms"].as_f64().unwrap()
    };
    let (datasheet, measured) = (sol("H200"), sol("H200@calibrated"));
    assert!(
        ((measured / datasheet) - 4.8 / 4.0).abs() < 1e-9,
        "{datasheet} {measured}"
    );
    // Without a calibration there is no such profile.
    let empty = tempdir("nocal");
    let out = bin()
        .args(["suite", "--hardware", "H200@calibrated"])
        .env("XDG_CACHE_HOME", &empty)
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

/// `suite` shows where the suite stands: the shipped H200 standing in a fresh workspace (S_agg
/// strict and under the benchmark's rule as docs/baselines.md prints them, every operator
/// measured on the day its record says, marked shipped), stale on another profile, a workspace record over it, and a bad
/// standing file named and ignored.
#[test]
fn suite_json_shows_the_standing() {
    let tmp = tempdir("standing");
    let json = |args: &[&str]| -> (serde_json::Value, String) {
        let out = bin()
            .args(["suite", "--json", "--workspace"])
            .arg(&tmp)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            serde_json::from_slice(&out.stdout).unwrap(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (d, _) = json(&[]);
    let three = |v: &serde_json::Value| format!("{:.3}", v.as_f64().unwrap());
    let (strict, bench) = common::baselines::s_agg();
    assert_eq!(three(&d["s_agg"]["all"]), strict.all);
    assert_eq!(three(&d["s_agg"]["prefill"]), strict.prefill);
    assert_eq!(three(&d["s_agg"]["decode"]), strict.decode);
    // Under the benchmark's rule fp8_blockscale_fused_moe counts 0: it passes the strict level
    // on every shape and the benchmark-compatible level on none.
    let figure = |s: &str| s.parse::<f64>().unwrap();
    assert!(
        figure(&bench.all) < figure(&strict.all),
        "{bench:?} {strict:?}"
    );
    assert_eq!(three(&d["s_agg_benchmark"]["all"]), bench.all);
    assert_eq!(three(&d["s_agg_benchmark"]["prefill"]), bench.prefill);
    assert_eq!(three(&d["s_agg_benchmark"]["decode"]), bench.decode);
    let op = |d: &serde_json::Value, name: &str| {
        d["operators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .unwrap()
            .clone()
    };
    let fp8 = op(&d, "fp8_blockscale_fused_moe");
    assert_eq!(three(&fp8["s_op"]), "0.184");
    assert_eq!(fp8["s_op_benchmark"].as_f64(), Some(0.0));
    // Each record is dated by the run that measured it (docs/baselines.md).
    for (name, day) in [
        ("unified_attention", "2026-12-03"),
        ("block_scaled_mm", "2026-12-03"),
        ("fused_moe", "2026-12-03"),
        ("layer_norm", "2026-12-03"),
    ] {
        let s = &op(&d, name)["standing"];
        let measured = s["measured"].as_str().unwrap_or_default();
        assert!(measured.starts_with(day), "{name}: {measured}");
        assert_eq!(s["gpu"], "NVIDIA H200", "{name}");
    }
    let st = &d["standing"];
    assert_eq!(st["hardware"], "H200");
    assert_eq!(
        (st["measured"].as_u64(), st["stale"].as_u64()),
        (Some(30), Some(0))
    );
    assert!(
        st["source"]
            .as_str()
            .unwrap()
            .starts_with("shipped, measured 2026-12-03 on NVIDIA H200"),
        "{st}"
    );
    let ops = d["operators"].as_array().unwrap();
    for op in ops {
        let s = &op["standing"];
        for k in [
            "state",
            "stale",
            "layer",
            "kernel",
            "origin",
            "measured",
            "gpu",
            "driver",
            "mode",
            "s_op_measured",
            "passed",
            "shapes_measured",
        ] {
            assert!(s.get(k).is_some(), "{}: no standing.{k}", op["name"]);
        }
        assert_eq!(s["state"], "measured");
        assert_eq!(s["layer"], "shipped");
        assert_eq!(s["mode"], "full");
        assert_eq!(op["s_op"], s["s_op_measured"]);
        assert_eq!(op["s_op_benchmark"], s["s_op_benchmark"]);
    }
    let rms = ops.iter().find(|o| o["name"] == "rms_norm").unwrap();
    assert_eq!(three(&rms["s_op"]), "0.272");
    assert_eq!(
        rms["standing"]["kernel"],
        "knowledge/templates/rms_norm_warp_per_row.cu"
    );
    assert_eq!(rms["standing"]["passed"], 56);
    // Another profile: every shipped record is stale and counts 0.
    let (d, _) = json(&["--hardware", "H20"]);
    assert_eq!(d["s_agg"]["all"].as_f64(), Some(0.0));
    assert_eq!(d["standing"]["stale"].as_u64(), Some(30));
    let rms = &d["operators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "rms_norm")
        .unwrap()["standing"];
    assert_eq!(rms["state"], "stale");
    assert_eq!(rms["stale"][0]["key"], "hardware_differs");
    assert!(d["operators"][0]["s_op"].is_null());
    // A workspace record over the shipped one; its kernel edited since: stale.
    let text =
        std::fs::read_to_string(root().join("docs/measurements/standing-H200.json")).unwrap();
    let mut own: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut rec = own["operators"]["rms_norm"].clone();
    rec["kernel"] = "kernels/rms_norm/incumbent-000000000000.cu".into();
    own["operators"] = serde_json::json!({ "rms_norm": rec });
    own.as_object_mut().unwrap().remove("shipped");
    std::fs::create_dir_all(tmp.join("standing")).unwrap();
    std::fs::create_dir_all(tmp.join("kernels/rms_norm")).unwrap();
    std::fs::write(tmp.join("standing/H200.json"), own.to_string()).unwrap();
    std::fs::write(
        tmp.join("kernels/rms_norm/incumbent-000000000000.cu"),
        "// edited\n",
    )
    .unwrap();
    let (d, _) = json(&[]);
    let rms = d["operators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "rms_norm")
        .unwrap()
        .clone();
    assert_eq!(rms["standing"]["layer"], "workspace");
    assert_eq!(rms["standing"]["state"], "stale");
    assert_eq!(rms["standing"]["stale"][0]["key"], "source_changed");
    assert!(rms["s_op"].is_null());
    assert_eq!(d["standing"]["stale"].as_u64(), Some(1));
    assert!(three(&d["s_agg"]["all"]) != strict.all);
    // The text table has the same columns.
    let out = bin()
        .args(["suite", "--workspace"])
        .arg(&tmp)
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("S_op   bench  standing"), "{t}");
    assert!(
        t.contains("S_agg ")
            && t.contains(" strict · ")
            && t.contains(" benchmark rule · prefill "),
        "{t}"
    );
    assert!(t.contains("stale: source changed"), "{t}");
    assert!(t.contains("1 stale"), "{t}");
    // A corrupt standing file: named on stderr and in the JSON, ignored, left as it is.
    std::fs::write(tmp.join("standing/H200.json"), "{ corrupt").unwrap();
    let (d, err) = json(&[]);
    let f = tmp.join("standing").join("H200.json");
    assert!(err.contains(&f.display().to_string()), "{err}");
    assert_eq!(d["standing"]["problems"].as_array().unwrap().len(), 1);
    assert_eq!(three(&d["s_agg"]["all"]), strict.all);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "{ corrupt");
}

/// `suite`'s text names both S_agg figures of a fresh workspace — the strict level's and the
/// benchmark's rule's — and each operator's S_op under both.
#[test]
fn suite_text_shows_s_agg_under_both_rules() {
    let tmp = tempdir("both-rules");
    let out = bin()
        .args(["suite", "--workspace"])
        .arg(&tmp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = String::from_utf8_lossy(&out.stdout);
    let (s, b) = common::baselines::s_agg();
    let want = format!(
        "S_agg {} strict · {} benchmark rule · prefill {}/{} · decode {}/{} (strict/benchmark rule) · standing H200: shipped, measured 2026-12-03 on NVIDIA H200",
        s.all, b.all, s.prefill, b.prefill, s.decode, b.decode
    );
    assert!(t.contains(&want), "{want}\n{t}");
    let fp8 = t
        .lines()
        .find(|l| l.starts_with("fp8_blockscale_fused_moe "))
        .unwrap();
    assert!(
        fp8.contains("  0.184   0.000  2026-12-03 NVIDIA H200"),
        "{fp8}"
    );
    let unified = t
        .lines()
        .find(|l| l.starts_with("unified_attention "))
        .unwrap();
    assert!(
        unified.contains("  0.430   0.430  2026-12-03 NVIDIA H200"),
        "{unified}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
