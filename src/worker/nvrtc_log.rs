//! NVRTC's log, kept to the candidate's own lines, and the diagnostics read from it.
//!
//! Invariant: the log that leaves the worker (the `compiled` event: sessions, the client, the
//! language model's tools) holds only diagnostics about the compiled file — each with the lines
//! NVRTC indents under it (the quoted source line of that file, the caret, "detected during"),
//! ptxas's lines, and NVRTC's summaries; every other non-blank line (a diagnostic about another
//! file and what NVRTC quotes under it) is dropped and counted in a last line.

use crate::contract::protocol::Diagnostic;

/// A log with the lines about other files dropped.
#[derive(Debug, Clone, PartialEq)]
pub struct Filtered {
    pub log: String,
    pub dropped: usize,
}

/// The note ending a log that lost lines.
pub fn dropped_note(n: usize) -> String {
    format!(
        "{n} log line{} about other files dropped",
        if n == 1 { "" } else { "s" }
    )
}

/// `file(12): ...`: a diagnostic about a line of some file; the file and the rest.
fn diagnostic_of(l: &str) -> Option<(&str, usize, &str)> {
    let (head, rest) = l.split_once("): ")?;
    let (f, num) = head.rsplit_once('(')?;
    let line = num.parse::<usize>().ok()?;
    (!f.is_empty() && !f.starts_with(char::is_whitespace)).then_some((f, line, rest))
}

/// NVRTC's closing lines that name the compiled file only.
fn summary(l: &str, file: &str) -> bool {
    let t = l.trim();
    if t == "Compilation terminated." {
        return true;
    }
    let Some((n, rest)) = t.split_once(' ') else {
        return false;
    };
    n.parse::<usize>().is_ok()
        && [
            format!("error detected in the compilation of \"{file}\"."),
            format!("errors detected in the compilation of \"{file}\"."),
            format!("catastrophic error detected in the compilation of \"{file}\"."),
        ]
        .iter()
        .any(|s| rest == s)
}

/// Keeps the lines of `log` that are about `file` (see the module's invariant).
pub fn filter(log: &str, file: &str) -> Filtered {
    let mut kept = Vec::new();
    let mut dropped = 0;
    // Whether indented lines belong to a diagnostic about `file`.
    let mut under_ours = false;
    for l in log.lines() {
        if l.trim().is_empty() {
            kept.push(l);
            continue;
        }
        let keep = if let Some((f, _, _)) = diagnostic_of(l) {
            under_ours = f == file;
            under_ours
        } else if l.starts_with("ptxas") || summary(l, file) {
            under_ours = false;
            true
        } else if l.starts_with(char::is_whitespace) {
            under_ours
        } else {
            under_ours = false;
            false
        };
        if keep {
            kept.push(l);
        } else {
            dropped += 1;
        }
    }
    let mut out = kept.join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    if dropped > 0 {
        out.push_str(&dropped_note(dropped));
        out.push('\n');
    }
    Filtered { log: out, dropped }
}

/// Parses NVRTC's log into diagnostics on the candidate's own lines, plus ptxas's warnings and
/// performance notes on the whole kernel (line 0): registers spilled to local memory, wgmma
/// serialised (C7518) — what a Hopper kernel's author needs to know before timing it.
pub fn parse_nvrtc_log(log: &str, file: &str) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for l in log.lines() {
        if let Some(note) = ptxas_note(l) {
            out.push(Diagnostic {
                line: 0,
                severity: "warning".to_string(),
                msg: format!("ptxas: {note}"),
            });
            continue;
        }
        let Some((f, line, rest)) = diagnostic_of(l) else {
            continue;
        };
        if f != file {
            continue;
        }
        let (sev, msg) = rest.split_once(": ").unwrap_or(("error", rest));
        let severity = if sev.contains("warning") {
            "warning"
        } else if sev.contains("error") {
            "error"
        } else {
            sev
        };
        out.push(Diagnostic {
            line,
            severity: severity.to_string(),
            msg: msg.trim().to_string(),
        });
    }
    out
}

/// A ptxas line worth a diagnostic: its warnings, and its notes on lost performance.
fn ptxas_note(l: &str) -> Option<&str> {
    let rest = l.strip_prefix("ptxas")?.trim_start();
    let (kind, msg) = rest.split_once(':')?;
    let msg = msg.trim();
    match kind.trim() {
        "warning" => Some(msg),
        "info" if msg.contains("Potential Performance Loss") => Some(msg),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvrtc_log_maps_to_candidate_lines() {
        let log = "candidate.cu(12): error: identifier \"foo\" is undefined\n\
                   candidate.cu(30): warning #177-D: variable \"x\" was declared but never referenced\n\
                   1 error detected in the compilation of \"candidate.cu\".\n";
        let d = parse_nvrtc_log(log, "candidate.cu");
        assert_eq!(d.len(), 2);
        assert_eq!(
            d[0],
            Diagnostic {
                line: 12,
                severity: "error".into(),
                msg: "identifier \"foo\" is undefined".into()
            }
        );
        assert_eq!(d[1].line, 30);
        assert_eq!(d[1].severity, "warning");
        // Nothing of it is about another file: kept whole.
        assert_eq!(filter(log, "candidate.cu").log, log);
    }

    /// ptxas's lines as NVRTC 13.0 wrote them for a pipelined attention kernel on the H200.
    #[test]
    fn ptxas_spills_and_wgmma_serialisation_become_kernel_warnings() {
        let log = "ptxas info    : (C7518) Potential Performance Loss: wgmma.mma_async instructions are serialized due to program dependence on compiler-inserted WG.DP in divergent path in the function 'k'\n\
                   ptxas warning : Registers are spilled to local memory in function 'k', 84 bytes spill stores, 104 bytes spill loads\n\
                   ptxas info    : Used 168 registers, used 1 barriers, 40 bytes cumulative stack size\n";
        let d = parse_nvrtc_log(log, "candidate.cu");
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d.iter().all(|d| d.line == 0 && d.severity == "warning"));
        assert!(
            d[0].msg
                .starts_with("ptxas: (C7518) Potential Performance Loss: wgmma")
        );
        assert!(d[1].msg.contains("84 bytes spill stores"));
        assert_eq!(d[1].place(), "kernel");
        assert_eq!(
            filter(log, "candidate.cu"),
            Filtered {
                log: log.into(),
                dropped: 0
            }
        );
    }

    /// A host file that reached the compiler: its diagnostics and the text NVRTC quotes under
    /// them are dropped and counted; the candidate's own diagnostic, the source line quoted
    /// under it and the summary stay.
    #[test]
    fn lines_about_other_files_are_dropped_and_counted() {
        let log = "/etc/passwd(1): error: expected a declaration\n\
                   \x20 root:x:0:0:root:/root:/bin/bash\n\
                   \x20     ^\n\
                   \n\
                   /etc/passwd(2): error: this declaration has no storage class or type specifier\n\
                   \x20 daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
                   candidate.cu(14): error: identifier \"y\" is undefined\n\
                   \x20     out[i] = y;\n\
                   \x20              ^\n\
                   root:x:0:0:root:/root:/bin/bash\n\
                   2 errors detected in the compilation of \"candidate.cu\".\n\
                   3 errors detected in the compilation of \"/etc/passwd\".\n";
        let f = filter(log, "candidate.cu");
        assert_eq!(f.dropped, 7, "{}", f.log);
        assert!(
            !f.log.contains("root:") && !f.log.contains("daemon"),
            "{}",
            f.log
        );
        assert!(!f.log.contains("passwd"), "{}", f.log);
        assert!(
            f.log
                .contains("candidate.cu(14): error: identifier \"y\" is undefined\n")
        );
        assert!(f.log.contains("    out[i] = y;\n"));
        assert!(
            f.log
                .contains("2 errors detected in the compilation of \"candidate.cu\".\n")
        );
        assert!(
            f.log.ends_with("7 log lines about other files dropped\n"),
            "{}",
            f.log
        );
        // The diagnostics read from either are the candidate's only.
        let d = parse_nvrtc_log(log, "candidate.cu");
        assert_eq!(d, parse_nvrtc_log(&f.log, "candidate.cu"));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].line, 14);
    }

    /// A header's diagnostic with the candidate's name inside its path, and text that only
    /// looks like a summary, are another file's.
    #[test]
    fn a_look_alike_of_the_candidate_is_another_file() {
        let log = "/tmp/candidate.cu(3): warning: secret\n\
                   x/candidate.cu(3): error: secret\n\
                   1 error detected in the compilation of \"candidate.cu\". secret\n\
                   candidate.cu(3) : error: not NVRTC's form\n";
        let f = filter(log, "candidate.cu");
        assert_eq!(f.dropped, 4, "{}", f.log);
        assert_eq!(f.log, format!("{}\n", dropped_note(4)));
        assert_eq!(dropped_note(1), "1 log line about other files dropped");
    }
}
