//! The report's page: one self-contained HTML document — inline CSS, inline SVG, no scripts, no
//! fonts or images to fetch (a Content-Security-Policy forbids any), so it opens the same
//! offline, attached to a mail or in a browser without network.
//!
//! Sections (ids are stable, for readers and tests): `warnings` (only when something could not
//! be read), `table` (S_agg and the table), `peers` (every peer figure and where it comes
//! from), `roofline`, `operators` (one `section.op` per
//! operator, `#op-NAME`: its chart of S over shapes or why there is none, and its history),
//! `sessions`. Every string from a file goes through maud, which escapes it.

use super::charts::{self, RooflinePoints};
use super::data::{OpReport, PeerFigure, ReportData, State};
use super::history::HistoryItem;
use super::table;
use maud::{DOCTYPE, Markup, PreEscaped, html};

const CSS: &str = r#"
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5rem auto;
       max-width: 1200px; padding: 0 1rem; color: #1b1b1b; line-height: 1.4; }
h1 { font-size: 1.5rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ccc; }
h3 { margin-bottom: .3rem; }
table { border-collapse: collapse; font-size: .85rem; width: 100%; }
th, td { border-bottom: 1px solid #e3e3e3; padding: .2rem .45rem; text-align: left;
         vertical-align: top; }
th { background: #f3f3f3; } td.range { white-space: nowrap; } td.num, th.num { text-align: right; white-space: nowrap; }
td.nowrap { white-space: nowrap; }
code { font-size: .8rem; overflow-wrap: anywhere; } .meta { color: #555; font-size: .9rem; }
.stale { color: #8a6d00; } .missing { color: #888; font-style: italic; }
#warnings { background: #fff4f4; border: 1px solid #e0a0a0; padding: .4rem 1rem; }
figure { margin: .5rem 0; } figure svg { max-width: 100%; height: auto; }
figcaption { font-size: .85rem; color: #444; }
.legend span.swatch { display: inline-block; width: .8rem; height: .8rem; margin: 0 .25rem 0 .8rem;
                      border-radius: 50%; vertical-align: middle; }
.legend { font-size: .85rem; }
tr.incumbent { background: #eef7ee; }
.behind { color: #b00020; font-weight: 600; } .ahead { color: #1a7f37; }
.fails { color: #8a6d00; } .peer-name { color: #555; font-size: .8rem; }
td.peer { white-space: nowrap; }
section.op { border-top: 1px solid #eee; margin-top: 1.2rem; }
"#;

/// `YYYY-MM-DD hh:mm:ss` (UTC) of a time in seconds since the Unix epoch.
fn date(t: Option<f64>) -> String {
    t.map(|t| crate::utc::at(t as i64))
        .unwrap_or_else(|| "—".into())
}

/// A chart, or why it could not be drawn.
fn figure(class: &str, svg: Result<String, String>, caption: Markup) -> Markup {
    match svg {
        Ok(svg) => html! {
            figure class=(class) { (PreEscaped(svg)) figcaption { (caption) } }
        },
        Err(e) => html! { p.missing { "chart not drawn: " (e) } },
    }
}

fn header(d: &ReportData) -> Markup {
    let peaks: Vec<String> = d
        .peak_flops
        .iter()
        .map(|(k, v)| format!("{k} {:.0} TFLOP/s", v / 1e12))
        .collect();
    html! {
        h1 {
            "Where the suite stands · S_agg " (format!("{:.3}", d.s_agg.all)) " strict · "
            (format!("{:.3}", d.s_agg_benchmark.all)) " benchmark rule on " (d.hardware)
        }
        p.meta {
            "Made " (d.generated) " UTC by atrex-tui " (d.tool_version) ". Suite: " (d.suite) "."
            br;
            "Hardware profile (T_SOL): " (d.hardware) " — " (d.hardware_name) ", HBM "
            (format!("{:.2} TB/s", d.hbm_bytes_per_s / 1e12)) ", " (peaks.join(", ")) "."
            br;
            "Standing: " (d.standing) "."
            @if let Some(p) = &d.peers {
                br;
                "Peers: " (p.libraries.join(", ")) ", measured " (p.date) " on " (p.gpu)
                " (" (p.file) ")."
            }
        }
    }
}

fn warnings(d: &ReportData) -> Markup {
    html! {
        @if !d.warnings.is_empty() {
            section #warnings {
                h2 { "Warnings" }
                p { "These files could not be used; the report shows everything else." }
                ul { @for w in &d.warnings { li { (w) } } }
            }
        }
    }
}

fn peer_row(op: &OpReport, p: &PeerFigure) -> Markup {
    html! {
        tr data-op=(op.name) {
            td { (op.name) }
            td { (p.name) }
            td { (p.library) }
            td.num { (format!("{:.3}", p.s_op)) }
            td.range {
                @match p.s_range {
                    Some((lo, hi)) => { (format!("{lo:.2} – {hi:.2}")) }
                    None => { span.missing { "—" } }
                }
            }
            td {
                @if p.passes { "passes" } @else {
                    span.fails { "✗ " (p.check.as_deref().unwrap_or("fails")) }
                }
            }
            td { @if let Some(n) = &p.note { (n) } }
        }
    }
}

/// Every peer figure of the profile, and how and when they were measured.
fn peers(d: &ReportData) -> Markup {
    html! {
        section #peers {
            h2 { "Peers on the same GPU" }
            @match &d.peers {
                None => {
                    p.missing {
                        "No peer figures for the " (d.hardware) " profile (a workspace's "
                        "docs/measurements/peers-" (d.hardware) ".json records them)."
                    }
                }
                Some(src) => {
                    p.meta {
                        "The kernels a user would otherwise call, measured " (src.date) " on "
                        (src.gpu) ": " (src.method) ". Libraries: " (src.libraries.join(", "))
                        ". From " code { (src.file) } ". A peer that fails the suite's check is "
                        "marked ✗ and never counted as the best; the table above compares our "
                        "S_op with the fastest peer that passes."
                    }
                    table #peer-figures {
                        thead {
                            tr {
                                th { "operator" } th { "peer" } th { "library" } th.num { "S_op" }
                                th { "S range" } th { "check" } th { "note" }
                            }
                        }
                        tbody {
                            @for op in &d.operators {
                                @if let Some(v) = &op.peers {
                                    @for p in &v.all { (peer_row(op, p)) }
                                }
                            }
                        }
                    }
                    @let stale: Vec<String> = d.operators.iter()
                        .filter_map(|o| o.peers.as_ref()?.stale.as_ref().map(|w| format!("{}: {w}", o.name)))
                        .collect();
                    @if !stale.is_empty() {
                        p.stale { "Stale (not compared): " (stale.join("; ")) "." }
                    }
                }
            }
        }
    }
}

fn roofline(d: &ReportData) -> Markup {
    let pts: RooflinePoints = charts::roofline_points(d);
    let flops = charts::roofline_flops(&pts, d.hbm_bytes_per_s);
    let bytes = charts::roofline_bytes(&pts, d.hbm_bytes_per_s);
    let computing = pts.points.iter().filter(|p| p.flops > 0.0).count();
    html! {
        section #roofline {
            h2 { "Roofline" }
            p {
                "Every shape of every record that stands, passing its check and timed: "
                (pts.points.len()) " shapes of " (pts.ops.len()) " operators on the "
                (d.hardware) " profile's roofs. S of a shape is its distance below its roof."
            }
            @match flops {
                Some(svg) => {
                    (figure("roofline", svg, html! {
                        "The " (computing) " shapes that compute (W > 0): arithmetic intensity "
                        "against achieved FLOP/s, under the memory roof and the compute roofs "
                        "of their dtypes."
                    }))
                }
                None => { p.missing { "No shape that computes (W > 0) has a measurement that stands." } }
            }
            @match bytes {
                Some(svg) => {
                    (figure("roofline", svg, html! {
                        "All " (pts.points.len()) " shapes: bytes moved against achieved "
                        "bandwidth, under the HBM roof (the only roof of a shape without arithmetic)."
                    }))
                }
                None => { p.missing { "No shape has a measurement that stands: nothing to draw." } }
            }
            @if !pts.ops.is_empty() {
                p.legend {
                    @for (i, op) in pts.ops.iter().enumerate() {
                        span.swatch style={ "background:" (charts::op_colour(i).1) } {}
                        (op)
                    }
                }
            }
            @if pts.untimed > 0 || pts.no_work > 0 || !pts.stale_ops.is_empty() {
                p.meta {
                    "Not drawn: "
                    (pts.untimed) " shapes that failed or have no time; "
                    (pts.no_work) " shapes the suite no longer defines"
                    @if !pts.stale_ops.is_empty() {
                        "; the stale records of " (pts.stale_ops.join(", "))
                    }
                    "."
                }
            }
        }
    }
}

/// Where the incumbent came from, as the history sees it.
fn origin_line(op: &OpReport) -> Markup {
    let Some(r) = &op.record else {
        return html! {};
    };
    let sessions: std::collections::BTreeSet<&str> =
        op.history.iter().map(|h| h.session.as_str()).collect();
    let found = op.history.iter().any(|h| h.incumbent);
    html! {
        p.meta {
            (op.history.len()) " revisions in " (sessions.len()) " sessions. The incumbent: "
            code { (r.origin) }
            @if r.origin_session {
                @if found { " (marked below)" } @else { " — that session was not among those read" }
            } @else {
                " (a file, not a session's revision)"
            }
            "."
        }
    }
}

fn history(op: &OpReport, dirs: &[String]) -> Markup {
    html! {
        (origin_line(op))
        @if op.history.is_empty() {
            p.missing.no-history {
                "No session in " (dirs.join(", ")) " touched " (op.name) "."
            }
        } @else {
            table.history {
                thead {
                    tr {
                        th { "date (UTC)" } th { "session" } th.num { "rev" } th { "author" }
                        th { "rationale" } th { "verdict" } th { "mode" } th { "decision" }
                    }
                }
                tbody {
                    @for h in &op.history { (history_row(h)) }
                }
            }
        }
    }
}

fn history_row(h: &HistoryItem) -> Markup {
    html! {
        tr.incumbent[h.incumbent] data-rev=(h.rev) {
            td.num { (date(h.at())) }
            td { code { (h.session) } }
            td.num {
                "v" (h.rev)
                @if let Some(p) = h.parent { " ← v" (p) }
            }
            td { (h.author) }
            td { (h.rationale) }
            td.nowrap {
                @match h.s_op {
                    Some(s) => { "S_op " (format!("{s:.3}")) }
                    None => { (h.verdict) }
                }
            }
            td { (h.mode) }
            td {
                @match &h.decision {
                    Some(dec) => { (dec) @if h.incumbent { " · the incumbent" } }
                    None => { span.missing { "undecided" } }
                }
            }
        }
    }
}

fn operator(op: &OpReport, d: &ReportData) -> Markup {
    let failed: Vec<String> = op
        .record
        .iter()
        .flat_map(|r| r.shapes.iter())
        .filter(|s| !s.passed() || s.s.is_none())
        .map(|s| format!("#{} {}", s.shape, s.verdict))
        .collect();
    html! {
        section.op id={ "op-" (op.name) } data-op=(op.name) data-state=(op.state.name()) {
            h3 {
                (op.name) " · "
                @match (&op.state, &op.record) {
                    (State::Measured, _) => { "S_op " (format!("{:.3}", op.s_op.unwrap_or(0.0))) }
                    (State::Stale(why), Some(r)) => {
                        span.stale { "stale (" (why.join(", ")) "): measured S_op "
                            (format!("{:.3}", r.s_op)) ", counted 0" }
                    }
                    _ => { span.missing { "not measured" } }
                }
            }
            @match charts::s_over_shapes(op) {
                Some(svg) => {
                    @let r = op.record.as_ref();
                    (figure("s-chart", svg, html! {
                        @if let Some(r) = r {
                            "S per shape of " (op.name) "'s incumbent (" (r.passed) " of "
                            (op.num_shapes) " shapes passed; the line marks its S_op): "
                            code { (r.kernel) }
                            @if r.origin != r.kernel { " from " code { (r.origin) } }
                            ", " (r.layer) " record, measured " (r.date) " on " (r.gpu) "."
                        }
                    }))
                }
                None => {
                    p.missing {
                        "Not measured: the standing has no record of " (op.name) " for "
                        (d.hardware) " (`atrex-tui bench --all --full --record` measures it)."
                    }
                }
            }
            @if !failed.is_empty() {
                p.meta { "Not drawn (failed or not timed): " (failed.join(", ")) }
            }
            @if op.record.is_some() && !op.unmeasured.is_empty() {
                p.meta {
                    "Shapes without a result in the record: "
                    (op.unmeasured.iter().map(|s| format!("#{s}")).collect::<Vec<_>>().join(", "))
                }
            }
            (history(op, &d.session_dirs))
        }
    }
}

fn sessions(d: &ReportData) -> Markup {
    html! {
        section #sessions {
            h2 { "Sessions" }
            p.meta { "Searched: " (d.session_dirs.join(", ")) " and the standing's origin sessions." }
            @if d.sessions_read.is_empty() {
                p.missing { "No session was found." }
            } @else {
                ul { @for s in &d.sessions_read { li { code { (s) } } } }
            }
            @if !d.sessions_skipped.is_empty() {
                p { "Not read:" }
                ul { @for s in &d.sessions_skipped { li { (s) } } }
            }
        }
    }
}

/// The whole page.
pub fn render(d: &ReportData) -> String {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy"
                    content="default-src 'none'; style-src 'unsafe-inline'; img-src data:";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title {
                    "atrex-tui report · " (d.hardware) " · S_agg " (format!("{:.3}", d.s_agg.all))
                    " strict · " (format!("{:.3}", d.s_agg_benchmark.all)) " benchmark rule"
                }
                style { (PreEscaped(CSS)) }
            }
            body {
                (header(d))
                (warnings(d))
                section #table {
                    h2 { "S_agg and the operators" }
                    (table::summary(d))
                    (table::table(d))
                    p.meta {
                        "S = T_SOL / T per shape; S_op = median over all the operator's shapes, a "
                        "failed or missing shape counting 0; a stale record (marked ~) is shown "
                        "and counted 0. Best peer: the fastest peer kernel that passes the "
                        "suite's check (faster ones that fail it are marked ✗ check); ours − peer "
                        "is our S_op minus its, with the ratio."
                    }
                }
                (peers(d))
                (roofline(d))
                section #operators {
                    h2 { "Operators: S over shapes and history" }
                    @for op in &d.operators { (operator(op, d)) }
                }
                (sessions(d))
            }
        }
    };
    page.into_string()
}
