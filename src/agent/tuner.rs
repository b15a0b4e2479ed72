//! The built-in tuner (no LLM): coordinate descent over the `[tune]` parameters of the launch
//! plan and over the knowledge base's template variants for the operator, with random restarts
//! as its dropout. Every step is a real revision: the `[defines]` table of the source changes.

use super::SplitMix;
use crate::contract::plan;
use crate::suite::expr::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A source whose launch plan the tuner cannot read: its name and the plan's error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{name}: {source}")]
pub struct BaseError {
    pub name: String,
    pub source: plan::PlanError,
}

/// A starting source of the search: the incumbent, or a template variant.
#[derive(Debug, Clone)]
pub struct Base {
    pub name: String,
    pub source: String,
    /// Tunable parameters and their values (plan order).
    pub tune: Vec<(String, Vec<Value>)>,
    /// Indices of the values in use.
    pub start: Vec<usize>,
}

impl Base {
    pub fn from_source(name: &str, source: &str) -> Result<Base, BaseError> {
        let p = plan::parse(source).map_err(|source| BaseError {
            name: name.to_string(),
            source,
        })?;
        let mut tune = Vec::new();
        let mut start = Vec::new();
        for (k, vals) in &p.tune {
            let cur = p.defines.get(k);
            let idx = cur
                .and_then(|c| vals.iter().position(|v| v.num_eq(c)))
                .unwrap_or(0);
            tune.push((k.clone(), vals.clone()));
            start.push(idx);
        }
        Ok(Base {
            name: name.to_string(),
            source: source.to_string(),
            tune,
            start,
        })
    }

    pub fn size(&self) -> usize {
        self.tune
            .iter()
            .map(|(_, v)| v.len())
            .product::<usize>()
            .max(1)
    }

    /// The defines of a point.
    pub fn defines(&self, values: &[usize]) -> BTreeMap<String, Value> {
        self.tune
            .iter()
            .zip(values)
            .map(|((k, vs), i)| (k.clone(), vs[*i].clone()))
            .collect()
    }
}

/// A configuration: base index and value indices.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Point {
    pub base: usize,
    pub values: Vec<usize>,
}

/// What a step is, for the revision's hypothesis.
#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    /// Coordinate descent along one parameter.
    Coordinate(String),
    /// Switch to another template variant.
    Variant,
    /// A random restart (the tuner's dropout).
    Restart,
}

#[derive(Debug, Clone)]
pub struct Search {
    pub bases: Vec<Base>,
    measured: HashMap<Point, Option<f64>>,
    current: Point,
    current_score: Option<f64>,
    /// Coordinate index: 0 is the variant axis when there are several bases, then parameters.
    coord: usize,
    queue: VecDeque<Point>,
    /// Coordinates swept in a row without improvement.
    stale: usize,
    /// The point handed out and not yet reported.
    outstanding: Option<(Point, StepKind)>,
    restart_pending: bool,
    pub restarts: usize,
    rng: SplitMix,
}

fn score_gt(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => x > y,
        (Some(_), None) => true,
        _ => false,
    }
}

impl Search {
    /// A search starting at base 0's current defines, whose score is known (the incumbent's).
    pub fn new(bases: Vec<Base>, start_score: Option<f64>, seed: u64) -> Search {
        assert!(!bases.is_empty());
        let start = Point {
            base: 0,
            values: bases[0].start.clone(),
        };
        let mut measured = HashMap::new();
        measured.insert(start.clone(), start_score);
        Search {
            bases,
            measured,
            current: start,
            current_score: start_score,
            coord: 0,
            queue: VecDeque::new(),
            stale: 0,
            outstanding: None,
            restart_pending: false,
            restarts: 0,
            rng: SplitMix(seed),
        }
    }

    fn multi(&self) -> bool {
        self.bases.len() > 1
    }

    fn coords(&self, p: &Point) -> usize {
        self.bases[p.base].tune.len() + usize::from(self.multi())
    }

    #[cfg(test)]
    pub fn measured_count(&self) -> usize {
        self.measured.len()
    }

    #[cfg(test)]
    pub fn is_measured(&self, p: &Point) -> bool {
        self.measured.contains_key(p)
    }

    #[cfg(test)]
    pub fn best(&self) -> Option<(Point, f64)> {
        self.measured
            .iter()
            .filter_map(|(p, s)| s.map(|s| (p.clone(), s)))
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
    }

    /// Records what a configuration measured without it having been proposed (resume).
    pub fn seed_measured(&mut self, p: Point, s: Option<f64>) {
        if score_gt(s, self.current_score) {
            self.current = p.clone();
            self.current_score = s;
        }
        self.measured.insert(p, s);
    }

    /// The neighbours of the current point along coordinate `c`, not yet measured.
    fn sweep(&self, c: usize) -> Vec<Point> {
        let cur = &self.current;
        let mut out = Vec::new();
        if self.multi() && c == 0 {
            for (b, base) in self.bases.iter().enumerate() {
                if b != cur.base {
                    out.push(Point {
                        base: b,
                        values: base.start.clone(),
                    });
                }
            }
        } else {
            let k = c - usize::from(self.multi());
            let n = self.bases[cur.base].tune[k].1.len();
            for v in 0..n {
                if v != cur.values[k] {
                    let mut p = cur.clone();
                    p.values[k] = v;
                    out.push(p);
                }
            }
        }
        out.retain(|p| !self.measured.contains_key(p));
        out
    }

    /// A random configuration not yet measured, or None when everything was.
    fn random_unmeasured(&mut self) -> Option<Point> {
        let total: usize = self.bases.iter().map(|b| b.size()).sum();
        if self.measured.len() >= total {
            return None;
        }
        for _ in 0..256 {
            let b = self.rng.below(self.bases.len());
            let values: Vec<usize> = self.bases[b]
                .tune
                .iter()
                .map(|(_, vs)| self.rng.below(vs.len()))
                .collect();
            let p = Point { base: b, values };
            if !self.measured.contains_key(&p) {
                return Some(p);
            }
        }
        // Dense spaces: enumerate.
        for (b, base) in self.bases.iter().enumerate() {
            let dims: Vec<usize> = base.tune.iter().map(|(_, v)| v.len()).collect();
            let mut idx = vec![0usize; dims.len()];
            loop {
                let p = Point {
                    base: b,
                    values: idx.clone(),
                };
                if !self.measured.contains_key(&p) {
                    return Some(p);
                }
                let mut i = 0;
                while i < dims.len() {
                    idx[i] += 1;
                    if idx[i] < dims[i] {
                        break;
                    }
                    idx[i] = 0;
                    i += 1;
                }
                if i == dims.len() {
                    break;
                }
            }
        }
        None
    }

    /// Forces a random restart at the next step (the loop's dropout).
    pub fn force_restart(&mut self) {
        self.queue.clear();
        self.stale = self.coords(&self.current.clone()).max(1);
    }

    /// The next configuration to measure, or None when the space is exhausted.
    pub fn next_point(&mut self) -> Option<(Point, StepKind)> {
        if let Some(o) = &self.outstanding {
            return Some(o.clone());
        }
        loop {
            if let Some(p) = self.queue.pop_front() {
                if self.measured.contains_key(&p) {
                    continue;
                }
                let kind = if p.base != self.current.base {
                    StepKind::Variant
                } else {
                    let k = p
                        .values
                        .iter()
                        .zip(&self.current.values)
                        .position(|(a, b)| a != b)
                        .unwrap_or(0);
                    StepKind::Coordinate(self.bases[p.base].tune[k].0.clone())
                };
                self.outstanding = Some((p.clone(), kind.clone()));
                return Some((p, kind));
            }
            // The sweep of the current coordinate is over: move to its best point.
            let ncoords = self.coords(&self.current);
            if self.stale >= ncoords.max(1) {
                // A full pass without improvement: a local optimum. Restart at random.
                let p = self.random_unmeasured()?;
                self.restarts += 1;
                self.restart_pending = true;
                self.stale = 0;
                self.coord = 0;
                self.outstanding = Some((p.clone(), StepKind::Restart));
                return Some((p, StepKind::Restart));
            }
            let c = self.coord % ncoords.max(1);
            self.coord = c + 1;
            let pts = if ncoords == 0 { vec![] } else { self.sweep(c) };
            if pts.is_empty() {
                self.stale += 1;
                continue;
            }
            self.queue.extend(pts);
            // Mark the coordinate; it is judged when its queue empties.
            self.stale += 1;
        }
    }

    /// Reports the score of the outstanding configuration (None: it failed).
    pub fn report(&mut self, p: &Point, score: Option<f64>) {
        self.measured.insert(p.clone(), score);
        let was_restart = self.restart_pending;
        self.outstanding = None;
        if was_restart {
            self.restart_pending = false;
            self.current = p.clone();
            self.current_score = score;
            self.stale = 0;
            return;
        }
        if score_gt(score, self.current_score) {
            // Best-improvement along the coordinate: the rest of its sweep still runs (its
            // points differ from the new current point in this coordinate only).
            self.current = p.clone();
            self.current_score = score;
            self.stale = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(name: &str, params: &[(&str, &[i64])]) -> Base {
        Base {
            name: name.into(),
            source: String::new(),
            tune: params
                .iter()
                .map(|(k, vs)| {
                    (
                        k.to_string(),
                        vs.iter().map(|v| Value::Int(*v as i128)).collect(),
                    )
                })
                .collect(),
            start: vec![0; params.len()],
        }
    }

    /// Runs a search on a landscape; returns (best score, steps, restarts).
    fn drive(s: &mut Search, f: &dyn Fn(&Point) -> Option<f64>, max: usize) -> (usize, Vec<Point>) {
        let mut seen = Vec::new();
        for _ in 0..max {
            let Some((p, _)) = s.next_point() else { break };
            assert!(!seen.contains(&p), "{p:?} measured twice");
            assert!(!s.is_measured(&p), "{p:?} was already measured");
            seen.push(p.clone());
            s.report(&p, f(&p));
        }
        (seen.len(), seen)
    }

    #[test]
    fn coordinate_descent_finds_the_optimum_of_a_separable_landscape() {
        // Optimum at (3, 1, 2); separable, so one or two passes find it.
        let b = base(
            "k",
            &[
                ("A", &[1, 2, 3, 4, 5]),
                ("B", &[1, 2, 3]),
                ("C", &[1, 2, 3, 4]),
            ],
        );
        let f = |p: &Point| {
            let t = [3i64, 1, 2];
            let d: i64 = p
                .values
                .iter()
                .zip(t)
                .map(|(v, t)| (*v as i64 - t).abs())
                .sum();
            Some(10.0 - d as f64)
        };
        let mut s = Search::new(
            vec![b],
            f(&Point {
                base: 0,
                values: vec![0, 0, 0],
            }),
            7,
        );
        let (n, _) = drive(&mut s, &f, 25);
        let (bp, bs) = s.best().unwrap();
        assert_eq!(bp.values, vec![3, 1, 2]);
        assert_eq!(bs, 10.0);
        assert!(
            n < 60,
            "descent should need far fewer than the 60 points of the space"
        );
    }

    #[test]
    fn restarts_escape_a_local_optimum_and_nothing_is_measured_twice() {
        // Two basins: a local optimum at A=0,B=0 (score 5) and the global one at A=4,B=4 (9),
        // separated by a valley of failures (None) that coordinate moves cannot cross.
        let b = base("k", &[("A", &[0, 1, 2, 3, 4]), ("B", &[0, 1, 2, 3, 4])]);
        let f = |p: &Point| {
            let (a, b) = (p.values[0] as f64, p.values[1] as f64);
            if a >= 3.0 && b >= 3.0 {
                Some(9.0 - (4.0 - a) - (4.0 - b))
            } else if a <= 1.0 && b <= 1.0 {
                Some(5.0 - a - b)
            } else {
                None
            }
        };
        let mut s = Search::new(
            vec![b],
            f(&Point {
                base: 0,
                values: vec![0, 0],
            }),
            3,
        );
        let (n, _) = drive(&mut s, &f, 100);
        assert!(s.restarts >= 1, "a restart must happen");
        assert_eq!(s.best().unwrap().1, 9.0);
        // The whole space is 25 points; the start was measured already.
        assert!(n <= 24);
        assert!(s.next_point().is_none() || s.measured_count() < 25);
    }

    #[test]
    fn the_search_covers_template_variants() {
        let a = base("baseline", &[("X", &[1, 2])]);
        let b = base("template", &[("Y", &[1, 2, 3])]);
        let f = |p: &Point| {
            Some(if p.base == 1 {
                2.0 + p.values[0] as f64
            } else {
                1.0
            })
        };
        let mut s = Search::new(vec![a, b], Some(1.0), 1);
        drive(&mut s, &f, 20);
        let (bp, bs) = s.best().unwrap();
        assert_eq!((bp.base, bs), (1, 4.0));
        // Exhausted: every one of the 5 configurations measured, none twice.
        assert_eq!(s.measured_count(), 5);
        assert!(s.next_point().is_none());
    }
}
