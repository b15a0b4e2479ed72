//! Applies a unified diff to a kernel source. Context lines must match up to trailing
//! whitespace; a hunk whose context is not at its stated line is searched for in the whole file
//! (offset, no fuzz). Diffs are produced with `similar`.
//!
//! The applier is hand-written on purpose: the diffs come from language models, and the
//! `diffy` crate (0.5, the well-kept unified-diff applier) rejects what they commonly write and
//! this applier takes (the tests in `diffy_rejects_what_models_write` show each case):
//! - a context line that lost its leading space is a parse error;
//! - a hunk whose `@@ -a,b +c,d @@` counts are off is a parse error;
//! - hunks whose stated lines are out of order are a parse error, though each is found by search;
//! - a trailing-whitespace difference makes the hunk not apply;
//! - its error says only "error applying hunk #N", where the model is told here which hunk, at
//!   which line, and what the file has against what the hunk expects.

/// A diff that cannot be applied. Its message names the hunk and, where the file differs, the
/// line and both texts, so that a model can correct it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatchError {
    #[error("bad hunk header `{0}`")]
    BadHeader(String),
    #[error("the diff has no hunks (`@@ -a,b +c,d @@`)")]
    NoHunks,
    /// `hunk`: 1-based; `header`: its `@@` line.
    #[error("patch does not apply: hunk {hunk} ({header}): {mismatch}")]
    DoesNotApply {
        hunk: usize,
        header: String,
        mismatch: Mismatch,
    },
}

crate::error::text_at_the_edge!(PatchError);

/// Where a hunk's context and the file part, at the hunk's stated position.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Mismatch {
    #[error("its context is not in the file")]
    NotInFile,
    /// `line`: 1-based; both texts trimmed.
    #[error("line {line} is `{got}`, the hunk expects `{want}`")]
    Line {
        line: usize,
        got: String,
        want: String,
    },
    #[error("the file ends before line {0}")]
    FileEnds(usize),
}

#[derive(Debug, Clone, PartialEq)]
struct Hunk {
    old_start: usize,
    header: String,
    /// (' ' | '-' | '+', text)
    lines: Vec<(char, String)>,
}

fn parse_hunks(diff: &str) -> Result<Vec<Hunk>, PatchError> {
    let mut hunks = Vec::new();
    let mut cur: Option<Hunk> = None;
    for raw in diff.lines() {
        if raw.starts_with("@@") {
            if let Some(h) = cur.take() {
                hunks.push(h);
            }
            // @@ -a,b +c,d @@
            let inner = raw.trim_start_matches('@').trim();
            let old = inner
                .split_whitespace()
                .find(|t| t.starts_with('-'))
                .ok_or_else(|| PatchError::BadHeader(raw.to_string()))?;
            let start: usize = old[1..]
                .split(',')
                .next()
                .unwrap_or("")
                .parse()
                .map_err(|_| PatchError::BadHeader(raw.to_string()))?;
            cur = Some(Hunk {
                old_start: start,
                header: raw.to_string(),
                lines: Vec::new(),
            });
            continue;
        }
        if raw.starts_with("---") || raw.starts_with("+++") {
            if cur.as_ref().is_some_and(|h| !h.lines.is_empty()) {
                // A new file header ends the hunk.
                hunks.push(cur.take().unwrap());
            }
            continue;
        }
        let Some(h) = cur.as_mut() else { continue };
        if raw.starts_with('\\') {
            continue; // "\ No newline at end of file"
        }
        let (tag, text) = match raw.chars().next() {
            Some(c @ (' ' | '-' | '+')) => (c, raw[1..].to_string()),
            None => (' ', String::new()),
            Some(_) => (' ', raw.to_string()), // a context line that lost its leading space
        };
        h.lines.push((tag, text));
    }
    if let Some(h) = cur.take() {
        hunks.push(h);
    }
    if hunks.is_empty() {
        return Err(PatchError::NoHunks);
    }
    Ok(hunks)
}

fn matches_at(lines: &[&str], at: usize, old: &[&str]) -> bool {
    at + old.len() <= lines.len()
        && old
            .iter()
            .enumerate()
            .all(|(i, l)| lines[at + i].trim_end() == l.trim_end())
}

/// Applies `diff` to `source`. Errors name the hunk and the first line that does not match.
pub fn apply(source: &str, diff: &str) -> Result<String, PatchError> {
    let hunks = parse_hunks(diff)?;
    let mut lines: Vec<String> = source.lines().map(|s| s.to_string()).collect();
    // Offset between the original numbering and the current buffer.
    let mut delta: isize = 0;
    for (n, h) in hunks.iter().enumerate() {
        let old: Vec<&str> = h
            .lines
            .iter()
            .filter(|(t, _)| *t != '+')
            .map(|(_, s)| s.as_str())
            .collect();
        let new: Vec<String> = h
            .lines
            .iter()
            .filter(|(t, _)| *t != '-')
            .map(|(_, s)| s.clone())
            .collect();
        let view: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
        let want = ((h.old_start.max(1) as isize - 1) + delta).max(0) as usize;
        let at = if matches_at(&view, want, &old) {
            Some(want)
        } else {
            // Nearest match anywhere in the file.
            (0..=view.len())
                .filter(|&i| matches_at(&view, i, &old))
                .min_by_key(|&i| (i as isize - want as isize).unsigned_abs())
        };
        let Some(at) = at else {
            // Explain the first mismatching line at the stated position.
            let mut mismatch = Mismatch::NotInFile;
            for (i, l) in old.iter().enumerate() {
                match view.get(want + i) {
                    Some(got) if got.trim_end() == l.trim_end() => continue,
                    Some(got) => {
                        mismatch = Mismatch::Line {
                            line: want + i + 1,
                            got: got.trim().to_string(),
                            want: l.trim().to_string(),
                        };
                        break;
                    }
                    None => {
                        mismatch = Mismatch::FileEnds(want + i + 1);
                        break;
                    }
                }
            }
            return Err(PatchError::DoesNotApply {
                hunk: n + 1,
                header: h.header.clone(),
                mismatch,
            });
        };
        lines.splice(at..at + old.len(), new.iter().cloned());
        delta += new.len() as isize - old.len() as isize;
        delta += at as isize - want as isize;
    }
    let mut out = lines.join("\n");
    if source.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// A unified diff of two sources (for history entries and prompts).
#[cfg(test)]
pub fn unified(old: &str, new: &str, context: usize) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(context)
        .header("a/kernel.cu", "b/kernel.cu")
        .to_string()
}

/// "+3 −1 lines".
pub fn stat(old: &str, new: &str) -> String {
    let d = similar::TextDiff::from_lines(old, new);
    let (mut add, mut del) = (0, 0);
    for c in d.iter_all_changes() {
        match c.tag() {
            similar::ChangeTag::Insert => add += 1,
            similar::ChangeTag::Delete => del += 1,
            _ => {}
        }
    }
    format!("+{add} −{del} lines")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "a\nb\nc\nd\ne\n";

    #[test]
    fn applies_a_hunk_at_its_line_and_at_an_offset() {
        let d = "--- a/k.cu\n+++ b/k.cu\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n";
        assert_eq!(apply(SRC, d).unwrap(), "a\nb\nC\nd\ne\n");
        // Wrong line number: found by searching.
        let d2 = "@@ -40,3 +40,3 @@\n b\n-c\n+C\n d\n";
        assert_eq!(apply(SRC, d2).unwrap(), "a\nb\nC\nd\ne\n");
        // Two hunks, the first one adding lines.
        let d3 = "@@ -1,2 +1,3 @@\n a\n+x\n b\n@@ -4,2 +5,2 @@\n d\n-e\n+E\n";
        assert_eq!(apply(SRC, d3).unwrap(), "a\nx\nb\nc\nd\nE\n");
    }

    #[test]
    fn a_patch_that_does_not_apply_says_where() {
        let d = "@@ -2,3 +2,3 @@\n b\n-zz\n+C\n d\n";
        let e = apply(SRC, d).unwrap_err().to_string();
        assert!(e.contains("hunk 1") && e.contains("line 3"), "{e}");
        assert!(apply(SRC, "no hunks here").is_err());
    }

    #[test]
    fn unified_round_trips_through_apply() {
        let new = "a\nB\nc\nd\ne\nf\n";
        assert_eq!(apply(SRC, &unified(SRC, new, 3)).unwrap(), new);
        assert_eq!(stat(SRC, new), "+2 −1 lines");
    }

    /// Each diff is what models write: applied here, rejected by `diffy` (see the module doc).
    mod diffy_rejects_what_models_write {
        use super::*;

        fn diffy(source: &str, diff: &str) -> Result<String, String> {
            let p = diffy::Patch::from_str(diff).map_err(|e| e.to_string())?;
            diffy::apply(source, &p).map_err(|e| e.to_string())
        }

        fn both(source: &str, diff: &str, want: &str) -> String {
            assert_eq!(apply(source, diff).unwrap(), want, "{diff}");
            diffy(source, diff).expect_err(diff)
        }

        #[test]
        fn a_context_line_without_its_leading_space() {
            both(SRC, "@@ -2,3 +2,3 @@\nb\n-c\n+C\n d\n", "a\nb\nC\nd\ne\n");
        }

        #[test]
        fn wrong_line_counts_in_the_hunk_header() {
            both(SRC, "@@ -2,4 +2,4 @@\n b\n-c\n+C\n d\n", "a\nb\nC\nd\ne\n");
        }

        #[test]
        fn hunks_out_of_order() {
            let d = "@@ -9,2 +9,2 @@\n d\n-e\n+E\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n";
            both(SRC, d, "A\nb\nc\nd\nE\n");
        }

        #[test]
        fn trailing_whitespace_differences() {
            let src = "a\nb  \nc\nd\t\ne\n";
            both(src, "@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n", "a\nb\nC\nd\ne\n");
        }

        #[test]
        fn its_error_does_not_say_where() {
            let d = "@@ -2,3 +2,3 @@\n b\n-zz\n+C\n d\n";
            assert_eq!(diffy(SRC, d).unwrap_err(), "error applying hunk #1");
            let e = apply(SRC, d).unwrap_err().to_string();
            assert!(e.ends_with("line 3 is `c`, the hunk expects `zz`"), "{e}");
        }

        #[test]
        fn well_formed_diffs_agree() {
            let new = "a\nB\nc\nd\ne\nf\n";
            let d = unified(SRC, new, 3);
            assert_eq!(diffy(SRC, &d).unwrap(), apply(SRC, &d).unwrap());
            let off = "@@ -40,3 +40,3 @@\n b\n-c\n+C\n d\n";
            assert_eq!(diffy(SRC, off).unwrap(), apply(SRC, off).unwrap());
        }
    }
}
