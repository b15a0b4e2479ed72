//! The compiler's limits and confinement, end to end through `atrex-tui compile` (a worker
//! without a GPU compiles in its confined child) and `doctor`.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(common::exe());
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

fn run(c: &mut Command) -> (i32, String) {
    let o = c.output().unwrap();
    let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&o.stderr));
    (o.status.code().unwrap_or(-1), text)
}

/// Whether this machine compiles (NVRTC found by the worker); says SKIPPED when not.
fn compiles_here() -> bool {
    let (code, out) = run(bin().args(["compile", "rms_norm"]));
    if out.contains("libnvrtc not found") {
        eprintln!("SKIPPED: NVRTC is not installed here");
        return false;
    }
    assert_eq!(code, 0, "the baseline compiles: {out}");
    true
}

/// A template-instantiation bomb is stopped at the time limit; the compile fails with a message
/// naming it, soon after the limit, and the worker answers the next compile.
#[test]
fn a_template_bomb_is_stopped_at_the_time_limit() {
    if !compiles_here() {
        return;
    }
    let t0 = Instant::now();
    let (code, out) = run(bin().env("ATREX_COMPILE_TIMEOUT_SECS", "5").args([
        "compile",
        "rms_norm",
        "--kernel",
        "tests/kernels/hostile_compile_bomb.cu",
    ]));
    let took = t0.elapsed();
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "compile error: compile exceeded the 5 s time limit: the compiler was stopped"
        ),
        "{out}"
    );
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(25),
        "took {took:?}"
    );
}

/// A bad limit in the environment is named, not ignored.
#[test]
fn a_bad_limit_is_named() {
    if !compiles_here() {
        return;
    }
    let (code, out) = run(bin()
        .env("ATREX_COMPILE_MEMORY_GIB", "plenty")
        .args(["compile", "rms_norm"]));
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("ATREX_COMPILE_MEMORY_GIB=\"plenty\": not a positive number"),
        "{out}"
    );
}

/// `doctor` says whether compiles are confined, in text and JSON, and the two agree.
#[test]
fn doctor_says_how_compiles_are_confined() {
    // No settings file: nothing wrong, whatever the confinement (a GPU or none).
    let cfg = std::env::temp_dir().join(format!("atrex-confine-no-config-{}", std::process::id()));
    let (code, out) = run(bin().env("ATREX_TUI_CONFIG_DIR", &cfg).arg("doctor"));
    assert_eq!(code, 0, "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("compiler confinement: "))
        .unwrap_or_else(|| panic!("no confinement line: {out}"));
    let (_, json) = run(bin().args(["doctor", "--json"]));
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let c = &doc["compiler_confinement"];
    let active = c["active"].as_bool().expect("a boolean");
    if let Some(e) = c["error"].as_str() {
        assert!(!active && line.contains(e), "{line} / {c}");
        return;
    }
    if active {
        assert!(
            line.contains("Landlock ABI v") && line.contains("active"),
            "{line}"
        );
        assert!(c["confinement"]["abi"].as_i64().unwrap() >= 1, "{c}");
    } else {
        assert!(
            line.contains("compiles run with time and memory limits only"),
            "{line}"
        );
    }
    assert_eq!(
        c["text"].as_str().unwrap(),
        line.trim_start_matches("compiler confinement: ")
    );
}
