//! `atrex-tui worker --simulate`: a worker without a GPU that follows the protocol, for tests of
//! the client's supervision (crash, hang, restart, protocol errors) and of the worker's stream
//! isolation. It never reports a measurement: shapes it reports are `unchecked` with no timing,
//! and it names itself "simulated" in `Hello`.
//!
//! The candidate's name selects a behaviour: `crash` (abort at once), `hang`, `print` (write a
//! forged `shape_done` line and plain text to fd 1, as a kernel's printf would), `flood` (40 KiB
//! of text per shape), `shapes` (one
//! result per shape), `crash-shape-N` (abort when shape N starts; `crash-shape-all`: on every shape), `duplicate` (a second result
//! for the first shape), `foreign` (a result for a shape not in the job). Anything else: `Done`
//! with no results. `--simulate=NAME` makes NAME the behaviour of a candidate whose name selects
//! none (for whole commands run on simulated workers: `--simulate=shapes`).
//!
//! Its `hello` describes a simulated device with the index it was started for: the GPU model is
//! `ATREX_SIM_GPU` (default "Simulated GPU") and the host `ATREX_SIM_HOST` (default this
//! machine's name), so that tests can stand in for pools of several machines and models.
//! `ATREX_SIM_SHAPE_MS` (default 0) is how long each shape takes before its result, so that a
//! test can cut a worker's connection or allocation while it is on a shape.

use super::stdio::{self, Capture};
use crate::contract::protocol::*;
use std::io::{BufRead, Write};

struct Sim {
    out: stdio::Protocol,
    capture: Capture,
    device: u32,
    /// How long each shape takes (`ATREX_SIM_SHAPE_MS`).
    shape_time: std::time::Duration,
    /// The behaviour of a candidate whose name selects none.
    default: String,
}

/// The words of a candidate's name that select a behaviour.
const BEHAVIOURS: [&str; 7] = [
    "crash",
    "hang",
    "print",
    "flood",
    "shapes",
    "duplicate",
    "foreign",
];

impl Sim {
    fn send(&mut self, e: &Event) {
        if let Ok(line) = serde_json::to_string(e) {
            let _ = self.out.write_all(format!("{line}\n").as_bytes());
            let _ = self.out.flush();
        }
    }

    fn result(&mut self, id: u64, shape: u32) {
        self.send(&Event::ShapeDone {
            id,
            result: ShapeResult {
                shape,
                verdict: Verdict::Unchecked,
                checks: vec![],
                bench_ok: false,
                strict_ok: false,
                seeds_checked: 0,
                timing: None,
                sol_ms: 0.0,
                s: None,
                message: Some("simulated".into()),
                device: Some(self.device),
                worker: None,
            },
        });
    }

    fn job(&mut self, id: u64, job: &Job) {
        let mut name = job.candidate.name.clone();
        if !BEHAVIOURS.iter().any(|b| name.contains(b)) {
            name = format!("{name} {}", self.default);
        }
        let shapes: Vec<u32> = job.shapes.iter().map(|s| s.id).collect();
        self.capture.new_job();
        self.send(&Event::Progress {
            id,
            stage: "check".into(),
            shape: shapes.first().copied(),
            done: 0,
            total: shapes.len(),
        });
        if name.contains("crash-shape-")
            || name.contains("shapes")
            || name.contains("print")
            || name.contains("flood")
        {
            let crash_at: Option<u32> = name
                .split("crash-shape-")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok());
            for (k, s) in shapes.iter().enumerate() {
                self.send(&Event::Progress {
                    id,
                    stage: "check seed 1/1".into(),
                    shape: Some(*s),
                    done: k,
                    total: shapes.len(),
                });
                if crash_at == Some(*s) || name.contains("crash-shape-all") {
                    eprintln!("simulated worker: aborting on shape {s}");
                    std::process::abort();
                }
                std::thread::sleep(self.shape_time);
                if name.contains("print") {
                    // What a hostile kernel's printf writes: a forged event and some text.
                    let forged = Event::ShapeDone {
                        id,
                        result: ShapeResult {
                            shape: *s,
                            verdict: Verdict::Pass,
                            checks: vec![],
                            bench_ok: true,
                            strict_ok: true,
                            seeds_checked: 5,
                            timing: None,
                            sol_ms: 1.0,
                            s: Some(0.95),
                            message: None,
                            device: None,
                            worker: None,
                        },
                    };
                    println!("{}", serde_json::to_string(&forged).unwrap_or_default());
                    println!("debug: row 0 sum = 1.5\x1b[2J");
                }
                if name.contains("flood") {
                    // 40 KiB of printf per shape: under one job's output bound, but not
                    // several shapes' worth.
                    println!("{}", "x".repeat(40 * 1024));
                }
                if name.contains("print") || name.contains("flood") {
                    let p = self.capture.take();
                    if !p.is_empty() {
                        let mut text = p.text;
                        if p.dropped > 0 {
                            text.push_str(&crate::worker::stdio::not_kept_note(p.dropped));
                        }
                        self.send(&Event::Output {
                            id,
                            shape: Some(*s),
                            text,
                            dropped: p.dropped,
                        });
                    }
                }
                self.result(id, *s);
            }
            self.send(&Event::Done {
                id,
                verdict: Verdict::Pass,
                message: None,
            });
            return;
        }
        if name.contains("duplicate") || name.contains("foreign") {
            let s = if name.contains("foreign") {
                999
            } else {
                shapes.first().copied().unwrap_or(0)
            };
            self.result(id, s);
            self.result(id, s);
            self.send(&Event::Done {
                id,
                verdict: Verdict::Pass,
                message: None,
            });
            return;
        }
        if name.contains("crash") {
            eprintln!("simulated worker: aborting as asked");
            std::process::abort();
        }
        if name.contains("hang") {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        self.send(&Event::Done {
            id,
            verdict: Verdict::Cancelled,
            message: Some("simulated worker: nothing measured".into()),
        });
    }
}

/// The simulated device of a worker started for `device`.
fn device_info(device: u32) -> DeviceInfo {
    DeviceInfo {
        index: device,
        name: std::env::var("ATREX_SIM_GPU").unwrap_or_else(|_| "Simulated GPU".into()),
        cc_major: 9,
        cc_minor: 0,
        sm_count: 132,
        l2_bytes: 50 << 20,
        memory_bytes: 141 << 30,
        sm_clock_mhz: 1980,
        mem_clock_mhz: 3201,
        arch: "sm_90a".into(),
    }
}

pub fn main(device: u32, default: &str) -> i32 {
    let (out, capture) = match stdio::isolate() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("atrex-tui worker --simulate: {e}");
            return 1;
        }
    };
    let shape_ms = std::env::var("ATREX_SIM_SHAPE_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let mut sim = Sim {
        out,
        capture,
        device,
        shape_time: std::time::Duration::from_millis(shape_ms),
        default: default.to_string(),
    };
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str::<Request>(&line) {
            Ok(Request::Hello { id }) => sim.send(&Event::Hello {
                id,
                protocol: PROTOCOL_VERSION,
                tool_version: Some(TOOL_VERSION.into()),
                host: Some(std::env::var("ATREX_SIM_HOST").unwrap_or_else(|_| super::hostname())),
                probe: ProbeInfo {
                    driver_version: "simulated".into(),
                    nvrtc_version: None,
                    devices: vec![device_info(device)],
                },
                device: Some(device_info(device)),
            }),
            Ok(Request::Job { id, job }) => sim.job(id, &job),
            Ok(Request::Calibrate { id }) => sim.send(&Event::Error {
                id,
                message: "simulated worker has no GPU".into(),
            }),
            Ok(Request::Shutdown) => break,
            Ok(Request::Cancel { .. }) => {}
            Err(e) => sim.send(&Event::Error {
                id: 0,
                message: format!("malformed request: {e}"),
            }),
        }
    }
    0
}
