//! `atrex-tui agent`: the headless loop's command line. Without a GPU it exits 2 with one line;
//! configuration errors are clear; on a GPU (ignored here) the tuner improves rms_norm.

mod common;

use std::path::PathBuf;
use std::process::Command;

fn has_gpu() -> bool {
    let out = Command::new(common::exe())
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    d["gpu"].get("error").is_none()
}

fn temp_ws(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("atrex-agent-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn agent(ws: &PathBuf, args: &[&str]) -> std::process::Output {
    Command::new(common::exe())
        .arg("agent")
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .env("ATREX_TUI_CONFIG_DIR", ws.join("config"))
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ATREX_MODEL")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .unwrap()
}

#[test]
fn agent_without_a_gpu_exits_2_with_one_clear_line_and_records_nothing() {
    if has_gpu() {
        eprintln!("SKIPPED: this machine has a GPU");
        return;
    }
    let ws = temp_ws("nogpu");
    let out = agent(&ws, &["rms_norm", "--max-iters", "2", "--auto"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(e.contains("no GPU") && !e.contains("panicked"), "{e}");
    assert!(!ws.join("sessions").exists(), "no session without a GPU");
    std::fs::remove_dir_all(&ws).ok();
}

#[test]
fn agent_configuration_errors_are_clear() {
    let ws = temp_ws("cfg");
    let out = agent(&ws, &["rms_norm", "--backend", "openai"]);
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("ATREX_MODEL"), "{e}");
    let out = agent(&ws, &["no_such_op"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown operator"));
    // A key in a config file others can read is refused, and never printed.
    let cfg = ws.join("config");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        "[agent]\nbackend = \"anthropic\"\nanthropic_model = \"m\"\nanthropic_api_key = \"sk-ant-api03-SECRETSECRETSECRET\"\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            cfg.join("config.toml"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let out = agent(&ws, &["rms_norm"]);
        assert_eq!(out.status.code(), Some(1));
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("chmod 600"), "{e}");
        assert!(!e.contains("SECRET"), "{e}");
    }
    std::fs::remove_dir_all(&ws).ok();
}

/// On the H200: the tuner in auto mode (starting, as every agent does, from the standing's
/// incumbent — for rms_norm an already tuned template) never leaves the operator worse than it
/// started: a revision is accepted only with an S_op gain above the noise, else the starting
/// kernel stays the incumbent.
#[test]
#[ignore]
fn gpu_tuner_improves_rms_norm() {
    let ws = temp_ws("gpu");
    let out = agent(
        &ws,
        &[
            "rms_norm",
            "--backend",
            "tuner",
            "--max-iters",
            "12",
            "--auto",
            "--json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let base = d["baseline_s_op"].as_f64().unwrap();
    let inc = d["incumbent_s_op"].as_f64().unwrap();
    eprintln!(
        "rms_norm: baseline S_op {base:.4} → incumbent {inc:.4} ({})",
        d["stop_reason"]
    );
    assert!(inc >= base, "{d}");
    let sessions: Vec<_> = std::fs::read_dir(ws.join("sessions"))
        .unwrap()
        .filter_map(|e| e.ok())
        // Each session's `.lock` stays beside it.
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert_eq!(sessions.len(), 1);
}

/// On a GPU machine: two agents at once (the tuner on rms_norm and silu_and_mul, auto mode)
/// over the local workers, both recording into one session; each improves on or keeps its
/// baseline and every accepted revision came with its A B B A runs.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_two_agents_at_once() {
    let ws = temp_ws("gpu-two");
    let out = agent(
        &ws,
        &[
            "rms_norm,silu_and_mul",
            "--backend",
            "tuner",
            "--max-iters",
            "6",
            "--auto",
            "--json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let agents = d["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2);
    for a in agents {
        let base = a["baseline_s_op"].as_f64().unwrap();
        let inc = a["incumbent_s_op"].as_f64().unwrap();
        eprintln!(
            "{}: baseline S_op {base:.4} → incumbent {inc:.4} ({})",
            a["operator"], a["stop_reason"]
        );
        assert!(inc >= base * 0.99, "{a}");
    }
    eprintln!("two agents: wall {:.0} s on {}", d["wall_s"], d["workers"]);
    let sessions: Vec<_> = std::fs::read_dir(ws.join("sessions"))
        .unwrap()
        .filter_map(|e| e.ok())
        // Each session's `.lock` stays beside it.
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert_eq!(sessions.len(), 1, "one session for both agents");
}
