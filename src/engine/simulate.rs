//! `atrex-tui worker --simulate`: a worker without a GPU that follows the protocol, for tests of
//! the client's supervision (crash, hang, restart). It never reports a measurement: jobs end with
//! `Done` and no shape results, and it names itself "simulated" in `Hello`.

use super::protocol::*;
use std::io::{BufRead, Write};

fn send(e: &Event) {
    if let Ok(line) = serde_json::to_string(e) {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    }
}

pub fn main() -> i32 {
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str::<Request>(&line) {
            Ok(Request::Hello { id }) => send(&Event::Hello {
                id,
                protocol: PROTOCOL_VERSION,
                probe: ProbeInfo {
                    driver_version: "simulated".into(),
                    nvrtc_version: None,
                    devices: vec![],
                },
                device: None,
            }),
            Ok(Request::Job { id, job }) => {
                send(&Event::Progress {
                    id,
                    stage: "check".into(),
                    shape: job.shapes.first().map(|s| s.id),
                    done: 0,
                    total: job.shapes.len(),
                });
                if job.candidate.name.contains("crash") {
                    std::process::abort();
                }
                if job.candidate.name.contains("hang") {
                    loop {
                        std::thread::sleep(std::time::Duration::from_secs(3600));
                    }
                }
                send(&Event::Done {
                    id,
                    verdict: Verdict::Cancelled,
                    message: Some("simulated worker: nothing measured".into()),
                });
            }
            Ok(Request::Calibrate { id }) => send(&Event::Error {
                id,
                message: "simulated worker has no GPU".into(),
            }),
            Ok(Request::Shutdown) => break,
            Ok(Request::Cancel { .. }) => {}
            Err(e) => send(&Event::Error {
                id: 0,
                message: format!("malformed request: {e}"),
            }),
        }
    }
    0
}
