//! Jobs spread over several GPUs, longest first: one worker per GPU, each taking the next job
//! (in descending cost, the shape's T_SOL) as soon as it finishes one. This greedy
//! longest-processing-time order leaves the short jobs for the end, so the GPUs finish
//! together.

use super::client::WorkerPool;
use super::outcome::{Outcome, collect_rx};
use super::protocol::Job;
use crate::suite::Problem;
use crate::suite::hardware::HardwareProfile;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::collections::VecDeque;
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
    /// The GPU (index) that ran it.
    pub device: u32,
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

/// Runs the tasks longest first on the pool's workers (`devices[i]` is worker i's GPU), each
/// worker starting the next task when it finishes one; `on_done` sees every task as it ends,
/// with the count done and the total. Returns the tasks in the order they ended.
pub async fn run<T>(
    pool: &WorkerPool,
    devices: &[u32],
    mut tasks: Vec<Task<T>>,
    mut on_done: impl FnMut(&Finished<T>, usize, usize),
) -> Vec<Finished<T>> {
    longest_first(&mut tasks);
    let total = tasks.len();
    let mut queue: VecDeque<Task<T>> = tasks.into();
    let start = |i: usize, t: Task<T>| {
        let client = pool.worker(i).cloned();
        let device = devices.get(i).copied().unwrap_or(i as u32);
        async move {
            let t0 = Instant::now();
            let outcome = match client {
                Some(c) => {
                    let (_, rx) = c.submit(t.job);
                    collect_rx(rx, false).await
                }
                None => Outcome::default(),
            };
            let secs = t0.elapsed().as_secs_f64();
            (
                i,
                Finished {
                    tag: t.tag,
                    outcome,
                    device,
                    secs,
                },
            )
        }
    };
    let mut running = FuturesUnordered::new();
    for i in 0..pool.len() {
        if let Some(t) = queue.pop_front() {
            running.push(start(i, t));
        }
    }
    let mut out = Vec::with_capacity(total);
    while let Some((i, f)) = running.next().await {
        on_done(&f, out.len() + 1, total);
        out.push(f);
        if let Some(t) = queue.pop_front() {
            running.push(start(i, t));
        }
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
                job: crate::engine::build_job(
                    p,
                    crate::engine::protocol::Source {
                        name: "k".into(),
                        code: String::new(),
                        defines: Default::default(),
                    },
                    None,
                    &[s.id],
                    crate::engine::protocol::JobKind::All,
                    crate::engine::protocol::Mode::Quick,
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
    }
}
