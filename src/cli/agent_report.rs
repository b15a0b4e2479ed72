//! What `agent` prints: one agent's run as a line of text or a JSON document (history
//! included).

use crate::agent::AgentState;
use crate::agent::StopReason;
use crate::agent::driver::{Driver, Gate, Measurer, Proposer};
use crate::agent::file_sink::FileSink;
use crate::suite::Problem;
use crate::suite::hardware::HardwareProfile;
use serde_json::json;
use std::path::Path;

/// The context the run's result is printed with.
pub(super) struct Report<'a> {
    pub(super) p: &'a Problem,
    pub(super) dev_name: &'a str,
    pub(super) hw: &'a HardwareProfile,
    pub(super) auto: bool,
    pub(super) path: &'a Path,
    pub(super) resumed: bool,
    pub(super) stop: &'a StopReason,
}

/// The baseline's S_op and the best measured revision with its S_op.
fn scores(st: &AgentState) -> (Option<f64>, Option<(u32, f64)>) {
    let baseline_s = st.history.first().and_then(|h| h.s_op());
    let best = st
        .history
        .iter()
        .filter(|h| h.rev.is_some())
        .filter_map(|h| h.s_op().map(|s| (h.rev.unwrap_or(0), s)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    (baseline_s, best)
}

/// One agent's run as a JSON document, history included.
pub(super) fn report_json<P: Proposer, M: Measurer, G: Gate>(
    r: &Report<'_>,
    d: &Driver<P, M, G, FileSink>,
) -> serde_json::Value {
    let st = &d.state;
    let (baseline_s, best) = scores(st);
    json!({
        "operator": r.p.name,
        "backend": d.proposer.name(),
        "gpu": r.dev_name,
        "hardware": r.hw.key,
        "mode": if r.auto { "auto" } else { "suggest" },
        "session": r.path.display().to_string(),
        "resumed": r.resumed,
        "stop_reason": r.stop.to_string(),
        "iterations": st.iterations,
        "dropouts": st.dropouts,
        "tokens_in": st.tokens_in,
        "tokens_out": st.tokens_out,
        // Whether iterations used tools (off for the tuner, or after a server refused them).
        "tools": d.budget.tools.enabled && d.proposer.supports_tools(),
        "tool_budgets": d.budget.tools,
        "baseline_s_op": baseline_s,
        "incumbent": st.incumbent_rev,
        "incumbent_s_op": st.incumbent_s,
        "best": best.map(|(r, s)| json!({"rev": r, "s_op": s})),
        "history": st.history,
        "write_errors": d.sink.errors,
        "standing": d.sink.standing.iter().map(|(rev, w)| match w {
            Ok(f) => json!({"rev": rev, "file": f.display().to_string()}),
            Err(e) => json!({"rev": rev, "error": e.to_string()}),
        }).collect::<Vec<_>>(),
    })
}

/// Prints the run as one line of text.
pub(super) fn print_text(r: &Report<'_>, st: &AgentState) {
    let (baseline_s, best) = scores(st);
    let stop = r.stop;
    println!(
        "{}: {} iterations, stop: {stop}; S_op v0 {} → incumbent v{} {}{}; session {}",
        r.p.name,
        st.iterations,
        baseline_s.map(|s| format!("{s:.4}")).unwrap_or("-".into()),
        st.incumbent_rev,
        st.incumbent_s
            .map(|s| format!("{s:.4}"))
            .unwrap_or("-".into()),
        best.map(|(r, s)| format!(" (best measured v{r} {s:.4})"))
            .unwrap_or_default(),
        r.path.display()
    );
}
