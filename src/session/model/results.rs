//! A measurement's per-shape results. Each shape's result is held whole, or — for a session read
//! lazily from a large file (`session::timeline`) — as its brief: the shape, its verdict and S
//! (all a revision's verdict and S_op need) and where its line lies in the file. A brief is
//! filled with the whole result when its revision is shown (`Model::fill_results`), and shed
//! again when another is (`Model::shed_results`); filled or not, the figures are those of the
//! same line of the file.

use crate::contract::protocol::{ShapeResult, Verdict};
use crate::suite::roofline::{ShapeScore, s_op};
use std::collections::BTreeMap;

/// Where a record's line lies in its session file: byte offset and length (end of line
/// included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub offset: u64,
    pub len: u32,
}

/// What the state keeps of a shape result left in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Brief {
    pub shape: u32,
    pub verdict: Verdict,
    pub s: Option<f64>,
    /// Passed the benchmark-compatible level (for S_op under the benchmark's rule).
    pub bench_ok: bool,
    pub place: Place,
}

impl Brief {
    pub fn of(r: &ShapeResult, place: Place) -> Brief {
        Brief {
            shape: r.shape,
            verdict: r.verdict.clone(),
            s: r.s,
            bench_ok: r.bench_ok,
            place,
        }
    }
}

#[derive(Debug, Clone)]
enum Slot {
    /// The whole result; with the place it was read from when it was filled from a brief.
    Whole(Box<ShapeResult>, Option<Place>),
    Brief(Brief),
}

/// A whole result equals another whatever it was read from.
impl PartialEq for Slot {
    fn eq(&self, other: &Slot) -> bool {
        match (self, other) {
            (Slot::Whole(a, _), Slot::Whole(b, _)) => a == b,
            (Slot::Brief(a), Slot::Brief(b)) => a == b,
            _ => false,
        }
    }
}

impl Slot {
    fn verdict(&self) -> &Verdict {
        match self {
            Slot::Whole(r, _) => &r.verdict,
            Slot::Brief(b) => &b.verdict,
        }
    }
    fn s(&self) -> Option<f64> {
        match self {
            Slot::Whole(r, _) => r.s,
            Slot::Brief(b) => b.s,
        }
    }
    fn bench_ok(&self) -> bool {
        match self {
            Slot::Whole(r, _) => r.bench_ok,
            Slot::Brief(b) => b.bench_ok,
        }
    }
}

/// Per-shape results by shape id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Results(BTreeMap<u32, Slot>);

impl Results {
    /// A shape's whole result (None also while it is only a brief).
    pub fn get(&self, shape: &u32) -> Option<&ShapeResult> {
        match self.0.get(shape)? {
            Slot::Whole(r, _) => Some(r),
            Slot::Brief(_) => None,
        }
    }

    /// The whole results, by shape id (briefs left out).
    pub fn values(&self) -> impl Iterator<Item = &ShapeResult> {
        self.0.values().filter_map(|s| match s {
            Slot::Whole(r, _) => Some(&**r),
            Slot::Brief(_) => None,
        })
    }

    /// The whole results with their shape ids, by shape id (briefs left out).
    pub fn iter(&self) -> impl Iterator<Item = (&u32, &ShapeResult)> {
        self.0.iter().filter_map(|(id, s)| match s {
            Slot::Whole(r, _) => Some((id, &**r)),
            Slot::Brief(_) => None,
        })
    }

    /// Shapes with a result, whole or brief.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn insert(&mut self, shape: u32, r: ShapeResult) {
        self.0.insert(shape, Slot::Whole(Box::new(r), None));
    }

    pub fn insert_brief(&mut self, b: Brief) {
        self.0.insert(b.shape, Slot::Brief(b));
    }

    /// Every shape's verdict, by shape id.
    pub fn verdicts(&self) -> impl Iterator<Item = &Verdict> {
        self.0.values().map(Slot::verdict)
    }

    /// S_op of the results: the median of S over the shapes, a shape that did not pass counting
    /// 0 (`contract::outcome::s_op_of`).
    pub fn s_op(&self) -> f64 {
        self.s_op_where(|_| true)
    }

    /// S_op under the benchmark's rule: a shape counts only when it also passed the
    /// benchmark-compatible level (`contract::outcome::s_op_bench_of`).
    pub fn s_op_bench(&self) -> f64 {
        self.s_op_where(Slot::bench_ok)
    }

    fn s_op_where(&self, counts: impl Fn(&Slot) -> bool) -> f64 {
        let scores: Vec<ShapeScore> = self
            .0
            .values()
            .map(|r| match r.s() {
                Some(s) if *r.verdict() == Verdict::Pass && counts(r) => ShapeScore::Passed(s),
                _ => ShapeScore::Failed,
            })
            .collect();
        s_op(&scores)
    }

    /// Where the briefs' lines are, by shape id (empty when every result is whole).
    pub fn briefs(&self) -> Vec<Brief> {
        self.0
            .values()
            .filter_map(|s| match s {
                Slot::Brief(b) => Some(b.clone()),
                Slot::Whole(..) => None,
            })
            .collect()
    }

    /// Fills briefs with their whole results (a result for a shape without a brief, or read
    /// from another place, is ignored).
    pub fn fill(&mut self, read: Vec<(Place, ShapeResult)>) {
        for (place, r) in read {
            if let Some(slot) = self.0.get_mut(&r.shape)
                && matches!(slot, Slot::Brief(b) if b.place == place)
            {
                *slot = Slot::Whole(Box::new(r), Some(place));
            }
        }
    }

    /// Turns results filled from briefs back into briefs.
    pub fn shed(&mut self) {
        for slot in self.0.values_mut() {
            if let Slot::Whole(r, Some(place)) = slot {
                *slot = Slot::Brief(Brief::of(r, *place));
            }
        }
    }
}
