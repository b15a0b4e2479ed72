//! What the pool's actor does with jobs: each cut into units of one shape (a compile or dump
//! job stays whole), the units dispatched to free workers (leases first), their events passed
//! on to the job's owner as one stream, and units lost with their worker requeued once.
//!
//! Invariants (see also `actor`): a job's owner gets compile results once, progress counted over
//! the job's shapes, each shape's result once and one final `done` or `WorkerLost`; the job's
//! kernel output keeps the bound of one job however many workers ran its units; a job stops
//! after `MAX_CONSECUTIVE_LOST` shapes in a row were lost with their workers.

use super::actor::{Actor, JobRun, MAX_CONSECUTIVE_LOST, Running};
use super::handle::{Cmd, Lease, tell};
use super::scheduler::{self, Loss, Unit};
use super::status::SeatState;
use crate::contract::protocol::*;
use crate::contract::runner::JobEvent;
use crate::worker::stdio;
use std::collections::BTreeSet;
use tokio::sync::mpsc;

impl Actor {
    pub(super) fn submit(
        &mut self,
        id: u64,
        job: Job,
        model: Option<String>,
        events: mpsc::UnboundedSender<JobEvent>,
    ) {
        let whole = matches!(job.kind, JobKind::Compile | JobKind::Dump) || job.shapes.is_empty();
        let units: Vec<(u32, f64)> = if whole {
            vec![(job.shapes.first().map(|s| s.id).unwrap_or(0), 0.0)]
        } else {
            job.shapes.iter().map(|s| (s.id, s.sol_s)).collect()
        };
        self.queue.add_job(id, model, &units);
        self.jobs.push(JobRun {
            id,
            events,
            total: if whole { 1 } else { job.shapes.len() },
            job,
            whole,
            finished: 0,
            first_failure: None,
            compiled: BTreeSet::new(),
            consecutive_lost: 0,
            output_left: stdio::JOB_OUTPUT_LIMIT,
            said_dropped: false,
        });
    }

    /// Ends a job: its waiting units dropped, its running ones cancelled, the owner told.
    pub(super) fn end_job(&mut self, id: u64, last: JobEvent) {
        self.queue.drop_job(id);
        for s in &self.seats {
            if let Some(r) = &s.running
                && r.unit.job == id
            {
                s.client.cancel(r.cid);
            }
        }
        if let Some(i) = self.jobs.iter().position(|j| j.id == id) {
            let j = self.jobs.remove(i);
            tell(&j.events, last);
        }
    }

    pub(super) fn cancel(&mut self, id: u64) {
        self.end_job(
            id,
            JobEvent::WorkerLost {
                verdict: Verdict::Cancelled,
                message: "cancelled".into(),
            },
        );
    }

    /// Free workers take leases first, then the queue's next unit; jobs and leases no worker
    /// up can take end when no worker is starting.
    pub(super) fn dispatch(&mut self) {
        let seats = self.seats();
        for w in 0..self.seats.len() {
            if self.seats[w].state != SeatState::Idle {
                continue;
            }
            if let Some(i) = self.leases.iter().position(|l| {
                scheduler::fits(
                    w,
                    &scheduler::Placement {
                        group: None,
                        model: l.model.clone(),
                    },
                    &seats,
                )
            }) && let Some(l) = self.leases.remove(i)
            {
                let seat = &mut self.seats[w];
                seat.leased = true;
                seat.state = SeatState::Busy;
                let lease = Lease {
                    worker: w,
                    name: seat.name(),
                    client: seat.client.clone(),
                    tx: self.tx.clone(),
                };
                if l.reply.send(Ok(lease)).is_err() {
                    // The requester stopped waiting: the lease dropped with the message
                    // releases the worker.
                }
                continue;
            }
            if let Some(u) = self.queue.take_for(w, &seats) {
                self.start_unit(w, u);
            }
        }
        if self.seats.iter().any(|s| s.state == SeatState::Starting) {
            return;
        }
        let names = self.names();
        let down = (!seats.iter().any(|s| s.up)).then(|| self.snapshot().why_down());
        let why = |p: &scheduler::Placement| match &down {
            Some(d) => format!("no worker is up ({d})"),
            None => scheduler::unplaceable(p, &seats, &names),
        };
        let stranded: Vec<(u64, String)> = self
            .queue
            .stranded(&seats, &names)
            .into_iter()
            .map(|(job, _)| {
                let p = self.queue.placement(job).cloned().unwrap_or_default();
                (job, why(&p))
            })
            .collect();
        for (job, message) in stranded {
            self.end_job(
                job,
                JobEvent::WorkerLost {
                    verdict: Verdict::Error,
                    message,
                },
            );
        }
        let waiting = std::mem::take(&mut self.leases);
        for l in waiting {
            let p = scheduler::Placement {
                group: None,
                model: l.model.clone(),
            };
            if (0..seats.len()).any(|w| scheduler::fits(w, &p, &seats)) {
                self.leases.push_back(l);
            } else if l
                .reply
                .send(Err(super::PoolError::Unplaceable { why: why(&p) }))
                .is_err()
            {
                // The requester stopped waiting.
            }
        }
    }

    pub(super) fn start_unit(&mut self, w: usize, u: Unit) {
        let Some(j) = self.jobs.iter().find(|j| j.id == u.job) else {
            return;
        };
        let mut job = j.job.clone();
        if !j.whole {
            job.shapes.retain(|s| s.id == u.shape);
        }
        let seat = &mut self.seats[w];
        let (cid, mut rx) = seat.client.submit(job);
        seat.state = SeatState::Busy;
        seat.running = Some(Running {
            unit: u,
            cid,
            events: 0,
            result: None,
        });
        let tx = self.tx.clone();
        tokio::spawn(async move {
            while let Some(ev) = rx.recv().await {
                let end = matches!(
                    ev,
                    JobEvent::WorkerLost { .. } | JobEvent::Worker(Event::Done { .. })
                );
                if tx.send(Cmd::Unit { worker: w, cid, ev }).is_err() || end {
                    break;
                }
            }
        });
    }

    pub(super) fn job_mut(&mut self, id: u64) -> Option<&mut JobRun> {
        self.jobs.iter_mut().find(|j| j.id == id)
    }

    pub(super) fn unit_event(&mut self, w: usize, cid: u64, ev: JobEvent) {
        let Some(seat) = self.seats.get_mut(w) else {
            return;
        };
        let Some(r) = seat.running.as_mut().filter(|r| r.cid == cid) else {
            return;
        };
        r.events += 1;
        let first = r.events == 1;
        let job_id = r.unit.job;
        let whole = self.jobs.iter().find(|j| j.id == job_id).map(|j| j.whole);
        match ev {
            JobEvent::Worker(Event::ShapeDone { result, .. }) if whole == Some(false) => {
                r.result = Some(result);
            }
            JobEvent::Worker(Event::Done {
                verdict, message, ..
            }) => {
                let r = seat.running.take();
                seat.state = if seat.leased {
                    SeatState::Busy
                } else {
                    SeatState::Idle
                };
                let Some(r) = r else { return };
                self.unit_done(r, verdict, message);
            }
            JobEvent::WorkerLost { verdict, message } => {
                let r = seat.running.take();
                let Some(r) = r else { return };
                self.unit_lost(w, r, first, verdict, message);
            }
            JobEvent::Worker(e) => self.forward(job_id, e),
        }
    }

    /// Passes a unit's event on to its job's owner (compile results once, progress counted
    /// over the job's shapes; a fault is said by the loss that follows it).
    pub(super) fn forward(&mut self, id: u64, e: Event) {
        let Some(j) = self.job_mut(id) else { return };
        let e = match e {
            Event::Compiled { ref which, .. } if !j.whole && !j.compiled.insert(which.clone()) => {
                return;
            }
            Event::Progress { ref stage, .. } if !j.whole && stage == "done" => return,
            Event::Progress { stage, shape, .. } if !j.whole => Event::Progress {
                id,
                stage,
                shape,
                done: j.finished,
                total: j.total,
            },
            Event::Fault { .. } | Event::Hello { .. } | Event::Calibration { .. } => return,
            Event::Checked { .. } if !j.whole => return,
            Event::Output {
                shape,
                mut text,
                mut dropped,
                ..
            } => {
                // The worker closes its unit's text with a note when it dropped some; the job's
                // budget counts kernel output only, and the job says once that it dropped some.
                if dropped > 0
                    && let Some(t) = text.strip_suffix(&stdio::not_kept_note(dropped))
                {
                    text.truncate(t.len());
                }
                let mut keep = text.len().min(j.output_left);
                while !text.is_char_boundary(keep) {
                    keep -= 1;
                }
                dropped += (text.len() - keep) as u64;
                text.truncate(keep);
                j.output_left -= keep;
                if dropped > 0 && !j.said_dropped {
                    j.said_dropped = true;
                    text.push_str(&stdio::not_kept_note(dropped));
                }
                Event::Output {
                    id,
                    shape,
                    text,
                    dropped,
                }
            }
            e => with_id(e, id),
        };
        tell(&j.events, JobEvent::Worker(e));
    }

    pub(super) fn unit_done(&mut self, r: Running, verdict: Verdict, message: Option<String>) {
        let id = r.unit.job;
        let Some(j) = self.job_mut(id) else { return };
        if j.whole {
            let done = Event::Done {
                id,
                verdict,
                message,
            };
            self.end_job(id, JobEvent::Worker(done));
            return;
        }
        match r.result {
            Some(result) => self.shape_finished(id, result, false),
            // No result and a failure: the job cannot run anywhere (its kernel does not build,
            // the reference does not, …): it ends with that.
            None if !matches!(verdict, Verdict::Pass | Verdict::Cancelled) => {
                let done = Event::Done {
                    id,
                    verdict,
                    message,
                };
                self.end_job(id, JobEvent::Worker(done));
            }
            None => {
                let result = lost_result(
                    r.unit.shape,
                    Verdict::Error,
                    format!(
                        "the worker ended the shape without a result ({})",
                        message.unwrap_or_else(|| verdict.name().into())
                    ),
                );
                self.shape_finished(id, result, false);
            }
        }
    }

    pub(super) fn unit_lost(
        &mut self,
        w: usize,
        r: Running,
        first: bool,
        verdict: Verdict,
        message: String,
    ) {
        let id = r.unit.job;
        let protocol = message.starts_with("protocol error");
        if verdict == Verdict::Cancelled {
            self.seats[w].state = SeatState::Idle;
            return;
        }
        if first && verdict == Verdict::Error && !protocol {
            // The worker could not be started for the unit: it never ran.
            self.queue.unstarted(r.unit);
            self.down(w, message);
            return;
        }
        // The client restarts a lost worker: greet it again before it takes more work.
        self.greet(w);
        let Some(j) = self.job_mut(id) else { return };
        if j.whole || protocol {
            self.end_job(id, JobEvent::WorkerLost { verdict, message });
            return;
        }
        if let Some(res) = r
            .result
            .as_ref()
            .filter(|res| !matches!(res.verdict, Verdict::Fault | Verdict::Timeout))
        {
            // The shape had its result before the worker was lost (the worker never reports a
            // fault or timeout itself: those are the client's, for the shape it was on).
            let res = res.clone();
            self.shape_finished(id, res, false);
            return;
        }
        let name = self.seats[w].name();
        let (verdict, why) = match &r.result {
            Some(res) => (
                res.verdict.clone(),
                res.message.clone().unwrap_or_else(|| message.clone()),
            ),
            None => (verdict, message),
        };
        let loss = Loss {
            worker: w,
            name,
            verdict: verdict.clone(),
            why,
        };
        let shape = r.unit.shape;
        match self.queue.lost(r.unit, loss) {
            None => self.requeued += 1,
            Some(u) => {
                let mut result = r
                    .result
                    .unwrap_or_else(|| lost_result(shape, verdict.clone(), String::new()));
                let places: Vec<String> = u
                    .losses
                    .iter()
                    .map(|l| format!("on {}: {}", l.name, l.why))
                    .collect();
                result.verdict = verdict;
                result.message = Some(format!(
                    "lost with its worker twice ({})",
                    places.join("; then ")
                ));
                self.shape_finished(id, result, true);
            }
        }
    }

    pub(super) fn shape_finished(&mut self, id: u64, result: ShapeResult, lost: bool) {
        let Some(j) = self.job_mut(id) else { return };
        j.finished += 1;
        if lost {
            j.consecutive_lost += 1;
        } else {
            j.consecutive_lost = 0;
        }
        if !matches!(result.verdict, Verdict::Pass | Verdict::Unchecked)
            && j.first_failure.is_none()
        {
            j.first_failure = Some((
                result.verdict.clone(),
                format!(
                    "shape {}: {}",
                    result.shape,
                    result
                        .message
                        .clone()
                        .unwrap_or_else(|| result.verdict.name().into())
                ),
            ));
        }
        let verdict = result.verdict.clone();
        tell(&j.events, JobEvent::Worker(Event::ShapeDone { id, result }));
        let left = j.total - j.finished;
        if j.consecutive_lost >= MAX_CONSECUTIVE_LOST && left > 0 {
            let n = j.consecutive_lost;
            self.end_job(
                id,
                JobEvent::WorkerLost {
                    verdict,
                    message: format!(
                        "stopped after {n} shapes in a row were lost with their workers; {left} shapes not run"
                    ),
                },
            );
            return;
        }
        if left == 0 {
            let (verdict, message) = match j.first_failure.clone() {
                Some((v, m)) => (v, Some(m)),
                None => (Verdict::Pass, None),
            };
            self.queue.finish_job(id);
            let done = Event::Done {
                id,
                verdict,
                message,
            };
            self.end_job(id, JobEvent::Worker(done));
        }
    }
}

/// The same event under another job id (the pool's, for the job's owner).
fn with_id(ev: Event, id: u64) -> Event {
    match ev {
        Event::Progress {
            stage,
            shape,
            done,
            total,
            ..
        } => Event::Progress {
            id,
            stage,
            shape,
            done,
            total,
        },
        Event::Compiled {
            which,
            ok,
            cached,
            ms,
            diagnostics,
            log,
            resources,
            ..
        } => Event::Compiled {
            id,
            which,
            ok,
            cached,
            ms,
            diagnostics,
            log,
            resources,
        },
        Event::Tensors {
            shape,
            seed,
            inputs,
            outputs,
            ..
        } => Event::Tensors {
            id,
            shape,
            seed,
            inputs,
            outputs,
        },
        Event::Checked { result, .. } => Event::Checked { id, result },
        Event::ShapeDone { result, .. } => Event::ShapeDone { id, result },
        Event::Output {
            shape,
            text,
            dropped,
            ..
        } => Event::Output {
            id,
            shape,
            text,
            dropped,
        },
        Event::Done {
            verdict, message, ..
        } => Event::Done {
            id,
            verdict,
            message,
        },
        Event::Fault { message, .. } => Event::Fault { id, message },
        Event::Error { message, .. } => Event::Error { id, message },
        other => other,
    }
}

/// The result of a shape lost with its worker before it had one.
fn lost_result(shape: u32, verdict: Verdict, message: String) -> ShapeResult {
    ShapeResult {
        shape,
        verdict,
        checks: Vec::new(),
        bench_ok: false,
        strict_ok: false,
        seeds_checked: 0,
        timing: None,
        sol_ms: 0.0,
        s: None,
        message: Some(message),
        device: None,
        worker: None,
    }
}
