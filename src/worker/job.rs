//! One job from start to `done`: compile, generate, check and time every shape, report.

use super::*;

/// Runs one job. Returns Err only for GPU errors (sticky ones end the worker).
pub(super) fn run_job(
    g: &mut Gpu,
    out: &Out,
    id: u64,
    job: &Job,
    cancel: &AtomicU64,
    printed: &mut Printed,
) -> GResult<(Verdict, Option<String>)> {
    let cand = match g.prepare(out, id, "candidate", &job.candidate)? {
        Ok(l) => l,
        Err((v, msg)) => return Ok((v, Some(msg))),
    };
    if job.kind == JobKind::Compile {
        if job.sass {
            disassemble::send(out, id, disassemble::of_source(&g.compiler, &job.candidate));
        }
        return Ok((Verdict::Pass, None));
    }
    let custom = match &job.generator {
        Some(src) => match g.prepare(out, id, "generator", src)? {
            Ok(l) => Some(l),
            Err((v, msg)) => {
                return Ok((
                    Verdict::Error,
                    Some(format!(
                        "the input generator does not build ({}): {msg}",
                        v.name()
                    )),
                ));
            }
        },
        None => None,
    };
    if job.kind == JobKind::Dump {
        return dump(g, out, id, job, &cand, custom.as_ref(), printed);
    }
    let needs_check = matches!(job.kind, JobKind::Check | JobKind::All);
    if needs_check && job.reference.is_none() {
        return Ok((
            Verdict::Error,
            Some("a check needs the reference kernel".into()),
        ));
    }
    // The reference also checks what timed runs wrote, in timing-only jobs too.
    let reference = match &job.reference {
        Some(r) => match g.prepare(out, id, "reference", r)? {
            Ok(l) => Some(l),
            Err((v, msg)) => {
                return Ok((
                    Verdict::Error,
                    Some(format!(
                        "the reference does not build ({}): {msg}",
                        v.name()
                    )),
                ));
            }
        },
        None => None,
    };
    let run = Run {
        out,
        id,
        job,
        cand: &cand,
        reference: reference.as_ref(),
        custom: custom.as_ref(),
        cancel,
        total: job.shapes.len(),
    };
    let total = run.total;
    let mut overall = Verdict::Pass;
    let mut first_msg = None;
    for (k, shape) in job.shapes.iter().enumerate() {
        if cancel.load(Ordering::SeqCst) == id {
            return Ok((
                Verdict::Cancelled,
                Some(format!("cancelled after {k} of {total} shapes")),
            ));
        }
        let res = run.shape(g, k, shape, printed)?;
        if res.verdict != Verdict::Pass
            && res.verdict != Verdict::Unchecked
            && overall == Verdict::Pass
        {
            overall = res.verdict.clone();
            first_msg = res
                .message
                .clone()
                .map(|m| format!("shape {}: {m}", shape.id));
        }
        printed.send(out, id, Some(shape.id));
        out.send(&Event::ShapeDone { id, result: res });
    }
    out.send(&Event::Progress {
        id,
        stage: "done".into(),
        shape: None,
        done: total,
        total,
    });
    Ok((overall, first_msg))
}

/// A dump job: each shape's inputs and the candidate's outputs on the first draw.
fn dump(
    g: &mut Gpu,
    out: &Out,
    id: u64,
    job: &Job,
    cand: &Loaded,
    custom: Option<&Loaded>,
    printed: &mut Printed,
) -> GResult<(Verdict, Option<String>)> {
    for (k, shape) in job.shapes.iter().enumerate() {
        out.send(&Event::Progress {
            id,
            stage: "dump".into(),
            shape: Some(shape.id),
            done: k,
            total: job.shapes.len(),
        });
        let env = env_from_json(&shape.env);
        let r = g.dump_shape(job, shape, &env, cand, custom);
        printed.send(out, id, Some(shape.id));
        match r {
            Ok((shape_id, seed, inputs, outputs)) => out.send(&Event::Tensors {
                id,
                shape: shape_id,
                seed,
                inputs,
                outputs,
            }),
            Err(e) if e.sticky() => return Err(e),
            Err(e) => {
                return Ok((Verdict::Error, Some(format!("shape {}: {e}", shape.id))));
            }
        }
    }
    Ok((Verdict::Pass, None))
}

/// What every shape of a checking or timing job runs with.
struct Run<'a> {
    out: &'a Out,
    id: u64,
    job: &'a Job,
    cand: &'a Loaded,
    reference: Option<&'a Loaded>,
    custom: Option<&'a Loaded>,
    cancel: &'a AtomicU64,
    total: usize,
}

impl Run<'_> {
    /// One shape: its plan resolved, checked, then timed when the check allows. Err only for a
    /// sticky GPU error (the shape's kernel output sent first).
    fn shape(
        &self,
        g: &mut Gpu,
        k: usize,
        shape: &ShapeJob,
        printed: &mut Printed,
    ) -> GResult<ShapeResult> {
        let (out, id, job) = (self.out, self.id, self.job);
        let needs_check = matches!(job.kind, JobKind::Check | JobKind::All);
        let env = env_from_json(&shape.env);
        let mut res = ShapeResult {
            shape: shape.id,
            verdict: Verdict::Pass,
            checks: Vec::new(),
            bench_ok: false,
            strict_ok: false,
            seeds_checked: 0,
            timing: None,
            sol_ms: shape.sol_s * 1e3,
            s: None,
            message: None,
            device: Some(g.info.index),
            worker: None,
        };
        let mut ok_to_time = true;
        // The plan on this shape, before any buffer is made: a size it cannot take, or a
        // tensor map past its buffer, is refused with the plan's line.
        let planned = shape_plan::resolve(&self.cand.plan, &self.cand.defines, shape);
        if let Err(e) = &planned {
            res.verdict = Verdict::Error;
            res.message = Some(format!("launch plan {e}"));
            ok_to_time = false;
        }
        if let (true, Some(r), true) = (needs_check, self.reference, planned.is_ok()) {
            if !self.check(g, k, shape, &env, r, printed, &mut res)? {
                ok_to_time = false;
            }
            out.send(&Event::Checked {
                id,
                result: res.clone(),
            });
        } else if planned.is_ok() {
            res.verdict = Verdict::Unchecked;
        }
        if ok_to_time && matches!(job.kind, JobKind::Time | JobKind::All) {
            self.time(g, k, shape, &env, printed, &mut res)?;
        }
        Ok(res)
    }

    /// The shape's correctness check into `res`; whether the shape may be timed.
    #[allow(
        clippy::too_many_arguments,
        reason = "one step of the job's loop: the shape, its kernels and where the results go"
    )]
    fn check(
        &self,
        g: &mut Gpu,
        k: usize,
        shape: &ShapeJob,
        env: &Env,
        r: &Loaded,
        printed: &mut Printed,
        res: &mut ShapeResult,
    ) -> GResult<bool> {
        let (out, id, job, total) = (self.out, self.id, self.job, self.total);
        out.send(&Event::Progress {
            id,
            stage: "check".into(),
            shape: Some(shape.id),
            done: k,
            total,
        });
        let nseeds = crate::contract::draws::cases(job).len();
        let beat = |k: usize| {
            out.send(&Event::Progress {
                id,
                stage: format!("check seed {}/{nseeds}", k + 1),
                shape: Some(shape.id),
                done: k,
                total,
            })
        };
        match g.check_shape(job, shape, env, self.cand, r, self.custom, &beat) {
            Ok((b, s, checks, msg)) => {
                res.bench_ok = b;
                res.strict_ok = s;
                res.checks = checks;
                res.seeds_checked = job.seeds.len();
                if !s {
                    res.verdict = Verdict::Incorrect;
                    res.message = msg;
                    return Ok(false);
                }
                Ok(true)
            }
            Err(e) if e.sticky() => {
                printed.send(out, id, Some(shape.id));
                Err(e)
            }
            Err(e) => {
                res.verdict = Verdict::Error;
                res.message = Some(e.to_string());
                Ok(false)
            }
        }
    }

    /// The shape's timing into `res` (S, or why there is none).
    fn time(
        &self,
        g: &mut Gpu,
        k: usize,
        shape: &ShapeJob,
        env: &Env,
        printed: &mut Printed,
        res: &mut ShapeResult,
    ) -> GResult<()> {
        let (out, id, total) = (self.out, self.id, self.total);
        out.send(&Event::Progress {
            id,
            stage: "time".into(),
            shape: Some(shape.id),
            done: k,
            total,
        });
        let beat = |n: usize| {
            out.send(&Event::Progress {
                id,
                stage: format!("time ({n} samples)"),
                shape: Some(shape.id),
                done: k,
                total,
            })
        };
        let timed = g.time_shape(
            self.job,
            shape,
            env,
            self.cand,
            self.reference,
            self.custom,
            Levels {
                strict: res.strict_ok,
                bench: res.bench_ok,
            },
            self.cancel,
            id,
            &beat,
        );
        match timed {
            Ok(t) if t.cancelled => {
                res.verdict = Verdict::Cancelled;
            }
            Ok(Timed {
                stats: Some(t),
                broken: None,
                bench_lost,
                ..
            }) => {
                if let Some(why) = bench_lost {
                    res.bench_ok = false;
                    res.message = Some(why);
                }
                let t_s = t.median_ms * 1e-3;
                let s = crate::suite::roofline::speed_of_light_fraction(shape.sol_s, t_s);
                if shape.sol_s > 0.0 && t_s < shape.sol_s {
                    res.verdict = Verdict::Impossible;
                    res.message = Some(format!(
                        "measured {:.4} ms is below the speed of light {:.4} ms: the kernel cannot have done the work",
                        t.median_ms,
                        shape.sol_s * 1e3
                    ));
                } else {
                    res.s = Some(s);
                }
                res.timing = Some(t);
            }
            Ok(Timed {
                stats,
                broken: Some(why),
                ..
            }) => {
                res.verdict = Verdict::Incorrect;
                res.bench_ok = false;
                res.strict_ok = false;
                res.message = Some(why);
                res.timing = stats;
            }
            Ok(Timed { stats: None, .. }) => {
                res.verdict = Verdict::Error;
                res.message = Some("timing produced no samples".into());
            }
            Err(e) if e.sticky() => {
                printed.send(out, id, Some(shape.id));
                return Err(e);
            }
            Err(e) => {
                res.verdict = Verdict::Error;
                res.message = Some(e.to_string());
            }
        }
        Ok(())
    }
}
