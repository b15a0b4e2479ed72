//! The one work queue of a worker pool, without any I/O: which shape runs next on which worker.
//!
//! Every job submitted to the pool is cut into units of one shape each. A free worker takes
//! the unit with the largest expected work (the shape's T_SOL) among those it may run, so that
//! the long shapes start first and the short ones fill the end: the workers finish together.
//!
//! Invariants:
//! - a unit runs whole on one worker: every sample of a shape comes from one worker;
//! - a unit lost with its worker (connection dropped, node preempted, fault) goes back on the
//!   queue once, to another worker when another one could run it; its second loss is its
//!   result ([`Queue::lost`]);
//! - one job (one operator's measurement) runs on one GPU model, and on one group of workers:
//!   its placement is bound by the first worker that takes one of its units (or by the model
//!   it was submitted for), and a group whose workers report more than one GPU model runs
//!   nothing ([`mixed_models`]), because S is per GPU model.

use crate::contract::protocol::Verdict;
use std::collections::{BTreeMap, BTreeSet};

/// A shape of a job, waiting for a worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub job: u64,
    pub shape: u32,
    /// Expected work: the shape's T_SOL (seconds).
    pub cost: f64,
    /// Submission order (ties in cost go first come, first served).
    pub seq: u64,
    /// Where and why it was lost so far.
    pub losses: Vec<Loss>,
}

/// A unit lost with its worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Loss {
    /// The worker's index in the pool.
    pub worker: usize,
    /// Its name (host and device).
    pub name: String,
    /// `fault` or `timeout`.
    pub verdict: Verdict,
    pub why: String,
}

/// Where a job may run. Unbound parts are bound by the first worker that takes a unit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placement {
    pub group: Option<String>,
    /// The GPU model (device name) its T_SOL and S are for.
    pub model: Option<String>,
}

/// What the queue needs to know of a worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Seat {
    /// The group it was configured in ("" without one).
    pub group: String,
    /// Its GPU model, once it answered `hello` with a device.
    pub model: Option<String>,
    /// Up: it answered `hello` and has not been lost since.
    pub up: bool,
}

/// The GPU models of a group when it holds more than one: (worker index, model) of each
/// worker that reported one.
pub fn mixed_models(group: &str, seats: &[Seat]) -> Option<Vec<(usize, String)>> {
    let members: Vec<(usize, String)> = seats
        .iter()
        .enumerate()
        .filter(|(_, s)| s.group == group)
        .filter_map(|(i, s)| s.model.clone().map(|m| (i, m)))
        .collect();
    let models: BTreeSet<&str> = members.iter().map(|(_, m)| m.as_str()).collect();
    (models.len() > 1).then_some(members)
}

/// Whether worker `w` may run work of this placement (ignoring whether it is free).
pub fn fits(w: usize, placement: &Placement, seats: &[Seat]) -> bool {
    let Some(seat) = seats.get(w) else {
        return false;
    };
    let Some(model) = seat.model.as_deref() else {
        return false;
    };
    seat.up
        && placement.group.as_deref().is_none_or(|g| g == seat.group)
        && placement.model.as_deref().is_none_or(|m| m == model)
        && mixed_models(&seat.group, seats).is_none()
}

/// The queue: units waiting, and where each job may run.
#[derive(Debug, Default)]
pub struct Queue {
    pending: Vec<Unit>,
    placements: BTreeMap<u64, Placement>,
    seq: u64,
}

impl Queue {
    /// Queues a job's shapes, each with its cost. `model`: the GPU model the job's T_SOL is for
    /// (None: the first worker's).
    pub fn add_job(&mut self, job: u64, model: Option<String>, shapes: &[(u32, f64)]) {
        self.placements
            .insert(job, Placement { group: None, model });
        for (shape, cost) in shapes {
            self.seq += 1;
            self.pending.push(Unit {
                job,
                shape: *shape,
                cost: if cost.is_finite() { *cost } else { 0.0 },
                seq: self.seq,
                losses: Vec::new(),
            });
        }
    }

    /// Units waiting.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Units of one job waiting.
    pub fn waiting(&self, job: u64) -> usize {
        self.pending.iter().filter(|u| u.job == job).count()
    }

    /// Where a job may run.
    pub fn placement(&self, job: u64) -> Option<&Placement> {
        self.placements.get(&job)
    }

    /// Whether worker `w` may take this unit: it fits the job's placement, and the unit was
    /// not lost on it before unless no other worker that fits is up.
    fn may_take(&self, w: usize, u: &Unit, seats: &[Seat]) -> bool {
        let Some(p) = self.placements.get(&u.job) else {
            return false;
        };
        if !fits(w, p, seats) {
            return false;
        }
        let lost_here = u.losses.iter().any(|l| l.worker == w);
        if !lost_here {
            return true;
        }
        // Another worker that fits and has not lost it: wait for that one.
        !(0..seats.len())
            .any(|o| o != w && fits(o, p, seats) && !u.losses.iter().any(|l| l.worker == o))
    }

    /// The next unit for worker `w` (free now): the largest cost among the units it may take,
    /// the earliest submitted among equals. Binds the job's placement to the worker's group
    /// and model.
    pub fn take_for(&mut self, w: usize, seats: &[Seat]) -> Option<Unit> {
        let best = self
            .pending
            .iter()
            .enumerate()
            .filter(|(_, u)| self.may_take(w, u, seats))
            .max_by(|(_, a), (_, b)| a.cost.total_cmp(&b.cost).then(b.seq.cmp(&a.seq)))
            .map(|(i, _)| i)?;
        let u = self.pending.remove(best);
        if let (Some(p), Some(seat)) = (self.placements.get_mut(&u.job), seats.get(w)) {
            p.group.get_or_insert_with(|| seat.group.clone());
            if p.model.is_none() {
                p.model = seat.model.clone();
            }
        }
        Some(u)
    }

    /// A unit was lost with its worker. The first loss puts it back on the queue (None); the
    /// second is its result: the unit is returned with both losses for its verdict.
    pub fn lost(&mut self, mut u: Unit, loss: Loss) -> Option<Unit> {
        u.losses.push(loss);
        if u.losses.len() >= 2 {
            return Some(u);
        }
        self.pending.push(u);
        None
    }

    /// A unit that could not start on its worker (the worker was gone before it began): back
    /// on the queue, no loss counted.
    pub fn unstarted(&mut self, u: Unit) {
        self.pending.push(u);
    }

    /// Drops a job's waiting units and its placement; returns how many units were waiting.
    pub fn drop_job(&mut self, job: u64) -> usize {
        let before = self.pending.len();
        self.pending.retain(|u| u.job != job);
        self.placements.remove(&job);
        before - self.pending.len()
    }

    /// Forgets a finished job's placement.
    pub fn finish_job(&mut self, job: u64) {
        if self.waiting(job) == 0 {
            self.placements.remove(&job);
        }
    }

    /// Jobs with waiting units that no up worker fits, with why (for when no worker is
    /// starting any more: they would wait for ever).
    pub fn stranded(&self, seats: &[Seat], names: &[String]) -> Vec<(u64, String)> {
        let jobs: BTreeSet<u64> = self.pending.iter().map(|u| u.job).collect();
        jobs.into_iter()
            .filter_map(|job| {
                let p = self.placements.get(&job)?;
                if (0..seats.len()).any(|w| fits(w, p, seats)) {
                    return None;
                }
                Some((job, unplaceable(p, seats, names)))
            })
            .collect()
    }
}

/// Why no worker fits a placement, in words.
pub fn unplaceable(p: &Placement, seats: &[Seat], names: &[String]) -> String {
    let name = |i: usize| {
        names
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("worker {i}"))
    };
    // A mixed group among those the job could use is the likeliest cause: say it first.
    let groups: BTreeSet<&str> = seats
        .iter()
        .filter(|s| s.up && p.group.as_deref().is_none_or(|g| g == s.group))
        .map(|s| s.group.as_str())
        .collect();
    for g in &groups {
        if let Some(members) = mixed_models(g, seats) {
            let list: Vec<String> = members
                .iter()
                .map(|(i, m)| format!("{} has {m}", name(*i)))
                .collect();
            let which = if g.is_empty() {
                "the pool mixes GPU models".to_string()
            } else {
                format!("group `{g}` mixes GPU models")
            };
            return format!(
                "{which} ({}); S is per GPU model, so one operator's measurement is not spread over them: give the workers of each model their own `group` in the workers file",
                list.join(", ")
            );
        }
    }
    let up: Vec<String> = seats
        .iter()
        .enumerate()
        .filter(|(_, s)| s.up)
        .map(|(i, s)| format!("{} ({})", name(i), s.model.as_deref().unwrap_or("no GPU")))
        .collect();
    if up.is_empty() {
        return "no worker is up".into();
    }
    let want = match (&p.model, &p.group) {
        (Some(m), Some(g)) => format!("a {m} in group `{g}`"),
        (Some(m), None) => format!("a {m}"),
        (None, Some(g)) => format!("a GPU in group `{g}`"),
        (None, None) => "a GPU".into(),
    };
    format!("no worker up has {want} (up: {})", up.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seat(group: &str, model: &str) -> Seat {
        Seat {
            group: group.into(),
            model: Some(model.into()),
            up: true,
        }
    }

    fn loss(w: usize) -> Loss {
        Loss {
            worker: w,
            name: format!("w{w}"),
            verdict: Verdict::Fault,
            why: "connection closed".into(),
        }
    }

    #[test]
    fn the_largest_t_sol_goes_first_across_jobs() {
        let mut q = Queue::default();
        q.add_job(1, None, &[(0, 0.5), (1, 3.0), (2, 1.0)]);
        q.add_job(2, None, &[(0, 2.0), (1, 3.0), (2, 0.1)]);
        let seats = vec![seat("", "H200"), seat("", "H200")];
        let mut order = Vec::new();
        while let Some(u) = q.take_for(order.len() % 2, &seats) {
            order.push((u.job, u.shape));
        }
        // Equal costs: the earlier submitted first.
        assert_eq!(order, vec![(1, 1), (2, 1), (2, 0), (1, 2), (1, 0), (2, 2)]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_lost_unit_is_requeued_once_then_it_is_the_result() {
        let mut q = Queue::default();
        q.add_job(7, None, &[(3, 1.0)]);
        let seats = vec![seat("", "H200"), seat("", "H200")];
        let u = q.take_for(0, &seats).unwrap();
        assert_eq!(q.lost(u, loss(0)), None);
        assert_eq!(q.len(), 1);
        // Worker 0 lost it: worker 1, which fits, gets it; worker 0 does not.
        assert_eq!(q.take_for(0, &seats), None);
        let u = q.take_for(1, &seats).unwrap();
        let last = q.lost(u, loss(1)).expect("the second loss is the result");
        assert_eq!(last.losses.len(), 2);
        assert!(q.is_empty());
    }

    #[test]
    fn a_unit_lost_on_the_only_worker_goes_back_to_it() {
        let mut q = Queue::default();
        q.add_job(1, None, &[(0, 1.0)]);
        let mut seats = vec![seat("", "H200"), seat("", "H200")];
        seats[1].up = false;
        let u = q.take_for(0, &seats).unwrap();
        assert_eq!(q.lost(u, loss(0)), None);
        assert_eq!(q.take_for(0, &seats).map(|u| u.shape), Some(0));
    }

    #[test]
    fn a_job_stays_on_one_gpu_model_and_group() {
        let mut q = Queue::default();
        q.add_job(1, None, &[(0, 2.0), (1, 1.0)]);
        let seats = vec![seat("a", "H200"), seat("b", "H100"), seat("a", "H200")];
        assert_eq!(q.take_for(1, &seats).map(|u| u.shape), Some(0));
        assert_eq!(
            q.placement(1),
            Some(&Placement {
                group: Some("b".into()),
                model: Some("H100".into())
            })
        );
        // Worker 0 (group a) may not take the rest of job 1.
        assert_eq!(q.take_for(0, &seats), None);
        assert_eq!(q.take_for(1, &seats).map(|u| u.shape), Some(1));
        // A job submitted for a model runs only on that model.
        q.add_job(2, Some("H200".into()), &[(0, 1.0)]);
        assert_eq!(q.take_for(1, &seats), None);
        assert_eq!(q.take_for(2, &seats).map(|u| u.job), Some(2));
    }

    #[test]
    fn a_group_mixing_gpu_models_runs_nothing_and_says_why() {
        let mut q = Queue::default();
        q.add_job(1, None, &[(0, 1.0)]);
        let seats = vec![seat("", "NVIDIA H200"), seat("", "NVIDIA H100 80GB HBM3")];
        assert_eq!(q.take_for(0, &seats), None);
        assert_eq!(q.take_for(1, &seats), None);
        let names = vec!["box-a:0".to_string(), "box-b:0".to_string()];
        let stranded = q.stranded(&seats, &names);
        assert_eq!(stranded.len(), 1);
        let why = &stranded[0].1;
        assert!(why.contains("the pool mixes GPU models"), "{why}");
        assert!(why.contains("box-a:0 has NVIDIA H200"), "{why}");
        assert!(why.contains("box-b:0 has NVIDIA H100"), "{why}");
        assert!(why.contains("`group`"), "{why}");
        // Grouped by model, each group runs.
        let seats = vec![seat("h200", "NVIDIA H200"), seat("h100", "NVIDIA H100")];
        assert_eq!(q.take_for(1, &seats).map(|u| u.job), Some(1));
    }

    #[test]
    fn a_job_for_a_model_nobody_has_is_stranded_with_the_workers_named() {
        let mut q = Queue::default();
        q.add_job(4, Some("NVIDIA B200".into()), &[(0, 1.0)]);
        let seats = vec![seat("", "NVIDIA H200")];
        let s = q.stranded(&seats, &["box:0".into()]);
        assert!(
            s[0].1.contains("no worker up has a NVIDIA B200")
                && s[0].1.contains("box:0 (NVIDIA H200)"),
            "{s:?}"
        );
        assert_eq!(q.drop_job(4), 1);
        assert!(q.is_empty() && q.placement(4).is_none());
    }
}
