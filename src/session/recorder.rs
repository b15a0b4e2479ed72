//! The one recorder of a session: it numbers every event (`seq`), every measurement (`mid`) and
//! every revision (per operator) for all writers — the TUI, `measure` and the agent — so that a
//! session resumed by any of them continues the numbering of the others and no number is used
//! twice. `Ids` is shared (`Arc`) with tasks that number ahead of recording (the agent in the
//! TUI).

use super::event::{FORMAT_VERSION, Record, SessionEvent};
use super::model::Model;
use super::store::now;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// Measurement and revision numbers, shared by every writer of one session.
#[derive(Debug, Default)]
pub struct Ids {
    /// The highest measurement id used.
    mid: AtomicU64,
    /// Per operator, the next revision number (revision 0 is the suite baseline).
    revs: Mutex<BTreeMap<String, u32>>,
}

impl Ids {
    /// Numbers continuing after what a session holds (its recorded and shown revisions).
    pub fn from_model(m: &Model) -> Ids {
        let ids = Ids::default();
        ids.mid.store(m.last_mid, SeqCst);
        for (op, o) in &m.ops {
            ids.raise_rev(op, o.next_rev());
        }
        ids
    }

    /// The next measurement id.
    pub fn next_mid(&self) -> u64 {
        self.mid.fetch_add(1, SeqCst) + 1
    }

    /// The next revision number of `op` (at least 1).
    pub fn next_rev(&self, op: &str) -> u32 {
        let mut m = self.revs.lock().unwrap_or_else(|e| e.into_inner());
        let e = m.entry(op.to_string()).or_insert(1);
        *e = (*e).max(1);
        let r = *e;
        *e += 1;
        r
    }

    fn raise_rev(&self, op: &str, next: u32) {
        let mut m = self.revs.lock().unwrap_or_else(|e| e.into_inner());
        let e = m.entry(op.to_string()).or_insert(next);
        *e = (*e).max(next);
    }

    /// Keeps numbers recorded by someone else (a resumed file, a replayed event) from being
    /// handed out again.
    pub fn observe(&self, ev: &SessionEvent) {
        match ev {
            SessionEvent::Revision { op, rev, .. } => self.raise_rev(op, rev + 1),
            SessionEvent::MeasureStart { mid, .. } => {
                self.mid.fetch_max(*mid, SeqCst);
            }
            _ => {}
        }
    }
}

/// Numbers events into records: `seq` (one more than the last record of the session) and the
/// time; measurement and revision numbers through its `Ids`.
#[derive(Debug, Clone)]
pub struct Recorder {
    seq: u64,
    ids: std::sync::Arc<Ids>,
}

impl Recorder {
    /// A recorder continuing a session whose state is `m` (built from its records).
    pub fn for_model(m: &Model) -> Recorder {
        Recorder {
            seq: m.last_seq,
            ids: std::sync::Arc::new(Ids::from_model(m)),
        }
    }

    /// The shared numbers (for a task that numbers revisions and measurements itself).
    pub fn ids(&self) -> std::sync::Arc<Ids> {
        self.ids.clone()
    }

    /// The record of the next event.
    pub fn stamp(&mut self, event: SessionEvent) -> Record {
        self.ids.observe(&event);
        self.seq += 1;
        Record {
            v: FORMAT_VERSION,
            seq: self.seq,
            t: now(),
            event,
        }
    }
}
