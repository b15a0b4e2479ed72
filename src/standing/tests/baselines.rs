//! The shipped standing against docs/baselines.md: the figures the doc states for the incumbents
//! (its section "The incumbents under the second-round harness": S_agg and, per operator, the
//! incumbent, its shapes and its S_op under the latest harness and under the benchmark's rule)
//! are the shipped standing's, to the doc's printed rounding. A re-measured kernel updates both.

use crate::standing::*;
use crate::testing::{suite, tempdir, ws};

/// The section of docs/baselines.md that states the shipped standing's figures.
const SECTION: &str = "## The incumbents under the second-round harness";

fn section() -> String {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/baselines.md"))
            .unwrap();
    let start = text
        .find(SECTION)
        .unwrap_or_else(|| panic!("docs/baselines.md has no section `{SECTION}`"));
    let rest = &text[start + SECTION.len()..];
    rest[..rest.find("\n## ").unwrap_or(rest.len())].to_string()
}

/// A figure as the doc prints it, and how far the value may be from it: half a unit of its last
/// printed digit.
fn figure(printed: &str) -> (f64, f64) {
    let printed = printed.trim().trim_matches('*');
    let x: f64 = printed
        .parse()
        .unwrap_or_else(|e| panic!("`{printed}` is no figure: {e}"));
    let decimals = printed.split('.').nth(1).map_or(0, str::len);
    (x, 0.5 * 10f64.powi(-(decimals as i32)) + 1e-12)
}

fn agrees(value: f64, printed: &str) -> bool {
    let (x, tol) = figure(printed);
    (value - x).abs() <= tol
}

/// The text between `before` and the next `after` in `s`.
fn between<'a>(s: &'a str, before: &str, after: &str) -> &'a str {
    let i = s
        .find(before)
        .unwrap_or_else(|| panic!("no `{before}` in the section"))
        + before.len();
    let j = s[i..].find(after).unwrap() + i;
    &s[i..j]
}

/// One row of the section's table.
struct Row {
    op: String,
    /// `baseline`, or the template's file name.
    incumbent: String,
    shapes: usize,
    /// S_op under the latest harness, as printed.
    s_op: String,
    /// Under the benchmark's rule, as printed.
    benchmark: String,
}

/// The table's rows; the latest harness is the last `S_op` column.
fn rows(section: &str) -> Vec<Row> {
    let lines: Vec<Vec<String>> = section
        .lines()
        .filter(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    let header = &lines[0];
    let col = |f: &dyn Fn(&str) -> bool, what: &str| {
        header
            .iter()
            .rposition(|h| f(h))
            .unwrap_or_else(|| panic!("the table has no {what} column: {header:?}"))
    };
    let (op, inc, shapes) = (
        col(&|h| h == "operator", "operator"),
        col(&|h| h == "incumbent", "incumbent"),
        col(&|h| h == "shapes", "shapes"),
    );
    let s_op = col(&|h| h.starts_with("S_op"), "S_op");
    let bench = col(&|h| h.starts_with("benchmark rule"), "benchmark rule");
    lines[2..]
        .iter()
        .map(|r| Row {
            op: r[op].clone(),
            incumbent: r[inc].trim_matches('`').to_string(),
            shapes: r[shapes].parse().unwrap(),
            s_op: r[s_op].clone(),
            benchmark: r[bench].clone(),
        })
        .collect()
}

#[test]
fn the_shipped_standing_agrees_with_docs_baselines() {
    let suite = suite();
    let section = section();
    // The shipped standing, read as a fresh workspace reads it, judged on the H200.
    let d = tempdir("baselines-doc");
    let store = Store::load(&ws(&d), suite);
    assert!(store.problems().is_empty(), "{:?}", store.problems());
    let view = store.view("H200", Some("NVIDIA H200"));
    let rows = rows(&section);
    let mut ops: Vec<&str> = rows.iter().map(|r| r.op.as_str()).collect();
    ops.sort();
    let mut suite_ops: Vec<&str> = suite.problems.iter().map(|p| p.name.as_str()).collect();
    suite_ops.sort();
    assert_eq!(ops, suite_ops, "the table lists every operator once");
    for r in &rows {
        let p = suite.problem(&r.op).unwrap();
        let e = view
            .entry(&r.op)
            .unwrap_or_else(|| panic!("{}: not in the shipped standing", r.op));
        assert_eq!(e.layer, Layer::Shipped, "{}", r.op);
        assert!(e.fresh(), "{}: stale ({})", r.op, e.stale_label());
        let kernel = if r.incumbent == "baseline" {
            format!("problems/{}/baseline.cu", r.op)
        } else {
            format!("{}{}", store::TEMPLATES, r.incumbent)
        };
        assert_eq!(e.record.kernel, kernel, "{}: the incumbent", r.op);
        assert_eq!(e.record.measurement.shapes.len(), r.shapes, "{}", r.op);
        assert_eq!(p.shapes.len(), r.shapes, "{}", r.op);
        let strict = e.s_op_under(Rule::Strict, p).unwrap();
        let bench = e.s_op_under(Rule::Benchmark, p).unwrap();
        assert!(
            agrees(strict, &r.s_op),
            "{}: the shipped standing's S_op is {strict:.5}, docs/baselines.md says {}",
            r.op,
            r.s_op
        );
        assert!(
            agrees(bench, &r.benchmark),
            "{}: the shipped standing's S_op under the benchmark's rule is {bench:.5}, \
             docs/baselines.md says {}",
            r.op,
            r.benchmark
        );
    }
    // "S_agg = **0.310** (prefill 0.343, decode 0.316)": strict first, then under the
    // benchmark's rule.
    let lines: Vec<&str> = section
        .match_indices("S_agg = **")
        .map(|(i, _)| &section[i..])
        .collect();
    assert_eq!(lines.len(), 2, "two S_agg figures: strict, benchmark rule");
    for (rule, text) in [("strict", lines[0]), ("benchmark", lines[1])] {
        let all = between(text, "S_agg = **", "**");
        let prefill = between(text, &format!("{all}** (prefill "), ",");
        let decode = between(text, &format!("(prefill {prefill}, decode "), ")");
        for (phase, printed) in [
            (PhaseFilter::All, all),
            (PhaseFilter::Prefill, prefill),
            (PhaseFilter::Decode, decode),
        ] {
            let by = view.s_agg_by_rule(suite, phase);
            let s = if rule == "strict" {
                by.strict
            } else {
                by.benchmark
            };
            assert!(
                agrees(s, printed),
                "S_agg ({}, {rule}) of the shipped standing is {s:.5}, docs/baselines.md says {printed}",
                phase.name()
            );
        }
    }
    std::fs::remove_dir_all(&d).ok();
}

/// The comparison is as strict as the doc's printing: a figure off by more than half a unit of
/// its last digit disagrees.
#[test]
fn a_figure_agrees_only_to_its_printed_rounding() {
    assert!(agrees(0.30874, "0.309"));
    assert!(agrees(0.3085, "0.309"));
    assert!(!agrees(0.3084, "0.309"));
    assert!(agrees(0.27227771, "0.2723"));
    assert!(!agrees(0.27236, "0.2723"));
    assert!(agrees(0.0, "0.0000"));
    assert!(!agrees(0.0001, "0.0000"));
    assert!(agrees(0.309, "**0.309**"));
}
