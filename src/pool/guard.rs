//! The client's checks of what a worker sends for one job, and what is kept when the worker is
//! lost mid-job.
//!
//! A worker is trusted to speak the protocol, never to be right about which job and shape an
//! event belongs to: an event for another job, a shape that is not in the job, or a second result
//! for one shape is a protocol error that ends the job — never a result. When the worker dies or
//! hangs during a shape, that shape gets the verdict (`fault` or `timeout`) with its check, if it
//! had passed one, and the job goes on with the shapes not yet measured on a restarted worker,
//! until [`MAX_CONSECUTIVE_LOST`] shapes in a row are lost.

use crate::contract::protocol::*;
use std::collections::{BTreeMap, BTreeSet};

/// Shapes lost in a row after which a job stops.
pub const MAX_CONSECUTIVE_LOST: u32 = 3;

/// An event the job does not allow: a protocol error that ends the job, never a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProtocolError {
    #[error("an event for job {event} while job {running} is running")]
    OtherJob { event: u64, running: u64 },
    #[error("an unrequested hello or calibration during a job")]
    Unrequested,
    /// `what`: the event's kind in words ("progress", "a check", …).
    #[error("{what} for shape {shape}, which is not in job {job}")]
    NotInJob {
        what: &'static str,
        shape: u32,
        job: u64,
    },
    #[error("{what} for shape {shape} after its result")]
    AfterResult { what: &'static str, shape: u32 },
    #[error("a second result for shape {shape}")]
    SecondResult { shape: u32 },
}

/// What to do after the worker was lost.
#[derive(Debug, Clone, PartialEq)]
pub struct AfterLoss {
    /// The result recorded for the shape that was running, if one was.
    pub result: Option<ShapeResult>,
    /// Shapes to run on a restarted worker; None ends the job.
    pub resume: Option<Vec<u32>>,
    /// Why the job ends, when it does.
    pub message: String,
}

#[derive(Debug)]
pub struct JobGuard {
    id: u64,
    kind: JobKind,
    shapes: Vec<u32>,
    reported: BTreeSet<u32>,
    checked: BTreeMap<u32, ShapeResult>,
    /// The shape in progress and its stage.
    current: Option<(u32, String)>,
    compiled: BTreeSet<String>,
    consecutive_lost: u32,
    first_failure: Option<(Verdict, String)>,
    /// The fault the worker reported before it exited.
    fault: Option<String>,
    /// Workers lost during this job.
    pub losses: u32,
}

impl JobGuard {
    pub fn new(id: u64, job: &Job) -> JobGuard {
        JobGuard {
            id,
            kind: job.kind,
            shapes: job.shapes.iter().map(|s| s.id).collect(),
            reported: BTreeSet::new(),
            checked: BTreeMap::new(),
            current: None,
            compiled: BTreeSet::new(),
            consecutive_lost: 0,
            first_failure: None,
            fault: None,
            losses: 0,
        }
    }

    fn in_job(&self, shape: u32, what: &'static str) -> Result<(), ProtocolError> {
        if self.shapes.contains(&shape) {
            Ok(())
        } else {
            Err(ProtocolError::NotInJob {
                what,
                shape,
                job: self.id,
            })
        }
    }

    /// Checks one event: Ok(Some) to pass on, Ok(None) to keep back, Err for a protocol error.
    pub fn accept(&mut self, ev: Event) -> Result<Option<Event>, ProtocolError> {
        if ev.id() != self.id {
            return Err(ProtocolError::OtherJob {
                event: ev.id(),
                running: self.id,
            });
        }
        match &ev {
            Event::Hello { .. } | Event::Calibration { .. } => {
                return Err(ProtocolError::Unrequested);
            }
            Event::Progress { shape, stage, .. } => {
                if let Some(s) = shape {
                    self.in_job(*s, "progress")?;
                    if self.reported.contains(s) {
                        return Err(ProtocolError::AfterResult {
                            what: "progress",
                            shape: *s,
                        });
                    }
                }
                self.current = shape.map(|s| (s, stage.clone()));
            }
            Event::Checked { result, .. } => {
                self.in_job(result.shape, "a check")?;
                if self.reported.contains(&result.shape) {
                    return Err(ProtocolError::AfterResult {
                        what: "a check",
                        shape: result.shape,
                    });
                }
                self.checked.insert(result.shape, result.clone());
                return Ok(None);
            }
            Event::ShapeDone { result, .. } => {
                self.in_job(result.shape, "a result")?;
                if !self.reported.insert(result.shape) {
                    return Err(ProtocolError::SecondResult {
                        shape: result.shape,
                    });
                }
                self.current = None;
                self.consecutive_lost = 0;
                self.note_failure(result);
            }
            Event::Tensors { shape, .. } => self.in_job(*shape, "tensors")?,
            Event::Fault { message, .. } => self.fault = Some(message.clone()),
            Event::Output { shape: Some(s), .. } => self.in_job(*s, "kernel output")?,
            // After a restart the worker compiles again (from its cache): said once.
            Event::Compiled { which, .. }
                if !self.compiled.insert(which.clone()) && self.losses > 0 =>
            {
                return Ok(None);
            }
            Event::Done { verdict, .. } => {
                // The job ends with its first failing shape, across restarts too.
                if let Some((v, m)) = &self.first_failure
                    && (*verdict == Verdict::Pass || self.losses > 0)
                {
                    return Ok(Some(Event::Done {
                        id: self.id,
                        verdict: v.clone(),
                        message: Some(m.clone()),
                    }));
                }
            }
            _ => {}
        }
        Ok(Some(ev))
    }

    fn note_failure(&mut self, r: &ShapeResult) {
        if !matches!(r.verdict, Verdict::Pass | Verdict::Unchecked) && self.first_failure.is_none()
        {
            self.first_failure = Some((
                r.verdict.clone(),
                format!(
                    "shape {}: {}",
                    r.shape,
                    r.message.clone().unwrap_or_else(|| r.verdict.name().into())
                ),
            ));
        }
    }

    /// The worker died or hung (`verdict` fault or timeout, `why` in words).
    pub fn lost(&mut self, verdict: Verdict, why: &str) -> AfterLoss {
        self.losses += 1;
        let why = match self.fault.take() {
            Some(f) => format!("{f} — {why}"),
            None => why.to_string(),
        };
        let why = why.as_str();
        let measures = !matches!(self.kind, JobKind::Compile);
        let Some((shape, stage)) = self.current.take().filter(|_| measures) else {
            return AfterLoss {
                result: None,
                resume: None,
                message: why.to_string(),
            };
        };
        let mut r = self.checked.remove(&shape).unwrap_or(ShapeResult {
            shape,
            verdict: Verdict::Fault,
            checks: Vec::new(),
            bench_ok: false,
            strict_ok: false,
            seeds_checked: 0,
            timing: None,
            sol_ms: 0.0,
            s: None,
            message: None,
            device: None,
            worker: None,
        });
        let checked = if r.strict_ok && stage.starts_with("time") {
            " after passing its check"
        } else {
            ""
        };
        r.verdict = verdict.clone();
        r.s = None;
        r.timing = None;
        r.message = Some(format!("during {stage}{checked}: {why}"));
        self.reported.insert(shape);
        self.note_failure(&r);
        self.consecutive_lost += 1;
        let left: Vec<u32> = self
            .shapes
            .iter()
            .copied()
            .filter(|s| !self.reported.contains(s))
            .collect();
        let (resume, message) = if left.is_empty() {
            (None, why.to_string())
        } else if self.consecutive_lost >= MAX_CONSECUTIVE_LOST {
            (
                None,
                format!(
                    "stopped after {} shapes in a row were lost ({why}); {} shapes not run",
                    self.consecutive_lost,
                    left.len()
                ),
            )
        } else {
            (Some(left), why.to_string())
        };
        AfterLoss {
            result: Some(r),
            resume,
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::compare::Tol;

    fn job(shapes: &[u32]) -> Job {
        Job {
            operator: "op".into(),
            kind: JobKind::All,
            mode: Mode::Quick,
            candidate: Source {
                name: "c".into(),
                code: String::new(),
                defines: Default::default(),
            },
            reference: None,
            shapes: shapes
                .iter()
                .map(|id| ShapeJob {
                    id: *id,
                    env: Default::default(),
                    inputs: vec![],
                    outputs: vec![],
                    sol_s: 0.0,
                })
                .collect(),
            tolerance: Tol {
                atol: 0.0,
                rtol: 0.0,
                rel_l2: 0.0,
            },
            seeds: vec![1],
            generator: None,
            arch: None,
            watchdog_s: None,
            sass: false,
            draws: Vec::new(),
        }
    }

    fn result(shape: u32, verdict: Verdict) -> ShapeResult {
        ShapeResult {
            shape,
            verdict,
            checks: vec![],
            bench_ok: true,
            strict_ok: true,
            seeds_checked: 1,
            timing: None,
            sol_ms: 0.0,
            s: Some(0.5),
            message: None,
            device: Some(0),
            worker: None,
        }
    }

    fn done(id: u64, result: ShapeResult) -> Event {
        Event::ShapeDone { id, result }
    }

    fn progress(id: u64, shape: u32, stage: &str) -> Event {
        Event::Progress {
            id,
            stage: stage.into(),
            shape: Some(shape),
            done: 0,
            total: 1,
        }
    }

    #[test]
    fn a_second_result_for_a_shape_is_a_protocol_error() {
        let mut g = JobGuard::new(7, &job(&[1, 2]));
        assert!(
            g.accept(done(7, result(1, Verdict::Pass)))
                .unwrap()
                .is_some()
        );
        let e = g.accept(done(7, result(1, Verdict::Pass))).unwrap_err();
        assert_eq!(e, ProtocolError::SecondResult { shape: 1 });
        assert_eq!(e.to_string(), "a second result for shape 1");
    }

    #[test]
    fn foreign_jobs_and_shapes_are_protocol_errors() {
        let mut g = JobGuard::new(7, &job(&[1, 2]));
        let e = g.accept(done(8, result(1, Verdict::Pass))).unwrap_err();
        assert!(e.to_string().contains("job 8 while job 7"), "{e}");
        let e = g.accept(done(7, result(9, Verdict::Pass))).unwrap_err();
        assert!(
            e.to_string().contains("shape 9, which is not in job 7"),
            "{e}"
        );
        let e = g.accept(progress(7, 3, "check")).unwrap_err();
        assert_eq!(
            e,
            ProtocolError::NotInJob {
                what: "progress",
                shape: 3,
                job: 7
            }
        );
        let e = g
            .accept(Event::Output {
                id: 7,
                shape: Some(4),
                text: "x".into(),
                dropped: 0,
            })
            .unwrap_err();
        assert!(e.to_string().contains("shape 4"), "{e}");
    }

    #[test]
    fn a_lost_shape_keeps_its_check_and_the_rest_go_on() {
        let mut g = JobGuard::new(1, &job(&[1, 2, 3]));
        g.accept(done(1, result(1, Verdict::Pass))).unwrap();
        g.accept(progress(1, 2, "check")).unwrap();
        assert!(
            g.accept(Event::Checked {
                id: 1,
                result: result(2, Verdict::Pass)
            })
            .unwrap()
            .is_none()
        );
        g.accept(progress(1, 2, "time (48 samples)")).unwrap();
        let a = g.lost(Verdict::Timeout, "no progress for 10 s");
        let r = a.result.unwrap();
        assert_eq!((r.shape, r.verdict.clone()), (2, Verdict::Timeout));
        assert!(r.strict_ok && r.s.is_none());
        assert!(
            r.message
                .as_deref()
                .unwrap()
                .contains("after passing its check"),
            "{r:?}"
        );
        assert_eq!(a.resume, Some(vec![3]));
        // The restarted worker compiles again: not said twice. Its Done (pass) becomes the
        // job's first failure.
        let c = Event::Compiled {
            id: 1,
            which: "candidate".into(),
            ok: true,
            cached: true,
            ms: 1.0,
            diagnostics: vec![],
            log: String::new(),
            resources: Default::default(),
        };
        g.compiled.insert("candidate".into());
        assert!(g.accept(c).unwrap().is_none());
        g.accept(done(1, result(3, Verdict::Pass))).unwrap();
        match g
            .accept(Event::Done {
                id: 1,
                verdict: Verdict::Pass,
                message: None,
            })
            .unwrap()
        {
            Some(Event::Done {
                verdict, message, ..
            }) => {
                assert_eq!(verdict, Verdict::Timeout);
                assert!(message.unwrap().starts_with("shape 2:"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn shapes_lost_in_a_row_stop_the_job() {
        let mut g = JobGuard::new(1, &job(&[1, 2, 3, 4, 5]));
        for s in 1..=3 {
            g.accept(progress(1, s, "check seed 1/1")).unwrap();
            let a = g.lost(Verdict::Fault, "worker killed by signal 6");
            assert_eq!(a.result.unwrap().verdict, Verdict::Fault);
            if s < 3 {
                assert!(a.resume.is_some());
            } else {
                assert_eq!(a.resume, None);
                assert!(a.message.contains("3 shapes in a row"), "{}", a.message);
                assert!(a.message.contains("2 shapes not run"), "{}", a.message);
            }
        }
    }

    #[test]
    fn a_loss_outside_a_shape_ends_the_job() {
        let mut g = JobGuard::new(1, &job(&[1, 2]));
        let a = g.lost(Verdict::Fault, "worker exited");
        assert_eq!(a.result, None);
        assert_eq!(a.resume, None);
    }
}
