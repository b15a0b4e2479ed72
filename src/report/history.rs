//! Each operator's history from the sessions that touched it: every revision of the operator
//! that a session measured or decided, with its S_op (or verdict), decision and date.
//!
//! Sessions are read from the workspace's `sessions/`, from the `sessions_dir` setting when it
//! names another folder, and from wherever a standing record's origin session lies. A file that
//! cannot be read is a warning naming its path; the others are still read. A session of another
//! suite is skipped (and listed as such).

use crate::session::model::MeasureStatus;
use crate::session::{Decision, Model, Record, RevVerdict, SessionEvent};
use crate::standing::{Origin, Standing};
use crate::suite::Suite;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One revision of an operator in a session.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HistoryItem {
    /// The session, as a standing record names it (its path inside the workspace).
    pub session: String,
    pub rev: u32,
    pub parent: Option<u32>,
    /// `baseline`, `human`, `tuner` or the model's name.
    pub author: String,
    pub rationale: String,
    /// `S 0.236`, `compile error`, `incorrect`, `timeout`, … (the session's verdict).
    pub verdict: String,
    /// S_op when the revision passed on every shape measured.
    pub s_op: Option<f64>,
    /// `quick` or `full`.
    pub mode: String,
    /// When its latest measurement ended (seconds since the Unix epoch).
    pub measured_at: Option<f64>,
    /// `accepted` / `rejected`, and by whom (`human` / `auto`).
    pub decision: Option<String>,
    pub decided_at: Option<f64>,
    /// This revision is the standing's incumbent (the record's origin names it).
    pub incumbent: bool,
}

impl HistoryItem {
    /// When it happened: the measurement's end, else the decision.
    pub fn at(&self) -> Option<f64> {
        self.measured_at.or(self.decided_at)
    }
}

/// What the sessions say, by operator.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sessions {
    pub by_op: BTreeMap<String, Vec<HistoryItem>>,
    /// The session files read (as labelled).
    pub read: Vec<String>,
    /// Sessions not read, and why (another suite).
    pub skipped: Vec<String>,
    /// Files that could not be read, named with their path.
    pub warnings: Vec<String>,
    /// The folders searched.
    pub dirs: Vec<PathBuf>,
}

/// The session files in `dirs` (`*.jsonl`, sorted by name within each folder) and the origin
/// sessions of the standing's records, each once. A folder that exists but cannot be listed is
/// a warning.
pub fn session_files(
    ws: &Path,
    dirs: &[PathBuf],
    standing: &Standing,
) -> (Vec<PathBuf>, Vec<String>) {
    let mut files = Vec::new();
    let mut warnings = Vec::new();
    for d in dirs {
        match std::fs::read_dir(d) {
            Ok(rd) => {
                let mut here: Vec<PathBuf> = rd
                    .filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "jsonl"))
                    .collect();
                here.sort();
                files.extend(here);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => warnings.push(format!("{}: cannot list the sessions: {e}", d.display())),
        }
    }
    for e in standing.entries.values() {
        if let Origin::Session { session, .. } = &e.record.origin {
            let p = ws.join(session);
            if p.is_file() {
                files.push(p);
            }
        }
    }
    let mut seen = BTreeSet::new();
    files.retain(|p| seen.insert(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())));
    (files, warnings)
}

/// Reads the sessions of `files` (a file that cannot be read becomes a warning) and gathers
/// every operator's history, marking the standing's incumbents.
pub fn read(ws: &Path, suite: &Suite, files: &[PathBuf], standing: &Standing) -> Sessions {
    let mut out = Sessions::default();
    for f in files {
        let label = crate::standing::accept::session_label(ws, f);
        let loaded = match crate::session::load(f) {
            Ok(l) => l,
            Err(e) => {
                out.warnings
                    .push(format!("{}: session not read: {e}", f.display()));
                continue;
            }
        };
        out.warnings.extend(loaded.warnings.iter().cloned());
        let of_suite = loaded.records.iter().find_map(|r| match &r.event {
            SessionEvent::RunStart { suite, .. } => Some(suite.as_str()),
            _ => None,
        });
        if let Some(other) = of_suite
            && other != suite.name
        {
            out.skipped.push(format!(
                "{label}: a session of the suite `{other}`, not `{}`",
                suite.name
            ));
            continue;
        }
        let model = Model::from_records(suite, &loaded.records);
        for (op, items) in of_session(&label, &loaded.records, &model) {
            out.by_op.entry(op).or_default().extend(items);
        }
        out.read.push(label);
    }
    for (op, items) in out.by_op.iter_mut() {
        mark_incumbent(items, standing.entry(op).map(|e| &e.record.origin));
        items.sort_by(|a, b| {
            a.at()
                .unwrap_or(f64::INFINITY)
                .total_cmp(&b.at().unwrap_or(f64::INFINITY))
                .then_with(|| a.session.cmp(&b.session))
                .then(a.rev.cmp(&b.rev))
        });
    }
    out
}

/// Marks the revision a standing record's origin names.
fn mark_incumbent(items: &mut [HistoryItem], origin: Option<&Origin>) {
    for it in items.iter_mut() {
        it.incumbent = matches!(origin, Some(Origin::Session { session, rev })
            if *session == it.session && *rev == it.rev);
    }
}

/// The history one session holds: per operator, every recorded revision that was measured to
/// the end or decided, in revision order, dated by the session's own event times.
pub fn of_session(
    label: &str,
    records: &[Record],
    model: &Model,
) -> BTreeMap<String, Vec<HistoryItem>> {
    // When each revision's latest measurement ended and when it was last decided.
    let mut latest_mid: BTreeMap<(&str, u32), u64> = BTreeMap::new();
    let mut measured_at: BTreeMap<(&str, u32), f64> = BTreeMap::new();
    let mut decided_at: BTreeMap<(&str, u32), f64> = BTreeMap::new();
    for r in records {
        match &r.event {
            SessionEvent::MeasureStart { op, rev, mid, .. } => {
                latest_mid.insert((op, *rev), *mid);
                measured_at.remove(&(op.as_str(), *rev));
            }
            SessionEvent::MeasureDone { op, rev, mid, .. }
                if latest_mid.get(&(op.as_str(), *rev)) == Some(mid) =>
            {
                measured_at.insert((op, *rev), r.t);
            }
            SessionEvent::Decision { op, rev, .. } => {
                decided_at.insert((op, *rev), r.t);
            }
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    for (name, o) in &model.ops {
        let items: Vec<HistoryItem> = o
            .revisions
            .iter()
            .filter(|r| r.recorded)
            .filter(|r| {
                matches!(r.measurement.status, MeasureStatus::Done(_))
                    || r.measurement.compiled == Some(false)
                    || r.decision.is_some()
            })
            .map(|r| {
                let v = r.verdict();
                let key = (name.as_str(), r.rev);
                HistoryItem {
                    session: label.to_string(),
                    rev: r.rev,
                    parent: r.parent,
                    author: r.author.label(),
                    rationale: r.rationale.clone(),
                    verdict: match &v {
                        RevVerdict::Unmeasured | RevVerdict::Measuring => "not measured".into(),
                        other => other.label(),
                    },
                    s_op: v.score(),
                    mode: r.measurement.mode.clone(),
                    measured_at: measured_at.get(&key).copied(),
                    decision: r.decision.map(|d| {
                        let by = match r.decided_by {
                            Some(crate::session::DecidedBy::Auto) => " (auto)",
                            Some(crate::session::DecidedBy::Human) => " (human)",
                            None => "",
                        };
                        match d {
                            Decision::Accepted => format!("accepted{by}"),
                            Decision::Rejected => format!("rejected{by}"),
                        }
                    }),
                    decided_at: r.decision.and(decided_at.get(&key).copied()),
                    incumbent: false,
                }
            })
            .collect();
        if !items.is_empty() {
            out.insert(name.clone(), items);
        }
    }
    out
}
