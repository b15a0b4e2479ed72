//! A session's records as replay keeps them: every record whole, except that the shape results
//! of a large file (`LAZY_FROM` bytes or more) keep only what the state needs of them — operator,
//! revision, measurement, shape, verdict, S — and where their line lies in the file. Those are
//! folded into the state as briefs (`Model::apply_brief`) and read whole only for the revision
//! on screen (`read_results`), so that a session of 100,000 events neither parses nor holds
//! 100,000 results (docs/performance.md).
//!
//! Invariants: the file is read line by line and never held whole; what a timeline keeps
//! folds into the state the records would fold into (`model_at`), briefs standing for whole
//! results; loading checks every line as `store::load` does (the same warnings and errors).

use super::canonical;
use super::event::{Record, SessionEvent};
use super::model::{Brief, Model, Place};
use super::store::{Loaded, SessionError, Walk, Walked, each_line};
use crate::contract::protocol::ShapeResult;
use crate::suite::Suite;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Files of this many bytes or more keep their shape results in the file.
pub const LAZY_FROM: u64 = 8 << 20;

/// A shape result left in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapeAt {
    pub seq: u64,
    pub t: f64,
    pub op: Arc<str>,
    pub rev: u32,
    pub mid: u64,
    pub brief: Brief,
}

/// One record as kept.
#[derive(Debug, Clone, PartialEq)]
pub enum Kept {
    Whole(Box<Record>),
    Shape(ShapeAt),
}

impl Kept {
    pub fn t(&self) -> f64 {
        match self {
            Kept::Whole(r) => r.t,
            Kept::Shape(s) => s.t,
        }
    }

    /// The event's kind (`shape_result`, `revision`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Kept::Whole(r) => r.event.kind(),
            Kept::Shape(_) => "shape_result",
        }
    }

    /// The record itself, when kept whole.
    pub fn record(&self) -> Option<&Record> {
        match self {
            Kept::Whole(r) => Some(r),
            Kept::Shape(_) => None,
        }
    }

    /// The operator and revision a revision, measurement or decision event is about.
    pub fn touches(&self) -> Option<(&str, u32)> {
        match self {
            Kept::Shape(s) => Some((&s.op, s.rev)),
            Kept::Whole(r) => match &r.event {
                SessionEvent::Revision { op, rev, .. }
                | SessionEvent::MeasureStart { op, rev, .. }
                | SessionEvent::Compiled { op, rev, .. }
                | SessionEvent::ShapeResult { op, rev, .. }
                | SessionEvent::MeasureDone { op, rev, .. }
                | SessionEvent::Decision { op, rev, .. } => Some((op, *rev)),
                _ => None,
            },
        }
    }

    pub fn is_revision(&self) -> bool {
        matches!(self, Kept::Whole(r) if matches!(r.event, SessionEvent::Revision { .. }))
    }

    /// Folds the record into the state (`Model::apply`, or `Model::apply_brief`).
    pub fn apply(&self, m: &mut Model) {
        match self {
            Kept::Whole(r) => m.apply(r),
            Kept::Shape(s) => m.apply_brief(s.seq, s.t, &s.op, s.rev, s.mid, s.brief.clone()),
        }
    }
}

/// A session's records as kept, and the file briefs are read from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// The file of the briefs' places (None when every record is whole).
    pub file: Option<PathBuf>,
    kept: Vec<Kept>,
}

impl From<Vec<Record>> for Timeline {
    fn from(records: Vec<Record>) -> Timeline {
        Timeline {
            file: None,
            kept: records
                .into_iter()
                .map(|r| Kept::Whole(Box::new(r)))
                .collect(),
        }
    }
}

impl Timeline {
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<&Kept> {
        self.kept.get(i)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Kept> {
        self.kept.iter()
    }

    /// The records kept whole, in order.
    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.kept.iter().filter_map(Kept::record)
    }

    /// The state after the first `pos` records.
    pub fn model_at(&self, suite: &Suite, pos: usize) -> Model {
        let mut m = Model::new(suite);
        self.apply(&mut m, 0..pos);
        m
    }

    /// Folds records `range` into a state.
    pub fn apply(&self, m: &mut Model, range: std::ops::Range<usize>) {
        let end = range.end.min(self.kept.len());
        for k in &self.kept[range.start.min(end)..end] {
            k.apply(m);
        }
    }
}

/// Reads a session file into a timeline, keeping shape results as briefs when the file has
/// `lazy_from` bytes or more. Returns the load's warnings, valid prefix and damaged tail in a
/// `Loaded` without records.
pub fn load(path: &Path, lazy_from: u64) -> Result<(Timeline, Loaded), SessionError> {
    let lazy = std::fs::metadata(path).is_ok_and(|m| m.len() >= lazy_from);
    let mut walk = Walk::new(&path.display().to_string());
    let mut ops: Vec<Arc<str>> = Vec::new();
    each_line(path, |raw, offset, len, last| {
        walk.line(raw, raw.len(), last, |line| {
            if lazy && let Some((env, l)) = canonical::shape_line(line) {
                let op = match ops.iter().find(|o| ***o == *l.op) {
                    Some(o) => o.clone(),
                    None => {
                        let o: Arc<str> = l.op.into();
                        ops.push(o.clone());
                        o
                    }
                };
                let place = Place {
                    offset,
                    len: len as u32,
                };
                return Ok(Walked {
                    seq: env.seq,
                    unknown: false,
                    item: Kept::Shape(ShapeAt {
                        seq: env.seq,
                        t: env.t,
                        op,
                        rev: l.rev,
                        mid: l.mid,
                        brief: Brief::of(&l.result, place),
                    }),
                });
            }
            let r = super::parse_line(line)?;
            Ok(Walked {
                seq: r.seq,
                unknown: matches!(r.event, SessionEvent::Unknown),
                item: Kept::Whole(Box::new(r)),
            })
        })
    })?;
    let (loaded, kept) = walk.finish();
    Ok((
        Timeline {
            file: lazy.then(|| path.to_path_buf()),
            kept,
        },
        loaded,
    ))
}

/// Reads the whole results of briefs from the session file: each line at its place must be the
/// `shape_result` of the brief's operator, revision, measurement and shape.
pub fn read_results(
    file: &Path,
    op: &str,
    rev: u32,
    mid: u64,
    briefs: &[Brief],
) -> Result<Vec<(Place, ShapeResult)>, String> {
    use std::io::{Read, Seek, SeekFrom};
    let shown = file.display();
    let mut f = std::fs::File::open(file).map_err(|e| format!("{shown}: {e}"))?;
    let mut out = Vec::with_capacity(briefs.len());
    let mut buf = Vec::new();
    for b in briefs {
        buf.resize(b.place.len as usize, 0);
        f.seek(SeekFrom::Start(b.place.offset))
            .and_then(|_| f.read_exact(&mut buf))
            .map_err(|e| format!("{shown}: {e}"))?;
        let text = String::from_utf8_lossy(&buf);
        match super::parse_line(text.trim_end_matches(['\n', '\r'])).map(|r| r.event) {
            Ok(SessionEvent::ShapeResult {
                op: o,
                rev: r,
                mid: m,
                result,
            }) if o == op && r == rev && m == mid && result.shape == b.shape => {
                out.push((b.place, result))
            }
            _ => {
                return Err(format!(
                    "{shown}: the file changed since it was read (no result of {op} v{rev} shape {} at byte {})",
                    b.shape, b.place.offset
                ));
            }
        }
    }
    Ok(out)
}
