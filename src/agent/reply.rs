//! The reply format of LLM backends (docs/agent.md):
//!
//! ~~~text
//! Hypothesis: one sentence: what limits the incumbent and why this change helps
//! Category: vectorization
//! ```cuda
//! ...the complete kernel file, launch plan included...
//! ```
//! ~~~
//!
//! or, instead of the full file, a ```diff block with a unified diff against the incumbent.

use super::{CATEGORIES, normalize_category};

#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The complete kernel file.
    Full(String),
    /// A unified diff against the incumbent.
    Patch(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub hypothesis: String,
    pub category: &'static str,
    pub change: Change,
}

/// The instructions on the format, for the system prompt.
pub fn format_instructions() -> String {
    format!(
        "Reply with exactly one proposal in this format:\n\
         Hypothesis: <one sentence: what limits the incumbent and why your change helps>\n\
         Category: <exactly one of: {}>\n\
         then EITHER the complete kernel file in one ```cuda fenced block (keep the \
         `/* atrex:plan ... */` launch plan and the argument names), OR a unified diff against \
         the incumbent in one ```diff fenced block (`@@ -a,b +c,d @@` hunks with exact context \
         lines). Apply ONE optimization idea per revision. No other code blocks.",
        CATEGORIES.join(", ")
    )
}

/// The short corrective message sent once after an unparseable reply.
pub fn corrective(err: &ReplyError) -> String {
    format!(
        "Your reply could not be used: {err}. Answer again with the `Hypothesis:` and \
         `Category:` lines and exactly one ```cuda block (the full file) or ```diff block."
    )
}

fn field(text: &str, name: &str) -> Option<String> {
    for line in text.lines() {
        let l = line
            .trim()
            .trim_start_matches(['#', '-', '*', ' '])
            .replace("**", "");
        let lower = l.to_lowercase();
        let key = format!("{}:", name.to_lowercase());
        if let Some(rest) = lower.strip_prefix(&key) {
            let v = l[l.len() - rest.len()..].trim().to_string();
            if !v.is_empty() {
                return Some(v);
            }
        }
    }
    None
}

/// Fenced blocks: (info string, body).
fn blocks(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(String, Vec<&str>)> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("```") {
            match cur.take() {
                None => cur = Some((rest.trim().to_lowercase(), Vec::new())),
                Some((info, body)) => {
                    let mut b = body.join("\n");
                    b.push('\n');
                    out.push((info, b));
                }
            }
            continue;
        }
        if let Some((_, body)) = cur.as_mut() {
            body.push(line);
        }
    }
    out
}

/// What a reply lacks: said back to the model in the corrective message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplyError {
    #[error("no `Hypothesis:` line")]
    NoHypothesis,
    #[error("no `Category:` line")]
    NoCategory,
    #[error("unknown category `{0}` (one of {all})", all = CATEGORIES.join(", "))]
    UnknownCategory(String),
    #[error("no ```cuda or ```diff block")]
    NoCode,
    #[error("the ```diff block has no `@@` hunk")]
    NoHunk,
    #[error(
        "the ```cuda block is not a complete kernel file: it has no `/* atrex:plan` launch plan"
    )]
    NotAKernelFile,
}

/// Parses a reply. Errors say what is missing, for the corrective message.
pub fn parse(text: &str) -> Result<Reply, ReplyError> {
    let hypothesis = field(text, "Hypothesis").ok_or(ReplyError::NoHypothesis)?;
    let cat = field(text, "Category").ok_or(ReplyError::NoCategory)?;
    let category =
        normalize_category(&cat).ok_or_else(|| ReplyError::UnknownCategory(cat.clone()))?;
    let bs = blocks(text);
    let code: Vec<&(String, String)> = bs
        .iter()
        .filter(|(info, _)| {
            matches!(
                info.as_str(),
                "cuda" | "cu" | "c++" | "cpp" | "c" | "diff" | "patch" | "udiff" | ""
            )
        })
        .collect();
    let Some((info, body)) = code.last() else {
        return Err(ReplyError::NoCode);
    };
    let is_diff = matches!(info.as_str(), "diff" | "patch" | "udiff")
        || (info.is_empty() && body.lines().any(|l| l.starts_with("@@")));
    let change = if is_diff {
        if !body.lines().any(|l| l.starts_with("@@")) {
            return Err(ReplyError::NoHunk);
        }
        Change::Patch(body.clone())
    } else {
        if !body.contains(crate::contract::plan::PLAN_START) {
            return Err(ReplyError::NotAKernelFile);
        }
        Change::Full(body.clone())
    };
    Ok(Reply {
        hypothesis,
        category,
        change,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_files_and_diffs() {
        let r = parse(
            "Sure.\n**Hypothesis:** fewer threads per row raise occupancy\nCategory: Launch config\n```cuda\n/* atrex:plan\n*/\nint x;\n```\n",
        )
        .unwrap();
        assert_eq!(r.category, "launch-config");
        assert_eq!(r.hypothesis, "fewer threads per row raise occupancy");
        assert!(matches!(r.change, Change::Full(ref s) if s.contains("int x;")));
        let r =
            parse("Hypothesis: h\nCategory: vectorization\n```diff\n@@ -1,1 +1,1 @@\n-a\n+b\n```")
                .unwrap();
        assert!(matches!(r.change, Change::Patch(_)));
    }

    #[test]
    fn malformed_replies_say_what_is_missing() {
        assert!(
            parse("```cuda\n/* atrex:plan */\n```")
                .unwrap_err()
                .to_string()
                .contains("Hypothesis")
        );
        assert!(
            parse("Hypothesis: h\n```cuda\nx\n```")
                .unwrap_err()
                .to_string()
                .contains("Category")
        );
        assert!(
            parse("Hypothesis: h\nCategory: magic\n```cuda\nx\n```")
                .unwrap_err()
                .to_string()
                .contains("unknown category")
        );
        assert!(
            parse("Hypothesis: h\nCategory: fusion\nno code")
                .unwrap_err()
                .to_string()
                .contains("no ```")
        );
        assert!(
            parse("Hypothesis: h\nCategory: fusion\n```cuda\nint x;\n```")
                .unwrap_err()
                .to_string()
                .contains("launch plan")
        );
    }
}
