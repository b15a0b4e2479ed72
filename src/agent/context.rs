//! The context of one iteration: operator spec (problem.toml summary and shapes with their
//! bottlenecks on the GPU's hardware profile), incumbent source, recent history (dropout masks
//! applied), measurements, retrieved knowledge and the engineer's steering notes.

use super::knowledge::{self, Doc, Query};
use super::{AgentState, HistoryEntry, MeasureSummary, ProfileNote};
use crate::suite::Problem;
use crate::suite::hardware::HardwareProfile;
use std::fmt::Write;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    pub system: String,
    pub user: String,
    /// Ids of the knowledge documents included.
    pub knowledge: Vec<String>,
    pub query: Query,
}

/// How many history entries a context shows in full (older ones as one line each).
pub const RECENT: usize = 6;

/// The operator's spec, as given to the agent.
pub fn spec_text(p: &Problem, hw: &HardwareProfile) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Operator `{}` ({}): {} — {}",
        p.name, p.id, p.summary, p.upstream
    );
    let _ = writeln!(s, "dtype {}; phases {}", p.dtype, p.phase_label());
    if !p.lets.is_empty() {
        let l: Vec<String> = p.lets.iter().map(|(_, e)| e.src.clone()).collect();
        let _ = writeln!(s, "let: {}", l.join("; "));
    }
    for (k, d) in &p.params {
        let _ = writeln!(s, "param {k} ({}, {}): {}", d.ty, d.source, d.doc);
    }
    for t in &p.inputs {
        let dims: Vec<&str> = t.shape.iter().map(|e| e.src.as_str()).collect();
        let _ = writeln!(
            s,
            "input  {} {}[{}] values {}{}",
            t.name,
            t.dtype,
            dims.join(", "),
            t.values,
            if t.inplace { " (updated in place)" } else { "" }
        );
    }
    for t in &p.outputs {
        let dims: Vec<&str> = t.shape.iter().map(|e| e.src.as_str()).collect();
        let _ = writeln!(
            s,
            "output {} {}[{}] compare {}",
            t.name,
            t.dtype,
            dims.join(", "),
            t.compare
        );
    }
    let _ = writeln!(
        s,
        "strict tolerance: atol {} rtol {} rel_l2 {}",
        p.tolerance.atol, p.tolerance.rtol, p.tolerance.rel_l2
    );
    let _ = writeln!(
        s,
        "Shapes on {} ({} SMs, {:.1} TB/s HBM, L2 {} MiB):",
        hw.name,
        hw.sm_count,
        hw.hbm_bytes_per_s / 1e12,
        hw.l2_bytes >> 20
    );
    for sh in p.shapes.iter().take(24) {
        let params: Vec<String> = sh.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let sol = p
            .work(sh)
            .ok()
            .and_then(|w| crate::suite::roofline::sol(&w, hw).ok());
        match sol {
            Some(sol) => {
                let _ = writeln!(
                    s,
                    "  #{} {} · T_SOL {:.2} µs · {}-bound",
                    sh.id,
                    params.join(" "),
                    sol.sol_s * 1e6,
                    sol.bottleneck.name()
                );
            }
            None => {
                let _ = writeln!(s, "  #{} {}", sh.id, params.join(" "));
            }
        }
    }
    if p.shapes.len() > 24 {
        let _ = writeln!(s, "  … and {} more shapes", p.shapes.len() - 24);
    }
    s
}

/// Bottlenecks of the operator's shapes, most frequent first.
pub fn bottlenecks(p: &Problem, hw: &HardwareProfile) -> Vec<String> {
    let mut counts: std::collections::BTreeMap<&'static str, usize> = Default::default();
    for sh in &p.shapes {
        if let Some(sol) = p
            .work(sh)
            .ok()
            .and_then(|w| crate::suite::roofline::sol(&w, hw).ok())
        {
            *counts.entry(sol.bottleneck.name()).or_default() += 1;
        }
    }
    let mut v: Vec<(&str, usize)> = counts.into_iter().collect();
    v.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    v.into_iter().map(|(k, _)| k.to_string()).collect()
}

fn measure_line(m: &MeasureSummary) -> String {
    let mut s = format!("{} measurement: {}", m.mode, m.verdict);
    if let Some(x) = m.s_op {
        let _ = write!(s, ", S_op {x:.4}");
    }
    if m.compiled {
        let _ = write!(s, ", strict {}", if m.strict_ok { "pass" } else { "FAIL" });
        let _ = write!(s, ", {} seed(s), noise {:.1} %", m.seeds, m.noise * 100.0);
    }
    if let (Some(r), Some(sp)) = (m.registers, m.spill_bytes) {
        let _ = write!(s, ", {r} registers/thread, {sp} B spilled");
    }
    if let Some(msg) = &m.message {
        let _ = write!(
            s,
            "\n    {}",
            msg.lines().take(6).collect::<Vec<_>>().join("\n    ")
        );
    }
    let shapes: Vec<String> = m
        .shapes
        .iter()
        .take(16)
        .map(|b| match b.s {
            Some(x) => format!("#{} S={x:.3}", b.id),
            None => format!("#{} {}", b.id, b.verdict),
        })
        .collect();
    if !shapes.is_empty() {
        let _ = write!(s, "\n    per shape: {}", shapes.join(", "));
    }
    s
}

/// At most `max` bytes of `text` (cut at a character boundary), with a note when cut.
pub fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… {} more bytes]", &text[..end], text.len() - end)
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The full history entries as the context shows them (for tests).
#[cfg(test)]
pub fn history_text_for_test(state: &super::AgentState) -> String {
    state
        .history
        .iter()
        .map(|h| entry_text(h, true))
        .collect::<Vec<_>>()
        .join("\n")
}

fn entry_text(h: &HistoryEntry, full: bool) -> String {
    let rev = h
        .rev
        .map(|r| format!("v{r}"))
        .unwrap_or_else(|| "(no revision)".into());
    let mut s = format!(
        "- {rev} [{}] {} → {} · {:?}",
        h.category, h.hypothesis, h.result, h.decision
    );
    if full {
        if !h.change.is_empty() {
            let _ = write!(s, "\n  change: {}", h.change);
        }
        if let Some(m) = h.evidence.best() {
            let _ = write!(s, "\n  {}", measure_line(m));
        }
        if let Some(a) = &h.evidence.abba {
            let _ = write!(
                s,
                "\n  A B B A: S_op {:.4} {:.4} {:.4} {:.4}, gain {:+.2} % vs noise {:.2} %",
                a.runs[0],
                a.runs[1],
                a.runs[2],
                a.runs[3],
                a.gain * 100.0,
                a.noise * 100.0
            );
        }
        if let Some(r) = h.evidence.abba.as_ref().and_then(|a| a.refused.as_ref()) {
            let _ = write!(s, "\n  A B B A refused: {r}");
        }
        if let Some(out) = h.evidence.best().and_then(|m| m.output.as_ref()) {
            let _ = write!(s, "\n  the kernel printed:\n{}", indent(out));
        }
        for f in &h.evidence.profiler {
            let _ = write!(s, "\n  profiler: {f}");
        }
    }
    s
}

/// Builds the context of the next iteration.
pub fn build(
    p: &Problem,
    hw: &HardwareProfile,
    state: &AgentState,
    docs: &[Doc],
    incumbent_measure: Option<&MeasureSummary>,
    k_docs: usize,
) -> Context {
    let arch = knowledge::arch_family(&hw.arch).to_string();
    let profiles = state.relevant_profiles();
    let symptoms = collect_symptoms(hw, state, incumbent_measure, &profiles);
    let query = Query {
        arch,
        family: knowledge::family_of(&p.name).to_string(),
        operator: p.name.clone(),
        bottlenecks: bottlenecks(p, hw),
        symptoms,
        techniques: knowledge::techniques_in(&state.incumbent_source),
        related: knowledge::related_to_operator(docs, &p.name),
    };
    let picked = knowledge::retrieve(docs, &query, k_docs);
    let system = system_prompt(hw);
    let mut u = String::new();
    let _ = writeln!(u, "## Operator\n{}", spec_text(p, hw));
    write_incumbent(&mut u, state, incumbent_measure);
    write_profiles(&mut u, state, &profiles);
    write_history(&mut u, state);
    write_knowledge(&mut u, &picked);
    write_steering(&mut u, state);
    let _ = writeln!(
        u,
        "\nPropose the next revision of the incumbent: one optimization idea, in the reply format."
    );
    Context {
        system,
        user: u,
        knowledge: picked.iter().map(|(d, _)| d.meta.id.clone()).collect(),
        query,
    }
}

/// The symptoms to retrieve knowledge for: the incumbent's, the latest failures' anti-patterns
/// and the deep profiles' findings.
fn collect_symptoms(
    hw: &HardwareProfile,
    state: &AgentState,
    incumbent_measure: Option<&MeasureSummary>,
    profiles: &[&ProfileNote],
) -> Vec<String> {
    let mut symptoms = incumbent_measure
        .map(|m| knowledge::symptoms_of(m, hw.sm_count, None))
        .unwrap_or_default();
    // Symptoms of the latest failures count too (anti-patterns).
    for h in state.visible().rev().take(3) {
        if let Some(m) = h.evidence.best() {
            for s in knowledge::symptoms_of(m, hw.sm_count, None) {
                if (s == "incorrect" || s == "compile-error" || s == "register-spills")
                    && !symptoms.contains(&s)
                {
                    symptoms.push(s);
                }
            }
        }
    }
    // Deep profiles: their findings are measured evidence of what limits the kernel.
    for n in profiles {
        for s in knowledge::symptoms_of_findings(&n.rules) {
            if !symptoms.contains(&s) {
                symptoms.push(s);
            }
        }
    }
    symptoms
}

/// The system prompt: the role, how the harness compiles, checks and scores, the reply format.
fn system_prompt(hw: &HardwareProfile) -> String {
    format!(
        "You are a GPU kernel engineer optimizing one CUDA kernel for an {} ({}). The harness \
         compiles the file with NVRTC (-std=c++17, {}), checks it against a reference on fresh \
         random inputs (strict tolerance) and times it with a cold L2; the score S = T_SOL / \
         T_measured per shape, S_op the median over shapes. Host code never runs: the launch \
         plan comment declares grids, blocks, arguments (by the operator's tensor names), \
         scratch buffers and tunable defines.\n\n{}",
        hw.name,
        hw.key,
        hw.arch,
        super::reply::format_instructions()
    )
}

/// Writes the incumbent's source, S_op and latest measurement.
fn write_incumbent(u: &mut String, state: &AgentState, incumbent_measure: Option<&MeasureSummary>) {
    let _ = writeln!(
        u,
        "## Incumbent (v{}{})\n```cuda\n{}```",
        state.incumbent_rev,
        state
            .incumbent_s
            .map(|s| format!(", S_op {s:.4}"))
            .unwrap_or_default(),
        state.incumbent_source
    );
    if let Some(m) = incumbent_measure {
        let _ = writeln!(u, "Incumbent {}", measure_line(m));
    }
}

/// Writes the Nsight Compute findings of the relevant deep profiles.
fn write_profiles(u: &mut String, state: &AgentState, profiles: &[&ProfileNote]) {
    if !profiles.is_empty() {
        let _ = writeln!(u, "\n## Profiler findings (Nsight Compute)");
        for n in profiles {
            let _ = writeln!(
                u,
                "v{}{} on shape #{}: {}",
                n.rev,
                if n.rev == state.incumbent_rev {
                    " (the incumbent)"
                } else {
                    ""
                },
                n.shape,
                n.figures
            );
            for f in &n.findings {
                let _ = writeln!(u, "- {f}");
            }
            if n.findings.is_empty() {
                let _ = writeln!(u, "- no finding fired");
            }
        }
    }
}

/// Writes the visible history (the recent entries in full) and says how much is hidden.
fn write_history(u: &mut String, state: &AgentState) {
    let visible: Vec<&HistoryEntry> = state.visible().collect();
    let masked = state.history.len() - visible.len();
    if !visible.is_empty() {
        let _ = writeln!(u, "\n## History (oldest first)");
        let n = visible.len();
        for (i, h) in visible.iter().enumerate() {
            let _ = writeln!(u, "{}", entry_text(h, i + RECENT >= n));
        }
        if masked > 0 {
            let _ = writeln!(
                u,
                "({masked} earlier entries are hidden on purpose: explore ideas different from the recent ones)"
            );
        }
    }
}

/// Writes the retrieved knowledge documents (templates whole, others cut) and their pitfalls.
fn write_knowledge(u: &mut String, picked: &[(&Doc, f64)]) {
    if !picked.is_empty() {
        let _ = writeln!(u, "\n## Knowledge");
        for (d, _) in picked {
            let body: String = if d.meta.kind == "template" {
                d.body.clone()
            } else {
                d.body.chars().take(5000).collect()
            };
            let _ = writeln!(u, "### {} ({})\n{}", d.meta.title, d.meta.id, body);
            if !d.meta.pitfalls.is_empty() {
                let _ = writeln!(u, "Pitfalls: {}", d.meta.pitfalls.join("; "));
            }
            if !d.meta.related.is_empty() {
                let _ = writeln!(u, "See also: {}", d.meta.related.join(", "));
            }
        }
    }
}

/// Writes the engineer's steering notes.
fn write_steering(u: &mut String, state: &AgentState) {
    if !state.steering.is_empty() {
        let _ = writeln!(u, "\n## Notes from the engineer (follow them)");
        for s in &state.steering {
            let _ = writeln!(u, "- {s}");
        }
    }
}
