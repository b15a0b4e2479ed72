//! Recording measurements into a session headlessly: `atrex-tui measure` (a hand edit measured
//! and recorded without the TUI).

use super::{Author, DecidedBy, Decision, Model, Record, SessionEvent, SessionWriter};
use crate::engine::client::{JobEvent, WorkerClient};
use crate::engine::protocol::*;
use crate::suite::{Problem, Suite};

/// Session events for one job event of a measurement (`mid`) of revision `rev` of `op`.
pub fn session_events(op: &str, rev: u32, mid: u64, ev: &JobEvent) -> Vec<SessionEvent> {
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
                log: log.clone(),
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

/// A session being written headlessly: the writer and the state rebuilt from its events.
pub struct Recorder {
    pub writer: SessionWriter,
    pub model: Model,
}

impl Recorder {
    pub fn append(&mut self, ev: SessionEvent) -> Result<Record, String> {
        let rec = self.writer.append(ev)?;
        self.model.apply(&rec);
        Ok(rec)
    }

    /// Records a revision and returns its number.
    pub fn revision(
        &mut self,
        p: &Problem,
        author: Author,
        parent: Option<u32>,
        rationale: &str,
        source: &str,
        via: Option<&str>,
    ) -> Result<u32, String> {
        let rev = self
            .model
            .ops
            .get(&p.name)
            .map(|o| {
                if o.revisions.iter().any(|r| r.recorded) {
                    o.next_rev()
                } else {
                    0
                }
            })
            .unwrap_or(0);
        self.append(SessionEvent::Revision {
            op: p.name.clone(),
            rev,
            parent,
            author,
            rationale: rationale.into(),
            source: source.into(),
            via: via.map(|s| s.into()),
            request_id: None,
            tokens_in: None,
            tokens_out: None,
            category: None,
            knowledge: Vec::new(),
        })?;
        Ok(rev)
    }

    /// Measures a recorded revision through the worker and records every result.
    pub async fn measure(
        &mut self,
        client: &WorkerClient,
        suite: &Suite,
        p: &Problem,
        rev: u32,
        mode: Mode,
        hw: Option<&crate::suite::hardware::HardwareProfile>,
        progress: bool,
    ) -> Result<Option<f64>, String> {
        let source = self
            .model
            .ops
            .get(&p.name)
            .and_then(|o| o.rev(rev))
            .map(|r| r.source.clone())
            .ok_or_else(|| format!("{} v{rev} is not in the session", p.name))?;
        let reference = crate::suite::kernels::suite_kernel(suite, p, "reference.cu")?;
        let ids: Vec<u32> = p.shapes.iter().map(|s| s.id).collect();
        let job = crate::engine::build_job(
            p,
            Source {
                name: format!("{} v{rev}", p.name),
                code: source,
                defines: Default::default(),
            },
            Some(reference),
            &ids,
            JobKind::All,
            mode,
            hw,
        )?;
        let mid = self.model.last_mid + 1;
        self.append(SessionEvent::MeasureStart {
            op: p.name.clone(),
            rev,
            mid,
            mode: if mode == Mode::Quick {
                "quick".into()
            } else {
                "full".into()
            },
        })?;
        let (_, mut rx) = client.submit(job);
        while let Some(ev) = rx.recv().await {
            if let (
                true,
                JobEvent::Worker(Event::Progress {
                    stage,
                    shape,
                    done,
                    total,
                    ..
                }),
            ) = (progress, &ev)
            {
                eprint!(
                    "\r{} v{rev}: {stage} shape {} ({}/{total})      ",
                    p.name,
                    shape.map(|s| s.to_string()).unwrap_or_default(),
                    done + 1
                );
            }
            let end = matches!(
                ev,
                JobEvent::WorkerLost { .. } | JobEvent::Worker(Event::Done { .. })
            );
            for se in session_events(&p.name, rev, mid, &ev) {
                self.append(se)?;
            }
            if end {
                break;
            }
        }
        if progress {
            eprint!("\r{:60}\r", "");
        }
        Ok(self
            .model
            .ops
            .get(&p.name)
            .and_then(|o| o.rev(rev))
            .and_then(|r| r.verdict().score()))
    }

    pub fn decide(
        &mut self,
        p: &Problem,
        rev: u32,
        decision: Decision,
        by: DecidedBy,
    ) -> Result<(), String> {
        self.append(SessionEvent::Decision {
            op: p.name.clone(),
            rev,
            decision,
            by,
        })?;
        Ok(())
    }
}
