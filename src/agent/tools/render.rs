//! What a tool reports: the model's text (compact; cut to its bound by the conversation, see
//! `bound`) and a one-line summary for the session and the agent pane, from a job's outcome or
//! a deep profile.

use super::Executed;
use crate::agent::ProfileNote;
use crate::agent::context::bounded;
use crate::contract::outcome::Outcome;
use crate::contract::protocol::{Event, KernelResources, Mode, ShapeResult, Verdict};
use crate::suite::Problem;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The most of what a kernel printed in a `run` result (the whole result is bounded where it
/// reaches the conversation: `bound`).
const MAX_OUTPUT: usize = 1500;

/// The candidate's compile event, when the job got that far.
fn compiled(o: &Outcome) -> Option<&Event> {
    o.compiled
        .iter()
        .find(|e| matches!(e, Event::Compiled { which, .. } if which == "candidate"))
}

fn resources_lines(s: &mut String, res: &BTreeMap<String, KernelResources>) {
    for (k, r) in res {
        let _ = writeln!(
            s,
            "  {k}: {} registers/thread, {} B static shared, {} B spilled (local), max {} threads/block",
            r.registers, r.static_smem, r.local_bytes, r.max_threads
        );
    }
}

fn resources_brief(res: &BTreeMap<String, KernelResources>) -> String {
    res.iter()
        .map(|(k, r)| format!("{k} {} regs, {} B spilled", r.registers, r.local_bytes))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The compiler's diagnostics with the source lines they name.
fn diagnostics(s: &mut String, ev: &Event, source: &str) -> Option<String> {
    let Event::Compiled { diagnostics, .. } = ev else {
        return None;
    };
    let lines: Vec<&str> = source.lines().collect();
    for d in diagnostics.iter().take(12) {
        let _ = writeln!(s, "{d}");
        if let Some(l) = d.line.checked_sub(1).and_then(|i| lines.get(i)) {
            let _ = writeln!(s, "  {:>4} | {}", d.line, l.trim_end());
        }
    }
    if diagnostics.len() > 12 {
        let _ = writeln!(s, "… {} more diagnostics", diagnostics.len() - 12);
    }
    diagnostics
        .iter()
        .find(|d| d.severity == "error")
        .or(diagnostics.first())
        .map(|d| format!("{}: {}", d.place(), d.msg))
}

/// `compile`: diagnostics and per-kernel resources.
pub fn compile(o: &Outcome, source: &str) -> Executed {
    let mut s = String::new();
    let Some(ev) = compiled(o) else {
        let why = o
            .message
            .clone()
            .unwrap_or_else(|| "the compile job ended without a result".into());
        return no_result(o, "compile", why);
    };
    let Event::Compiled {
        ok, ms, resources, ..
    } = ev
    else {
        unreachable!()
    };
    let _ = writeln!(
        s,
        "compiled: {} ({:.0} ms)",
        if *ok { "ok" } else { "FAILED" },
        ms
    );
    let diag = diagnostics(&mut s, ev, source);
    if *ok {
        if !resources.is_empty() {
            let _ = writeln!(s, "kernels:");
            resources_lines(&mut s, resources);
        }
        let summary = match resources_brief(resources) {
            b if b.is_empty() => "ok".to_string(),
            b => format!("ok · {b}"),
        };
        Executed::ok(s, summary)
    } else {
        // The tool worked; the kernel does not compile.
        let summary = format!(
            "compile error · {}",
            diag.unwrap_or_else(|| "no diagnostics".into())
        );
        Executed::ok(s, summary)
    }
}

/// A job that produced nothing to show: the kernel's fault when its launch plan or source was
/// refused (a result for the model), else the harness's (the tool failed).
fn no_result(o: &Outcome, what: &str, why: String) -> Executed {
    let verdict = o.verdict.clone().unwrap_or(Verdict::Error);
    let text = format!("{what}: {}: {why}", verdict.name());
    let summary = format!("{}: {}", verdict.name(), first_line(&why));
    match verdict {
        Verdict::PlanError | Verdict::CompileError => Executed::ok(text, summary),
        _ => Executed::failed(
            format!(
                "{text}\n(the harness failed, not necessarily the kernel: the call may be repeated)"
            ),
            summary,
        ),
    }
}

fn first_line(s: &str) -> String {
    super::args::one_line(s, 120)
}

fn shape_label(p: &Problem, id: u32) -> String {
    match p.shape(id) {
        Some(sh) => {
            let params: Vec<String> = sh.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("#{id} {}", params.join(" "))
        }
        None => format!("#{id}"),
    }
}

/// What went wrong on a shape: the first failing output's figures, else the message.
fn shape_error(r: &ShapeResult) -> String {
    if let Some(c) = r.checks.iter().find(|c| !c.strict_ok) {
        let mut e = format!(
            "{}: {} of {} elements fail",
            c.name, c.mismatches, c.elements
        );
        if let (Some(i), Some((want, got))) = (c.first_bad, c.first_bad_values) {
            let _ = write!(e, "; first bad {}[{i}] = {got} (reference {want})", c.name);
        }
        let _ = write!(
            e,
            "; max abs err {:.3e}, max rel err {:.3e}, rel_l2 {:.3e}",
            c.max_abs, c.max_rel, c.rel_l2
        );
        if let Some(why) = &c.reason {
            let _ = write!(e, " ({why})");
        }
        return e;
    }
    r.message.clone().unwrap_or_default()
}

/// `run`: per shape the verdict, errors, S and timings; what the kernel printed.
pub fn run(o: &Outcome, p: &Problem, mode: Mode, source: &str) -> Executed {
    let mut s = String::new();
    let mode_name = if mode == Mode::Quick { "quick" } else { "full" };
    if let Some(ev @ Event::Compiled { ok: false, .. }) = compiled(o) {
        let _ = writeln!(s, "run ({mode_name}): compile error");
        let diag = diagnostics(&mut s, ev, source);
        return Executed::ok(
            s,
            format!(
                "compile error · {}",
                diag.unwrap_or_else(|| "no diagnostics".into())
            ),
        );
    }
    if o.shapes.is_empty() {
        let why = o.message.clone().unwrap_or_else(|| "no shape ran".into());
        return no_result(o, &format!("run ({mode_name})"), why);
    }
    let all_pass = o.shapes.iter().all(|r| r.verdict == Verdict::Pass);
    let s_op = all_pass.then(|| crate::contract::outcome::s_op_of(&o.shapes));
    let _ = write!(
        s,
        "run ({mode_name}, {} shape{}): ",
        o.shapes.len(),
        if o.shapes.len() == 1 { "" } else { "s" }
    );
    match s_op {
        Some(x) => {
            let _ = writeln!(s, "pass · S_op {x:.4} over these shapes");
        }
        None => {
            let bad = o
                .shapes
                .iter()
                .filter(|r| r.verdict != Verdict::Pass)
                .count();
            let _ = writeln!(s, "{bad} shape(s) fail");
        }
    }
    if let Some(Event::Compiled { resources, .. }) = compiled(o)
        && !resources.is_empty()
    {
        let _ = writeln!(s, "kernels: {}", resources_brief(resources));
    }
    for r in o.shapes.iter().take(40) {
        let _ = write!(s, "{} · {}", shape_label(p, r.shape), r.verdict.name());
        if !r.strict_ok && r.verdict == Verdict::Pass {
            let _ = write!(s, " (benchmark level only, not strict)");
        }
        if let Some(x) = r.s {
            let _ = write!(s, " · S {x:.3}");
        }
        if let Some(t) = &r.timing {
            let _ = write!(
                s,
                " · {:.2} µs (T_SOL {:.2} µs)",
                t.median_ms * 1e3,
                r.sol_ms * 1e3
            );
        }
        if r.verdict != Verdict::Pass {
            let e = shape_error(r);
            if !e.is_empty() {
                let _ = write!(s, " · {e}");
            }
        }
        let _ = writeln!(s);
    }
    if o.shapes.len() > 40 {
        let _ = writeln!(s, "… {} more shapes", o.shapes.len() - 40);
    }
    if !o.output.is_empty() {
        let mut text = String::new();
        for k in &o.output {
            let _ = writeln!(text, "[{}] {}", k.origin(), k.text.trim_end());
        }
        let _ = writeln!(s, "the kernel printed:\n{}", bounded(&text, MAX_OUTPUT));
    }
    if let Some(m) = o.message.as_ref().filter(|_| !all_pass) {
        let _ = writeln!(s, "{m}");
    }
    let summary = match s_op {
        Some(x) => format!("pass · S_op {x:.4} on {} shapes", o.shapes.len()),
        None => {
            let r = o
                .shapes
                .iter()
                .find(|r| r.verdict != Verdict::Pass)
                .expect("a failing shape");
            format!(
                "{} on {} · {}",
                r.verdict.name(),
                shape_label(p, r.shape),
                first_line(&shape_error(r))
            )
        }
    };
    // A kernel that fails its check is a result of the tool, not a failure of it.
    Executed::ok(s, summary)
}

/// `profile`: the main kernel's figures and the findings.
pub fn profile(p: &crate::profile::Profile) -> Executed {
    let note = ProfileNote::from_profile(0, p);
    let mut s = format!("profile of shape #{}: {}\n", p.shape, note.figures);
    for k in p
        .kernels
        .iter()
        .filter(|k| Some(k.name.as_str()) != p.main_kernel().map(|m| m.name.as_str()))
    {
        let _ = writeln!(
            s,
            "also kernel {}: {:.1} µs",
            k.name,
            k.duration_ns.unwrap_or(0.0) / 1e3
        );
    }
    if note.findings.is_empty() {
        s.push_str("findings: none fired\n");
    } else {
        s.push_str("findings:\n");
        for f in &note.findings {
            let _ = writeln!(s, "- {f}");
        }
    }
    let main = p
        .main_kernel()
        .map(|k| format!("{} {:.1} µs", k.name, k.duration_ns.unwrap_or(0.0) / 1e3))
        .unwrap_or_else(|| "no kernel".into());
    let summary = if note.rules.is_empty() {
        format!("{main} · no finding")
    } else {
        format!("{main} · findings: {}", note.rules.join(", "))
    };
    Executed::ok(s, summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::protocol::Diagnostic;
    use crate::contract::runner::JobEvent;
    use crate::session::fixtures::shape_result;

    fn problem() -> Problem {
        crate::suite::Suite::load(crate::suite::SuiteSource::Embedded)
            .unwrap()
            .problem("rms_norm")
            .unwrap()
            .clone()
    }

    fn compiled(ok: bool, diagnostics: Vec<Diagnostic>) -> JobEvent {
        JobEvent::Worker(Event::Compiled {
            id: 1,
            which: "candidate".into(),
            ok,
            cached: false,
            ms: 140.0,
            diagnostics,
            log: String::new(),
            resources: [(
                "rms_norm_kernel".to_string(),
                KernelResources {
                    registers: 40,
                    static_smem: 128,
                    local_bytes: 16,
                    max_threads: 1024,
                },
            )]
            .into_iter()
            .collect(),
        })
    }

    fn done(verdict: Verdict, message: Option<&str>) -> JobEvent {
        JobEvent::Worker(Event::Done {
            id: 1,
            verdict,
            message: message.map(|m| m.into()),
        })
    }

    #[test]
    fn a_run_reports_per_shape_errors_timings_and_what_the_kernel_printed() {
        let mut bad = shape_result(1, None, Verdict::Incorrect, 0.007);
        let c = &mut bad.checks[0];
        c.mismatches = 17;
        c.first_bad = Some(1234);
        c.first_bad_values = Some((0.5, 0.51));
        c.max_rel = 0.31;
        let o = Outcome::from_events([
            compiled(true, vec![]),
            JobEvent::Worker(Event::Output {
                id: 1,
                shape: Some(0),
                text: "row 0: sum 1.5\n".into(),
                dropped: 0,
            }),
            JobEvent::Worker(Event::ShapeDone {
                id: 1,
                result: shape_result(0, Some(0.58), Verdict::Pass, 0.00713),
            }),
            JobEvent::Worker(Event::ShapeDone { id: 1, result: bad }),
            done(Verdict::Incorrect, None),
        ]);
        let e = run(&o, &problem(), Mode::Quick, "");
        assert!(e.ok, "a failing kernel is a result");
        assert!(
            e.text
                .starts_with("run (quick, 2 shapes): 1 shape(s) fail\n"),
            "{}",
            e.text
        );
        assert!(
            e.text
                .contains("kernels: rms_norm_kernel 40 regs, 16 B spilled")
        );
        assert!(
            e.text.contains(
                "\n#0 eps=0.000001 hidden_size=1024 token_count=2500 · pass · S 0.580 · 12.29 µs (T_SOL 7.13 µs)\n"
            ),
            "{}",
            e.text
        );
        assert!(
            e.text.contains("· incorrect · out: 17 of 4096 elements fail; first bad out[1234] = 0.51 (reference 0.5); max abs err 5.000e-1, max rel err 3.100e-1"),
            "{}",
            e.text
        );
        assert!(
            e.text
                .contains("the kernel printed:\n[shape 0] row 0: sum 1.5")
        );
        assert!(
            e.summary.starts_with("incorrect on #1 ") && e.summary.contains("out: 17 of 4096"),
            "{}",
            e.summary
        );
    }

    #[test]
    fn compile_shows_diagnostics_on_their_source_lines_and_resources() {
        let src = "line one\n  float x = y;\nline three\n";
        let diag = Diagnostic {
            line: 2,
            severity: "error".into(),
            msg: "identifier \"y\" is undefined".into(),
        };
        let o = Outcome::from_events([
            compiled(false, vec![diag]),
            done(Verdict::CompileError, None),
        ]);
        let e = compile(&o, src);
        assert!(e.ok);
        assert!(
            e.text
                .contains("line 2: error: identifier \"y\" is undefined\n     2 |   float x = y;"),
            "{}",
            e.text
        );
        assert_eq!(
            e.summary,
            "compile error · line 2: identifier \"y\" is undefined"
        );
        let o = Outcome::from_events([compiled(true, vec![]), done(Verdict::Pass, None)]);
        let e = compile(&o, src);
        assert!(e.text.contains("rms_norm_kernel: 40 registers/thread, 128 B static shared, 16 B spilled (local), max 1024 threads/block"));
        assert_eq!(e.summary, "ok · rms_norm_kernel 40 regs, 16 B spilled");
        // A plan the harness refuses is the kernel's; a lost worker is the tool's failure.
        let e = compile(
            &Outcome::from_events([done(Verdict::PlanError, Some("launch plan: no [[launch]]"))]),
            src,
        );
        assert!(
            e.ok && e.summary.starts_with("plan error: launch plan"),
            "{}",
            e.summary
        );
        let e = compile(&Outcome::failed("the worker was lost".into()), src);
        assert!(!e.ok && e.text.contains("the harness failed"), "{}", e.text);
    }
}
