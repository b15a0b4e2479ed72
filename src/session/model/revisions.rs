//! The revisions family of the reducer: a revision of an operator's kernel, the decision on
//! it (which moves the incumbent), and its profile.

use super::{LogLevel, Measurement, Model, Revision};
use crate::profile::Profile;
use crate::session::event::{DecidedBy, Decision, SessionEvent};

impl Model {
    /// Applies a `revision`, `decision` or `profile` event.
    pub(super) fn apply_revisions(&mut self, t: f64, ev: &SessionEvent) {
        match ev {
            SessionEvent::Revision {
                op,
                rev,
                parent,
                author,
                rationale,
                source,
                via,
                request_id,
                tokens_in,
                tokens_out,
                category,
                knowledge,
            } => {
                let new = Revision {
                    rev: *rev,
                    parent: *parent,
                    author: author.clone(),
                    rationale: rationale.clone(),
                    source: source.clone(),
                    via: via.clone(),
                    decision: None,
                    decided_by: None,
                    measurement: Measurement::default(),
                    recorded: true,
                    category: category.clone(),
                    knowledge: knowledge.clone(),
                    request_id: request_id.clone(),
                    tokens: match (tokens_in, tokens_out) {
                        (None, None) => None,
                        (a, b) => Some((a.unwrap_or(0), b.unwrap_or(0))),
                    },
                    profile: None,
                };
                self.revision(t, op, new);
            }
            SessionEvent::Decision {
                op,
                rev,
                decision,
                by,
            } => self.decision(t, op, *rev, *decision, *by),
            SessionEvent::Profile { op, rev, profile } => self.profile(t, op, *rev, profile),
            _ => unreachable!("Model::apply routes only revision events to apply_revisions"),
        }
    }

    /// Records a revision of `op`. A revision already known (recorded again, e.g. on resume)
    /// is replaced but keeps its measurement, decision and profile.
    fn revision(&mut self, t: f64, op: &str, new: Revision) {
        let rev = new.rev;
        let text = (rev > 0).then(|| {
            format!(
                "{op} v{rev} by {}{}: {}",
                new.author.label(),
                new.parent
                    .map(|p| format!(" (from v{p})"))
                    .unwrap_or_default(),
                new.rationale
            )
        });
        self.latest_op = Some(op.to_string());
        // Every revision a session refers to is recorded before its first child; a file
        // written before the starting kernel was kept lacks it (its state shows the suite's).
        let orphan = new.parent.filter(|p| {
            *p != rev
                && !self
                    .ops
                    .get(op)
                    .and_then(|o| o.rev(*p))
                    .is_some_and(|r| r.recorded)
        });
        if let Some(p) = orphan {
            self.log(
                t,
                LogLevel::Warn,
                format!(
                    "session: {op} v{rev} comes from v{p}, which the session does not hold; v{p} shows {}",
                    match self.ops.get(op).and_then(|o| o.rev(p)) {
                        Some(_) => "the suite's baseline, not necessarily the kernel it started from",
                        None => "nothing",
                    }
                ),
            );
        }
        let o = self.op_mut(op);
        if let Some(existing) = o.rev_mut(rev) {
            let m = std::mem::take(&mut existing.measurement);
            let d = (existing.decision, existing.decided_by);
            let prof = existing.profile.take();
            *existing = new;
            existing.profile = prof;
            existing.measurement = m;
            existing.decision = d.0;
            existing.decided_by = d.1;
        } else {
            let pos = o.revisions.partition_point(|r| r.rev < rev);
            o.revisions.insert(pos, new);
        }
        if rev == 0 && o.incumbent.is_none() {
            o.incumbent = Some(0);
        }
        if let Some(text) = text {
            self.log(t, LogLevel::Info, text);
        }
    }

    /// Records a decision on a revision: accepting makes it the incumbent; rejecting the
    /// incumbent falls back.
    fn decision(&mut self, t: f64, op: &str, rev: u32, decision: Decision, by: DecidedBy) {
        let o = self.op_mut(op);
        match o.rev_mut(rev) {
            Some(r) => {
                r.decision = Some(decision);
                r.decided_by = Some(by);
                if decision == Decision::Accepted {
                    o.incumbent = Some(rev);
                } else if o.incumbent == Some(rev) {
                    // Rejecting the incumbent falls back to the latest accepted revision
                    // before it, else the baseline.
                    o.incumbent = o
                        .revisions
                        .iter()
                        .filter(|r| r.rev != rev && r.decision == Some(Decision::Accepted))
                        .map(|r| r.rev)
                        .max()
                        .or(o.rev(0).map(|_| 0).filter(|z| *z != rev));
                }
                let text = format!(
                    "{op} v{rev} {} by {}",
                    match decision {
                        Decision::Accepted => "accepted",
                        Decision::Rejected => "rejected",
                    },
                    match by {
                        DecidedBy::Human => "human",
                        DecidedBy::Auto => "auto",
                    }
                );
                self.log(t, LogLevel::Good, text);
            }
            None => self.unknown(t, op, rev, "decision"),
        }
    }

    /// Attaches a profile to a revision and logs its headline and findings.
    fn profile(&mut self, t: f64, op: &str, rev: u32, profile: &Profile) {
        let mut lines = Vec::new();
        match self.op_mut(op).rev_mut(rev) {
            Some(r) => {
                r.profile = Some(Box::new(profile.clone()));
                let k = profile.main_kernel();
                let pct =
                    |v: Option<f64>| v.map(|x| format!("{x:.0}%")).unwrap_or_else(|| "-".into());
                lines.push((
                    LogLevel::Good,
                    format!(
                        "{op} v{rev}: profiled shape {} ({} kernel{}, {:.1} s): DRAM {} · SM {} · occupancy {}{}",
                        profile.shape,
                        profile.kernels.len(),
                        if profile.kernels.len() == 1 { "" } else { "s" },
                        profile.wall_s,
                        pct(k.and_then(|k| k.dram_throughput_pct)),
                        pct(k.and_then(|k| k.sm_throughput_pct)),
                        pct(k.and_then(|k| k.achieved_occupancy_pct)),
                        profile
                            .redundant_traffic_ratio
                            .map(|q| format!(" · DRAM bytes / Q {q:.2}"))
                            .unwrap_or_default()
                    ),
                ));
                for f in &profile.findings {
                    lines.push((LogLevel::Warn, f.line()));
                }
            }
            None => self.unknown(t, op, rev, "profile"),
        }
        for (l, s) in lines {
            self.log(t, l, s);
        }
    }
}
