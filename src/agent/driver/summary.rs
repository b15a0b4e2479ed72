//! Summaries of a job's outcome for the agent: verdict, resources, S_op, timing noise.

use super::*;

/// The most of a kernel's printed output given to the agent per measurement.
const OUTPUT_FOR_AGENT: usize = 2048;

/// Summarises a job's outcome.
pub fn summarize(o: &Outcome, mode: Mode) -> MeasureSummary {
    let mut m = MeasureSummary {
        mode: if mode == Mode::Quick { "quick" } else { "full" }.into(),
        compiled: true,
        ..Default::default()
    };
    for ev in &o.compiled {
        if let Event::Compiled {
            which,
            ok,
            diagnostics,
            resources,
            ..
        } = ev
        {
            if which != "candidate" {
                continue;
            }
            m.compiled = *ok;
            if !ok {
                let d: Vec<String> = diagnostics.iter().take(5).map(|d| d.to_string()).collect();
                m.message = Some(d.join("\n"));
            } else {
                m.compile_notes = diagnostics
                    .iter()
                    .filter(|d| d.line == 0)
                    .take(5)
                    .map(|d| d.msg.clone())
                    .collect();
            }
            m.registers = resources.values().map(|r| r.registers).max();
            m.spill_bytes = resources.values().map(|r| r.local_bytes).max();
        }
    }
    if !o.output.is_empty() {
        let mut text = String::new();
        for k in &o.output {
            text.push_str(&format!("[{}] {}\n", k.origin(), k.text.trim_end()));
        }
        m.output = Some(crate::agent::context::bounded(&text, OUTPUT_FOR_AGENT));
    }
    let verdict = o.verdict.clone().unwrap_or(Verdict::Error);
    let failing = o.shapes.iter().find(|r| r.verdict != Verdict::Pass);
    m.verdict = if !m.compiled {
        "compile error".into()
    } else if o.shapes.iter().any(|r| r.verdict == Verdict::Incorrect) {
        "incorrect".into()
    } else if let Some(f) = failing {
        f.verdict.name().into()
    } else {
        verdict.name().into()
    };
    if m.message.is_none() {
        m.message = o
            .message
            .clone()
            .or_else(|| failing.and_then(|f| f.message.clone()));
    }
    m.strict_ok = !o.shapes.is_empty() && o.shapes.iter().all(|r| r.strict_ok);
    m.seeds = o.shapes.iter().map(|r| r.seeds_checked).min().unwrap_or(0);
    m.shapes = o
        .shapes
        .iter()
        .map(|r| ShapeBrief {
            id: r.shape,
            verdict: r.verdict.name().into(),
            s: r.s,
            median_ms: r.timing.as_ref().map(|t| t.median_ms),
            sol_ms: r.sol_ms,
        })
        .collect();
    if m.verdict == "pass" && !o.shapes.is_empty() {
        m.s_op = Some(crate::contract::outcome::s_op_of(&o.shapes));
    }
    m.noise = timing_noise(&o.shapes);
    m
}

/// Median over shapes of the relative noise of the median (1.2533 · IQR/1.349 / √n / median).
pub fn timing_noise(shapes: &[ShapeResult]) -> f64 {
    let v: Vec<f64> = shapes
        .iter()
        .filter_map(|r| r.timing.as_ref())
        .filter(|t| t.n > 0)
        .map(|t| 1.2533 * t.rel_iqr / 1.349 / (t.n as f64).sqrt())
        .collect();
    crate::suite::roofline::median(&v)
}

/// S_op of timing-only results (verdict pass or unchecked).
pub fn timed_s_op(shapes: &[ShapeResult]) -> f64 {
    let scores: Vec<crate::suite::roofline::ShapeScore> = shapes
        .iter()
        .map(|r| match (&r.verdict, r.s) {
            (Verdict::Pass | Verdict::Unchecked, Some(s)) => {
                crate::suite::roofline::ShapeScore::Passed(s)
            }
            _ => crate::suite::roofline::ShapeScore::Failed,
        })
        .collect();
    crate::suite::roofline::s_op(&scores)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::protocol::Diagnostic;

    fn compiled(ok: bool, diagnostics: Vec<Diagnostic>) -> Outcome {
        Outcome {
            events: vec![],
            compiled: vec![Event::Compiled {
                id: 1,
                which: "candidate".into(),
                ok,
                cached: false,
                ms: 1.0,
                diagnostics,
                log: String::new(),
                resources: Default::default(),
            }],
            shapes: vec![],
            verdict: Some(if ok {
                Verdict::Pass
            } else {
                Verdict::CompileError
            }),
            message: None,
            output: vec![],
        }
    }

    fn diag(line: usize, severity: &str, msg: &str) -> Diagnostic {
        Diagnostic {
            line,
            severity: severity.into(),
            msg: msg.into(),
        }
    }

    /// A passing compile keeps ptxas's notes on the whole kernel (not line warnings); a failed
    /// one says its diagnostics in the message instead.
    #[test]
    fn kernel_notes_of_a_passing_compile_reach_the_summary() {
        let o = compiled(
            true,
            vec![
                diag(
                    12,
                    "warning",
                    "variable \"x\" was declared but never referenced",
                ),
                diag(
                    0,
                    "warning",
                    "ptxas: (C7518) Potential Performance Loss: wgmma serialized",
                ),
            ],
        );
        let m = summarize(&o, Mode::Quick);
        assert!(m.compiled);
        assert_eq!(
            m.compile_notes,
            vec!["ptxas: (C7518) Potential Performance Loss: wgmma serialized".to_string()]
        );
        let o = compiled(
            false,
            vec![diag(3, "error", "identifier \"y\" is undefined")],
        );
        let m = summarize(&o, Mode::Quick);
        assert!(!m.compiled && m.compile_notes.is_empty());
        assert_eq!(
            m.message.as_deref(),
            Some("line 3: error: identifier \"y\" is undefined")
        );
    }
}
