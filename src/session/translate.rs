//! The one translation from a measurement job's events (the worker's, and a lost worker) to
//! session events, used by every writer (the TUI, `measure`, the agent). Compiler logs and kernel
//! output are scrubbed of secrets here; the writer scrubs each line again.

use super::SessionEvent;
use crate::contract::protocol::Event;
use crate::contract::runner::JobEvent;

/// Session events for one job event of a measurement (`mid`) of revision `rev` of `op`.
pub fn job_events(op: &str, rev: u32, mid: u64, ev: &JobEvent) -> Vec<SessionEvent> {
    match ev {
        JobEvent::Worker(Event::Compiled {
            which,
            ok,
            diagnostics,
            log,
            ..
        }) if which == "candidate" => {
            vec![SessionEvent::Compiled {
                op: op.into(),
                rev,
                mid,
                ok: *ok,
                diagnostics: diagnostics.clone(),
                log: crate::session::scrub(log),
            }]
        }
        JobEvent::Worker(Event::Compiled {
            which,
            ok: false,
            log,
            ..
        }) => vec![SessionEvent::Error {
            op: Some(op.into()),
            message: format!(
                "the {which} kernel failed to compile: {}",
                log.lines().next().unwrap_or("")
            ),
        }],
        JobEvent::Worker(Event::ShapeDone { result, .. }) => {
            vec![SessionEvent::ShapeResult {
                op: op.into(),
                rev,
                mid,
                result: result.clone(),
            }]
        }
        JobEvent::Worker(Event::Output {
            shape,
            text,
            dropped,
            ..
        }) => vec![SessionEvent::KernelOutput {
            op: op.into(),
            rev,
            mid,
            shape: *shape,
            text: crate::session::scrub(text),
            dropped: *dropped,
        }],
        JobEvent::Worker(Event::Done {
            verdict, message, ..
        }) => {
            vec![SessionEvent::MeasureDone {
                op: op.into(),
                rev,
                mid,
                verdict: verdict.clone(),
                message: message.clone(),
            }]
        }
        JobEvent::Worker(Event::Fault { message, .. })
        | JobEvent::Worker(Event::Error { message, .. }) => {
            vec![SessionEvent::Error {
                op: Some(op.into()),
                message: message.clone(),
            }]
        }
        JobEvent::WorkerLost { verdict, message } => vec![
            SessionEvent::Error {
                op: Some(op.into()),
                message: format!("worker lost: {message}"),
            },
            SessionEvent::MeasureDone {
                op: op.into(),
                rev,
                mid,
                verdict: verdict.clone(),
                message: Some(message.clone()),
            },
        ],
        JobEvent::Worker(_) => vec![],
    }
}
