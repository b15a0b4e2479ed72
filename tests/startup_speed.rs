//! The first minute's figures, from the real binary in a child process (docs/performance.md):
//! the first frame of a new session (the built-in suite and the shipped standing) and of a
//! recorded session of 100,000 events, and `replay --json` of that session: wall-clock and CPU
//! milliseconds and the peak resident memory (VmHWM). The figures are printed; the assertions
//! are regression bounds well above the goals (50 ms and 500 ms to a first frame, 64 MiB for the
//! large session), on CPU time so that a busy machine does not fail them.

mod common;

use atrex_tui::session::{Record, SessionEvent, parse_line};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("atrex-speed-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A session of `events` events: the recorded tuner session (sessions/demo-agent-tuner.jsonl)
/// over and over, each repetition with revisions, measurements and times of its own, written as
/// the TUI writes its sessions.
fn long_session(path: &Path, events: usize) {
    let demo = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions/demo-agent-tuner.jsonl"),
    )
    .unwrap();
    let demo: Vec<Record> = demo
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| parse_line(l).unwrap())
        .collect();
    let revs = demo
        .iter()
        .filter_map(|r| match r.event {
            SessionEvent::Revision { rev, .. } => Some(rev),
            _ => None,
        })
        .max()
        .unwrap()
        + 1;
    let mids = demo
        .iter()
        .filter_map(|r| match r.event {
            SessionEvent::MeasureStart { mid, .. } => Some(mid),
            _ => None,
        })
        .max()
        .unwrap();
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for (n, i) in (0..events).zip((0..demo.len()).cycle()) {
        let round = (n / demo.len()) as u32;
        let mut r = demo[i].clone();
        r.seq = n as u64 + 1;
        r.t += round as f64 * 3600.0;
        let (dr, dm) = (round * revs, round as u64 * mids);
        match &mut r.event {
            SessionEvent::Revision { rev, parent, .. } => {
                *rev += dr;
                if let Some(p) = parent {
                    *p += dr;
                }
            }
            SessionEvent::MeasureStart { rev, mid, .. }
            | SessionEvent::Compiled { rev, mid, .. }
            | SessionEvent::ShapeResult { rev, mid, .. }
            | SessionEvent::KernelOutput { rev, mid, .. }
            | SessionEvent::MeasureDone { rev, mid, .. } => {
                *rev += dr;
                *mid += dm;
            }
            SessionEvent::Decision { rev, .. } => *rev += dr,
            _ => {}
        }
        serde_json::to_writer(&mut out, &r).unwrap();
        out.write_all(b"\n").unwrap();
    }
}

/// Runs the binary in `ws` and reads the JSON document it prints.
fn run(ws: &Path, args: &[&str]) -> Value {
    let cfg = ws.join("config.toml");
    std::fs::write(&cfg, "").unwrap();
    let out = Command::new(common::exe())
        .arg("--workspace")
        .arg(ws)
        .arg("--config")
        .arg(&cfg)
        .args(args)
        .env("ATREX_TUI_CONFIG_DIR", ws)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no `{key}` in {v}"))
}

#[test]
fn first_frames_and_replay_of_a_long_session_stay_fast_and_small() {
    let ws = tmp("ws");
    // A new session: the built-in suite and the shipped standing.
    let fresh = run(&ws, &["--first-frame"]);
    let screen = fresh["screen"].as_array().unwrap();
    assert_eq!(screen.len(), 50);
    assert!(
        screen
            .iter()
            .any(|l| l.as_str().unwrap().contains("standing")),
        "the first frame shows the standing"
    );
    println!(
        "first frame (new session): {:.1} ms, {:.1} ms CPU, peak RSS {:.1} MiB",
        num(&fresh, "first_frame_ms"),
        num(&fresh, "cpu_ms"),
        num(&fresh, "peak_rss_kib") / 1024.0
    );
    assert!(num(&fresh, "cpu_ms") < 250.0, "{fresh}");

    let file = ws.join("long.jsonl");
    long_session(&file, 100_000);
    let mib = std::fs::metadata(&file).unwrap().len() as f64 / (1 << 20) as f64;
    let f = file.to_str().unwrap();
    let replay = run(&ws, &["replay", f, "--first-frame"]);
    println!(
        "first frame (replay, 100,000 events, {mib:.0} MiB): {:.1} ms, {:.1} ms CPU, peak RSS {:.1} MiB",
        num(&replay, "first_frame_ms"),
        num(&replay, "cpu_ms"),
        num(&replay, "peak_rss_kib") / 1024.0
    );
    let bar = replay["screen"].as_array().unwrap().iter().any(|l| {
        l.as_str()
            .unwrap()
            .contains("event 100000/100000 · shape_result")
    });
    assert!(bar, "the replay opens at its last event: {replay}");
    assert!(
        num(&replay, "cpu_ms") < 2500.0,
        "{}",
        num(&replay, "cpu_ms")
    );
    assert!(num(&replay, "peak_rss_kib") < 96.0 * 1024.0);

    let json = run(&ws, &["replay", f, "--json", "--timing"]);
    assert_eq!(json["events"], 100_000);
    let t = &json["timing"];
    println!(
        "replay --json (100,000 events): load {:.1} ms, rebuild {:.1} ms, peak RSS {:.1} MiB",
        num(t, "load_ms"),
        num(t, "rebuild_ms"),
        num(t, "peak_rss_kib") / 1024.0
    );
    assert!(num(t, "peak_rss_kib") < 96.0 * 1024.0);
    let _ = std::fs::remove_dir_all(&ws);
}
