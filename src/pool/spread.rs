//! Jobs spread over a pool's workers, longest first: every task (a job of one shape) goes into
//! the pool's one queue, which hands the largest T_SOL to the next free worker, so the long
//! shapes start first and the short ones fill the end: the workers finish together.

use super::Pool;
use crate::contract::outcome::Outcome;
use crate::contract::protocol::Job;
use crate::contract::runner::Runner;
use crate::suite::Problem;
use crate::suite::hardware::HardwareProfile;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::time::Instant;

/// A job and what it costs (the larger, the earlier it starts).
pub struct Task<T> {
    pub tag: T,
    pub job: Job,
    pub cost: f64,
}

/// A job that ended.
pub struct Finished<T> {
    pub tag: T,
    pub outcome: Outcome,
    /// The worker that measured it (host and device), when it measured anything.
    pub worker: Option<String>,
    /// Seconds from its start on a worker to its end.
    pub secs: f64,
}

/// The cost of a shape: its T_SOL on the hardware profile, seconds (0 when it cannot be had).
pub fn shape_cost(p: &Problem, shape: u32, hw: &HardwareProfile) -> f64 {
    p.shape(shape)
        .and_then(|s| p.work(s).ok())
        .and_then(|w| crate::suite::roofline::sol(&w, hw).ok())
        .map(|s| s.sol_s)
        .unwrap_or(0.0)
}

/// Orders tasks by descending cost (ties keep their order).
pub fn longest_first<T>(tasks: &mut [Task<T>]) {
    tasks.sort_by(|a, b| b.cost.total_cmp(&a.cost));
}

/// Runs the tasks on the pool's workers, the largest first; `on_done` sees every task as it
/// ends, with the count done and the total. Returns the tasks in the order they ended.
pub async fn run<T>(
    pool: &Pool,
    mut tasks: Vec<Task<T>>,
    mut on_done: impl FnMut(&Finished<T>, usize, usize),
) -> Vec<Finished<T>> {
    longest_first(&mut tasks);
    let total = tasks.len();
    let mut running = FuturesUnordered::new();
    for t in tasks {
        let (_, mut rx) = pool.submit(t.job);
        let tag = t.tag;
        running.push(async move {
            let mut outcome = Outcome::default();
            let mut started: Option<Instant> = None;
            while let Some(ev) = rx.recv().await {
                started.get_or_insert_with(Instant::now);
                if outcome.absorb(ev) {
                    break;
                }
            }
            let worker = outcome.shapes.iter().find_map(|r| r.worker.clone());
            Finished {
                tag,
                outcome,
                worker,
                secs: started.map(|t| t.elapsed().as_secs_f64()).unwrap_or(0.0),
            }
        });
    }
    let mut out = Vec::with_capacity(total);
    while let Some(f) = running.next().await {
        on_done(&f, out.len() + 1, total);
        out.push(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_tasks_start_first() {
        let suite = crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).unwrap();
        let p = suite.problem("rms_norm").unwrap();
        let hw = suite.hardware("H200").unwrap();
        let mut tasks: Vec<Task<u32>> = p
            .shapes
            .iter()
            .map(|s| Task {
                tag: s.id,
                job: crate::contract::job::build_job(
                    p,
                    crate::contract::protocol::Source {
                        name: "k".into(),
                        code: String::new(),
                        defines: Default::default(),
                    },
                    None,
                    &[s.id],
                    crate::contract::protocol::JobKind::All,
                    crate::contract::protocol::Mode::Quick,
                    Some(hw),
                )
                .unwrap(),
                cost: shape_cost(p, s.id, hw),
            })
            .collect();
        longest_first(&mut tasks);
        let costs: Vec<f64> = tasks.iter().map(|t| t.cost).collect();
        assert!(costs.windows(2).all(|w| w[0] >= w[1]), "{costs:?}");
        assert!(costs[0] > 0.0 && costs[0] > *costs.last().unwrap());
        // The pool's queue orders by the job's own T_SOL: the same figure.
        for t in &tasks {
            assert!((t.job.shapes[0].sol_s - t.cost).abs() <= 1e-12 * t.cost.max(1.0));
        }
    }
}
