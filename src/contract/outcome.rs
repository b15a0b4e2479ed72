//! A job's events collected into an outcome (compile events, per-shape results, verdict,
//! kernel output), and the S_op of a set of results.

use crate::contract::protocol::*;
use crate::contract::runner::{JobEvent, Runner};
use crate::suite::Problem;
use crate::suite::roofline::{self, ShapeScore};

/// The outcome of a job as collected by `collect`.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// Every event of the job, in order (what the session records, through
    /// `session::translate`); the fields below are views of them.
    pub events: Vec<JobEvent>,
    pub compiled: Vec<Event>,
    pub shapes: Vec<ShapeResult>,
    pub verdict: Option<Verdict>,
    pub message: Option<String>,
    /// What the kernels printed, per shape (None: outside a shape).
    pub output: Vec<KernelOutput>,
}

/// Text a job's kernels printed (device `printf`), as the worker captured it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KernelOutput {
    pub shape: Option<u32>,
    pub text: String,
    /// Bytes printed beyond the job's 64 KiB and not kept.
    pub dropped: u64,
}

impl KernelOutput {
    /// Where it came from, for a heading.
    pub fn origin(&self) -> String {
        match self.shape {
            Some(s) => format!("shape {s}"),
            None => "outside a shape".into(),
        }
    }
}

/// Runs a job to completion (on a worker, a pool or a leased worker), printing progress to
/// stderr when asked.
pub async fn collect(client: &dyn Runner, job: Job, progress: bool) -> Outcome {
    let (_, rx) = client.submit(job);
    collect_rx(rx, progress).await
}

/// Collects one job's events from its receiver.
pub async fn collect_rx(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<JobEvent>,
    progress: bool,
) -> Outcome {
    let mut o = Outcome::default();
    while let Some(ev) = rx.recv().await {
        if progress {
            print_progress(&ev);
        }
        if o.absorb(ev) {
            break;
        }
    }
    if progress {
        eprint!("\r                                        \r");
    }
    o
}

/// What a headless command shows on stderr for one job event.
fn print_progress(ev: &JobEvent) {
    match ev {
        JobEvent::Worker(Event::Compiled {
            which,
            ok,
            cached,
            ms,
            diagnostics,
            ..
        }) => {
            eprintln!(
                "compiled {which}: {} in {ms:.0} ms{}",
                if *ok { "ok" } else { "FAILED" },
                if *cached { " (cached)" } else { "" }
            );
            for d in diagnostics {
                eprintln!("  {d}");
            }
        }
        JobEvent::Worker(Event::Progress {
            stage,
            shape,
            done,
            total,
            ..
        }) if stage != "done" => match shape {
            Some(s) => eprint!("\r{stage} shape {s} ({}/{total})      ", done + 1),
            None => eprint!("\r{stage}…      "),
        },
        JobEvent::Worker(Event::Output { shape, text, .. }) => {
            eprint!("\r{:60}\r", "");
            let origin = shape.map(|s| format!("shape {s}")).unwrap_or_default();
            eprintln!("kernel output {origin}:");
            for l in text.lines() {
                eprintln!("  | {l}");
            }
        }
        _ => {}
    }
}

impl Outcome {
    /// The outcome of a job's events (as `collect` gathers them).
    pub fn from_events(events: impl IntoIterator<Item = JobEvent>) -> Outcome {
        let mut o = Outcome::default();
        for ev in events {
            if o.absorb(ev) {
                break;
            }
        }
        o
    }

    /// Takes one event into the outcome; true when it ends the job.
    pub fn absorb(&mut self, ev: JobEvent) -> bool {
        self.events.push(ev.clone());
        match ev {
            JobEvent::Worker(e @ Event::Compiled { .. }) => self.compiled.push(e),
            JobEvent::Worker(Event::ShapeDone { result, .. }) => self.shapes.push(result),
            JobEvent::Worker(Event::Output {
                shape,
                text,
                dropped,
                ..
            }) => self.output.push(KernelOutput {
                shape,
                text,
                dropped,
            }),
            JobEvent::Worker(Event::Done {
                verdict, message, ..
            }) => {
                self.verdict = Some(verdict);
                self.message = message;
                return true;
            }
            JobEvent::Worker(Event::Fault { message, .. }) => self.message = Some(message),
            JobEvent::Worker(_) => {}
            JobEvent::WorkerLost { verdict, message } => {
                self.verdict = Some(verdict);
                self.message = Some(message);
                return true;
            }
        }
        false
    }

    /// An outcome without a job (it could not be built): the error as its verdict.
    pub fn failed(message: String) -> Outcome {
        Outcome::from_events([JobEvent::Worker(Event::Done {
            id: 0,
            verdict: Verdict::Error,
            message: Some(message),
        })])
    }
}

/// S_op of a set of results: median of S, failed shapes 0.
pub fn s_op_of<'a>(results: impl IntoIterator<Item = &'a ShapeResult>) -> f64 {
    padded(results, &[], |r| r.verdict == Verdict::Pass)
}

/// S_op under the benchmark's own rule: a shape counts only when it also passed the
/// benchmark-compatible level on every seed (for fp8 outputs NaN never equals NaN there).
#[cfg(test)]
pub fn s_op_bench_of<'a>(results: impl IntoIterator<Item = &'a ShapeResult>) -> f64 {
    padded(results, &[], |r| r.verdict == Verdict::Pass && r.bench_ok)
}

/// S_op over the shapes asked for: one without a result (its worker lost, the job stopped
/// before it) counts 0, as a failed shape does.
pub fn s_op_over(results: &[ShapeResult], asked: &[u32]) -> f64 {
    padded(results, asked, |r| r.verdict == Verdict::Pass)
}

/// The benchmark-compatible S_op over the shapes asked for (see `s_op_over`).
pub fn s_op_bench_over(results: &[ShapeResult], asked: &[u32]) -> f64 {
    padded(results, asked, |r| r.verdict == Verdict::Pass && r.bench_ok)
}

/// The median of S over `results` where `counts` holds (else 0), with a 0 for every shape of
/// `asked` that has no result.
fn padded<'a>(
    results: impl IntoIterator<Item = &'a ShapeResult>,
    asked: &[u32],
    counts: impl Fn(&ShapeResult) -> bool,
) -> f64 {
    let results: Vec<&ShapeResult> = results.into_iter().collect();
    let mut scores: Vec<ShapeScore> = results
        .iter()
        .map(|r| match r.s {
            Some(s) if counts(r) => ShapeScore::Passed(s),
            _ => ShapeScore::Failed,
        })
        .collect();
    let missing = asked
        .iter()
        .filter(|id| !results.iter().any(|r| r.shape == **id))
        .count();
    scores.extend(std::iter::repeat_n(ShapeScore::Failed, missing));
    roofline::s_op(&scores)
}

/// Why a candidate's kernel resources could not be had.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResourcesError {
    #[error(transparent)]
    Job(#[from] crate::contract::job::JobError),
    /// `message`: the worker's (the compile log's first error, or why the job failed).
    #[error("{candidate}: does not compile: {message}")]
    DoesNotCompile { candidate: String, message: String },
}

crate::error::text_at_the_edge!(ResourcesError);

/// Compiles a candidate on the worker's GPU and returns its kernels' resources (registers,
/// shared memory, spills); Err when it does not compile.
pub async fn compile_resources(
    client: &dyn Runner,
    p: &Problem,
    candidate: &Source,
    shape_id: u32,
) -> Result<Option<std::collections::BTreeMap<String, KernelResources>>, ResourcesError> {
    let job = crate::contract::job::build_job(
        p,
        candidate.clone(),
        None,
        &[shape_id],
        JobKind::Compile,
        Mode::Quick,
        None,
    )?;
    let o = collect(client, job, false).await;
    if !matches!(o.verdict, Some(Verdict::Pass)) {
        return Err(ResourcesError::DoesNotCompile {
            candidate: candidate.name.clone(),
            message: o.message.unwrap_or_else(|| "compile error".into()),
        });
    }
    Ok(o.compiled.iter().find_map(|e| match e {
        Event::Compiled {
            which,
            resources,
            ok: true,
            ..
        } if which == "candidate" => Some(resources.clone()),
        _ => None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::fixtures::shape_result;

    #[test]
    fn the_benchmark_s_op_counts_only_shapes_passing_the_benchmark_rule() {
        let mut rs: Vec<ShapeResult> = (0..3)
            .map(|i| shape_result(i, Some(0.2 + 0.1 * i as f64), Verdict::Pass, 0.01))
            .collect();
        assert!((s_op_of(&rs) - 0.3).abs() < 1e-12);
        assert!((s_op_bench_of(&rs) - 0.3).abs() < 1e-12);
        // shape 2 passes strict (NaN shared with the reference) but not the benchmark's rule
        rs[2].bench_ok = false;
        assert!((s_op_of(&rs) - 0.3).abs() < 1e-12);
        assert!(
            (s_op_bench_of(&rs) - 0.2).abs() < 1e-12,
            "{}",
            s_op_bench_of(&rs)
        );
        // a failed shape counts 0 in both
        rs[0].verdict = Verdict::Incorrect;
        assert!((s_op_of(&rs) - 0.3).abs() < 1e-12);
        assert!(s_op_bench_of(&rs).abs() < 1e-12);
    }
}
