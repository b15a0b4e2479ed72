//! The S_agg table (as in docs/baselines.md): per operator its weight, shapes, shapes passed,
//! input draws, S_op (strict, and under the benchmark's rule), the best peer's S_op and the gap
//! to ours, S range and where and when it was measured; S_agg of every phase view under both
//! rules above it. maud escapes every string it is given.
//!
//! Each row carries `data-op` and, when its S_op counts, `data-s-op` and `data-s-op-benchmark`
//! (the figures at full precision), so that a reader can check the table against `suite --json`;
//! the peer cell carries `data-peer-s-op` (the best peer's) and the gap cell `data-gap`.

use super::data::{OpReport, PeerFigure, ReportData, State};
use maud::{Markup, html};

/// S_agg of each phase view under the strict level and under the benchmark's rule, and how
/// many operators are measured, stale or missing.
pub fn summary(d: &ReportData) -> Markup {
    let b = &d.s_agg_benchmark;
    html! {
        p #s-agg-summary {
            "S_agg (all phases, Σ weight · S_op) = "
            strong data-phase="all" data-s-agg=(d.s_agg.all) { (format!("{:.3}", d.s_agg.all)) }
            " strict · "
            strong data-benchmark-phase="all" data-s-agg-benchmark=(b.all) { (format!("{:.3}", b.all)) }
            " under the benchmark's rule (prefill "
            span data-phase="prefill" data-s-agg=(d.s_agg.prefill) { (format!("{:.3}", d.s_agg.prefill)) }
            " / "
            span data-benchmark-phase="prefill" data-s-agg-benchmark=(b.prefill) { (format!("{:.3}", b.prefill)) }
            ", decode "
            span data-phase="decode" data-s-agg=(d.s_agg.decode) { (format!("{:.3}", d.s_agg.decode)) }
            " / "
            span data-benchmark-phase="decode" data-s-agg-benchmark=(b.decode) { (format!("{:.3}", b.decode)) }
            ") · " (d.measured) " measured, " (d.stale) " stale (counted 0), "
            (d.missing) " not measured (counted 0)"
        }
        p.meta {
            "Strict: a shape counts when its outputs passed the problem's own tolerance (exact "
            "codes for integer and fp8 outputs). The benchmark's rule: a shape counts only when "
            "it also passed the benchmark-compatible level, where, e.g., NaN never equals NaN."
        }
    }
}

/// S_op under the benchmark's rule, where the record stands (else as `s_op_cell` says).
fn s_op_benchmark_cell(op: &OpReport) -> Markup {
    match (op.s_op_benchmark, op.s_op) {
        (Some(b), Some(s)) if b != s => html! { strong { (format!("{b:.3}")) } },
        (Some(b), _) => html! { (format!("{b:.3}")) },
        _ => html! { span.missing { "—" } },
    }
}

fn s_op_cell(op: &OpReport) -> Markup {
    match (&op.state, &op.record) {
        (State::Measured, _) => html! { (format!("{:.3}", op.s_op.unwrap_or(0.0))) },
        (State::Stale(_), Some(r)) => html! {
            span.stale title="stale: not counted in S_agg" { "— (" (format!("{:.3}", r.s_op)) "~)" }
        },
        _ => html! { span.missing { "—" } },
    }
}

fn state_cell(op: &OpReport) -> Markup {
    let layer = op.record.as_ref().map(|r| r.layer.as_str()).unwrap_or("");
    match &op.state {
        State::Measured => html! { "measured · " (layer) },
        State::Stale(why) => html! { span.stale { "stale: " (why.join(", ")) " · " (layer) } },
        State::Missing => html! { span.missing { "not measured" } },
    }
}

fn where_cell(op: &OpReport) -> Markup {
    let Some(r) = &op.record else {
        return html! { span.missing { "—" } };
    };
    let detail = format!(
        "driver {} · T_SOL of {} · atrex-tui {}",
        r.driver, r.hardware, r.tool_version
    );
    html! {
        span title=(detail) { (r.date) " · " (r.gpu) " · " (r.mode) }
        br;
        code { (r.kernel) }
        @if r.origin != r.kernel { " from " code { (r.origin) } }
    }
}

/// `−0.038` / `+0.012`: a signed difference of S_op, with a real minus sign.
fn signed(x: f64) -> String {
    let s = format!("{x:+.3}");
    s.replacen('-', "\u{2212}", 1)
}

/// A peer's name, library and what it notes, for a title.
fn peer_title(p: &PeerFigure) -> String {
    let mut t = format!("{} · {}", p.name, p.library);
    if let Some((lo, hi)) = p.s_range {
        t += &format!(" · S {lo:.2} – {hi:.2} over the shapes");
    }
    if let Some(c) = &p.check {
        t += &format!(" · fails the check: {c}");
    }
    if let Some(n) = &p.note {
        t += &format!(" · {n}");
    }
    t
}

/// The best peer that passes the check, and the faster ones that do not, marked `✗ check`
/// (figures that no longer compare are marked `~`).
pub fn peer_cell(op: &OpReport) -> Markup {
    let Some(v) = &op.peers else {
        return html! { span.missing { "—" } };
    };
    let fastest = v.all.first();
    html! {
        @if let Some(why) = &v.stale {
            @if let Some(p) = fastest {
                span.stale title={ "stale: " (why) " · " (peer_title(p)) } {
                    (format!("{:.3}", p.s_op)) "~"
                }
                " " span.peer-name { (p.name) }
            }
        } @else {
            @if let Some(b) = &v.best {
                span.peer data-peer-s-op=(b.s_op) title=(peer_title(b)) { (format!("{:.3}", b.s_op)) }
                " " span.peer-name { (b.name) }
            }
            @for (i, f) in v.failing.iter().enumerate() {
                @if i > 0 || v.best.is_some() { br; }
                span.fails title=(peer_title(f)) { (format!("{:.3}", f.s_op)) " ✗ check" }
                " " span.peer-name { (f.name) }
            }
        }
    }
}

/// Our S_op − the best peer's, red where we are behind, with the ratio.
pub fn gap_cell(op: &OpReport) -> Markup {
    let Some(v) = &op.peers else {
        return html! { span.missing { "—" } };
    };
    match (v.gap, v.ratio) {
        (Some(g), ratio) => html! {
            span class=(if g < 0.0 { "behind" } else { "ahead" }) data-gap=(g)
                title=(if g < 0.0 { "behind the best peer that passes the check" } else { "at or ahead of the best peer that passes the check" }) {
                (signed(g))
                @if let Some(r) = ratio { " (" (format!("{r:.2}")) "×)" }
            }
        },
        (None, _) if v.best.is_some() => html! {
            span.missing title="our S_op does not count (stale or not measured)" { "—" }
        },
        (None, _) => html! {
            span.missing title="no peer that passes the check" { "—" }
        },
    }
}

/// The table: one row per operator, in descending weight.
pub fn table(d: &ReportData) -> Markup {
    html! {
        table #s-agg {
            thead {
                tr {
                    th { "#" } th { "operator" } th { "phase" } th.num { "weight" }
                    th.num { "shapes" } th.num { "passed (strict)" } th.num { "seeds" }
                    th.num { "S_op" } th.num { "S_op (benchmark rule)" }
                    th { "best peer (S_op)" } th.num { "ours − peer" }
                    th { "S range" } th { "standing" }
                    th { "measured (when · where · kernel)" }
                }
            }
            tbody {
                @for (i, op) in d.operators.iter().enumerate() {
                    tr data-op=(op.name) data-state=(op.state.name()) data-s-op=[op.s_op] data-s-op-benchmark=[op.s_op_benchmark] {
                        td.num { (i + 1) }
                        td { a href={ "#op-" (op.name) } { (op.name) } }
                        td { (op.phase) }
                        td.num { (format!("{:.2}%", op.weight * 100.0)) }
                        td.num { (op.num_shapes) }
                        td.num {
                            @match &op.record {
                                Some(r) => { (r.passed) " / " (r.shapes.len()) }
                                None => { span.missing { "—" } }
                            }
                        }
                        td.num {
                            @match op.record.as_ref().and_then(|r| r.seeds) {
                                Some(n) => { (n) }
                                None => { span.missing { "—" } }
                            }
                        }
                        td.num { (s_op_cell(op)) }
                        td.num { (s_op_benchmark_cell(op)) }
                        td.peer { (peer_cell(op)) }
                        td.num { (gap_cell(op)) }
                        td.range {
                            @match op.record.as_ref().and_then(|r| r.s_range) {
                                Some((lo, hi)) => { (format!("{lo:.4} – {hi:.3}")) }
                                None => { span.missing { "—" } }
                            }
                        }
                        td { (state_cell(op)) }
                        td.measured-at { (where_cell(op)) }
                    }
                }
            }
        }
    }
}
