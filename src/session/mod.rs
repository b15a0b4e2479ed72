//! Sessions: an append-only JSON-lines event log (docs/session-format.md), the reducer that
//! rebuilds the state from it, and the headless replay summary.

mod canonical;
pub mod demos;
pub mod error;
pub mod event;
pub mod lock;
pub mod model;
pub mod record;
pub mod recorder;
pub mod store;
pub mod timeline;
pub mod translate;

pub use event::{Author, DecidedBy, Decision, FORMAT_VERSION, Record, SessionEvent, ToolSpent};
pub use lock::SessionLock;
pub use model::{Model, OpStatus, RevVerdict};
pub use record::Recording;
pub use recorder::{Ids, Recorder};
pub use store::{Loaded, SessionWriter, load, parse_line, parse_text, scrub};
pub use timeline::Timeline;

use crate::suite::{PhaseFilter, Suite};
use serde_json::json;

/// The `replay --json` document: revisions, best S per operator, decisions.
pub fn summary(suite: &Suite, loaded: &Loaded, model: &Model) -> serde_json::Value {
    let records: Vec<&Record> = loaded.records.iter().collect();
    summarize(suite, loaded, records.len(), &records, model)
}

/// `summary` of a session read as a timeline (`loaded`: its warnings, without records).
pub fn timeline_summary(
    suite: &Suite,
    timeline: &Timeline,
    loaded: &Loaded,
    model: &Model,
) -> serde_json::Value {
    let records: Vec<&Record> = timeline.records().collect();
    summarize(suite, loaded, timeline.len(), &records, model)
}

/// The summary of `events` records, of which `records` are whole (decisions and tool calls
/// are always kept whole).
fn summarize(
    suite: &Suite,
    loaded: &Loaded,
    events: usize,
    records: &[&Record],
    model: &Model,
) -> serde_json::Value {
    let mut ops = Vec::new();
    for (name, o) in &model.ops {
        if !o.revisions.iter().any(|r| r.recorded) {
            continue;
        }
        let revs: Vec<serde_json::Value> = o
            .revisions
            .iter()
            .filter(|r| r.recorded)
            .map(|r| {
                let v = r.verdict();
                json!({
                    "rev": r.rev,
                    "parent": r.parent,
                    "author": r.author.label(),
                    "rationale": r.rationale,
                    "verdict": v.label(),
                    "s_op": v.score(),
                    "shapes_measured": r.measurement.results.len(),
                    "decision": r.decision,
                    "incumbent": o.incumbent == Some(r.rev),
                })
            })
            .collect();
        ops.push(json!({
            "operator": name,
            "best_s_op": o.best_s(),
            "incumbent": o.incumbent,
            "incumbent_s_op": o.incumbent_s(),
            "revisions": revs,
        }));
    }
    let mut decisions = Vec::new();
    for r in records {
        if let SessionEvent::Decision {
            op,
            rev,
            decision,
            by,
        } = &r.event
        {
            decisions.push(json!({"seq": r.seq, "t": r.t, "operator": op, "rev": rev, "decision": decision, "by": by}));
        }
    }
    // The model's tool calls inside agent iterations, one line each.
    let tool_calls: Vec<serde_json::Value> = records
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::ToolCall {
                op,
                iteration,
                call,
                name,
                args,
                ok,
                result,
                ms,
                gpu_s,
                spent,
            } => Some(json!({
                "seq": r.seq, "operator": op, "iteration": iteration, "call": call,
                "name": name, "args": args, "ok": ok, "result": result, "ms": ms,
                "gpu_s": gpu_s, "spent": spent,
            })),
            _ => None,
        })
        .collect();
    json!({
        "format_version": FORMAT_VERSION,
        "events": events,
        "unknown_events": loaded.unknown,
        "warnings": loaded.warnings,
        "run": {
            "tool_version": model.run.tool_version,
            "gpu": model.run.gpu,
            "driver": model.run.driver,
            "nvrtc": model.run.nvrtc,
            "hardware": model.run.hardware,
            "suite": model.run.suite,
            "runs": model.run.runs,
        },
        "s_agg": {
            "all": model.s_agg(suite, PhaseFilter::All),
            "prefill": model.s_agg(suite, PhaseFilter::Prefill),
            "decode": model.s_agg(suite, PhaseFilter::Decode),
        },
        "s_agg_benchmark": {
            "all": model.s_agg_by_rule(suite, PhaseFilter::All).benchmark,
            "prefill": model.s_agg_by_rule(suite, PhaseFilter::Prefill).benchmark,
            "decode": model.s_agg_by_rule(suite, PhaseFilter::Decode).benchmark,
        },
        "operators": ops,
        "decisions": decisions,
        "tool_calls": tool_calls,
        "steering": model.steering.iter().map(|(op, t)| json!({"operator": op, "text": t})).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod timeline_tests;

#[cfg(test)]
pub mod fixtures;
