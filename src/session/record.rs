//! A session written headlessly (`measure`, `agent`): every event numbered by the one
//! recorder, appended to the file (when there is one) and applied to the state; and the
//! measurement of a recorded revision through the worker.

use super::recorder::Recorder;
use super::{Author, DecidedBy, Decision, Model, Record, SessionEvent, SessionWriter};
use crate::contract::protocol::*;
use crate::contract::runner::{JobEvent, Runner};
use crate::suite::{Problem, Suite};

/// Why an event was not recorded, or a revision not measured.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The session file (the event was applied to the state all the same).
    #[error(transparent)]
    Write(#[from] super::error::SessionError),
    #[error("{operator} v{rev} is not in the session")]
    NoRevision { operator: String, rev: u32 },
    #[error(transparent)]
    Reference(#[from] crate::contract::kernels::KernelError),
    #[error(transparent)]
    Job(#[from] crate::contract::job::JobError),
}

crate::error::text_at_the_edge!(RecordingError);

/// A session written headlessly (`measure`, `agent`): every event numbered by the recorder,
/// appended to the file (when there is one) and applied to the state.
pub struct Recording {
    pub model: Model,
    pub recorder: Recorder,
    pub writer: Option<SessionWriter>,
}

impl Recording {
    pub fn new(model: Model, writer: Option<SessionWriter>) -> Recording {
        Recording {
            recorder: Recorder::for_model(&model),
            model,
            writer,
        }
    }

    /// Records one event: numbered, written, applied. A write error is returned after the
    /// event was applied to the state (nothing shown is lost; the file stops where it failed).
    /// A revision the event refers to that the session does not hold yet (the starting kernel,
    /// v0) is recorded just before it.
    pub fn append(&mut self, ev: SessionEvent) -> Result<Record, RecordingError> {
        if let Some(first) = self.model.unrecorded_referent(&ev) {
            self.append(first)?;
        }
        let rec = self.recorder.stamp(ev);
        self.model.apply(&rec);
        if let Some(w) = self.writer.as_mut() {
            w.write(&rec)?;
        }
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
    ) -> Result<u32, RecordingError> {
        // The suite baseline is revision 0; every other revision takes the next number.
        let rev = match author {
            Author::Baseline | Author::Incumbent => 0,
            _ => self.recorder.ids().next_rev(&p.name),
        };
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
    #[allow(
        clippy::too_many_arguments,
        reason = "one measurement's inputs, as the `measure` command passes them"
    )]
    pub async fn measure(
        &mut self,
        client: &dyn Runner,
        suite: &Suite,
        p: &Problem,
        rev: u32,
        mode: Mode,
        hw: Option<&crate::suite::hardware::HardwareProfile>,
        progress: bool,
    ) -> Result<Option<f64>, RecordingError> {
        let source = self
            .model
            .ops
            .get(&p.name)
            .and_then(|o| o.rev(rev))
            .map(|r| r.source.clone())
            .ok_or_else(|| RecordingError::NoRevision {
                operator: p.name.clone(),
                rev,
            })?;
        let reference = crate::contract::kernels::suite_kernel(suite, p, "reference.cu")?;
        let ids: Vec<u32> = p.shapes.iter().map(|s| s.id).collect();
        let job = crate::contract::job::build_job(
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
        let mid = self.recorder.ids().next_mid();
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
            for se in super::translate::job_events(&p.name, rev, mid, &ev) {
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
    ) -> Result<(), RecordingError> {
        self.append(SessionEvent::Decision {
            op: p.name.clone(),
            rev,
            decision,
            by,
        })?;
        Ok(())
    }
}
