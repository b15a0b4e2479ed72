//! The bounds of the model's side of an iteration with tools (docs/agent.md, "Tools"): what a
//! tool result may hand the model, what a tool call may hand the tools, and what a call leaves
//! in the session.
//!
//! Invariants:
//! - Every tool result the model gets (a result, an error, a refusal) is at most
//!   [`limit`] bytes of the tool, budget line and last-turn notice included: the tool's text is
//!   cut to `limit − TAIL` bytes on a UTF-8 boundary, and a cut says how many characters went
//!   and why ([`cut`]). Only the engineer's steering notes may come after that.
//! - A call whose name is longer than [`MAX_NAME`] bytes, whose arguments are longer than
//!   [`MAX_ARGS`] bytes or nested deeper than [`MAX_DEPTH`] is refused before its arguments
//!   are parsed ([`refusal`]); the refusal is short, and it counts against the tool-call budget
//!   as any call with bad arguments does.
//! - Such a call goes back to the model in the conversation with its arguments replaced by a
//!   short note and its name cut ([`echoed`]), so that no later request carries them again.
//! - The session keeps one line per call: the result's summary cut to [`MAX_SUMMARY`]
//!   characters and the tool's name cut to [`MAX_NAME`] bytes; the model's full text is not
//!   recorded.

use super::ToolUse;
use super::lookup::MAX_DOC;

/// The most a tool result gives the model, in bytes (docs/agent.md: "at most 6 KB").
pub const MAX_RESULT: usize = 6000;
/// Room kept in every result for the budget line and the last-turn notice.
pub const TAIL: usize = 400;
/// The most JSON text a call's arguments may have, in bytes: the largest kernel file of the
/// knowledge base is 71 KB.
pub const MAX_ARGS: usize = 256 * 1024;
/// The deepest nesting of a call's arguments (the tools' arguments are two levels deep).
pub const MAX_DEPTH: usize = 8;
/// The longest tool name, in bytes (the tools' names are a few letters).
pub const MAX_NAME: usize = 64;
/// The longest summary of a call in the session, in characters.
pub const MAX_SUMMARY: usize = 200;

/// The bound of a tool's result: `read` gives a document up to 14 KB, any other tool 6 KB.
pub fn limit(tool: &str) -> usize {
    if tool == "read" { MAX_DOC } else { MAX_RESULT }
}

/// `n` with thousands separators: 4,993,000.
fn thousands(n: usize) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn notice(chars: usize, max: usize) -> String {
    format!(
        "\n[… {} characters cut: the result exceeded {} bytes; ask for less (fewer shapes, a smaller change, a narrower query)]",
        thousands(chars),
        thousands(max)
    )
}

/// `text` in at most `max` bytes: whole when it fits, else its start, cut on a UTF-8 boundary,
/// and a notice of what was cut (its length included in `max`) that names the bound `named`.
pub fn cut(text: &str, max: usize, named: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    // The notice with every character counted is at least as long as the real one.
    let room = max.saturating_sub(notice(text.chars().count(), named).len());
    let mut end = room.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let kept = &text[..end];
    format!("{kept}{}", notice(text[end..].chars().count(), named))
}

/// A tool's text for the model, leaving room for the budget line; a cut names the tool's
/// bound.
pub fn result(tool: &str, text: &str) -> String {
    cut(text, limit(tool) - TAIL, limit(tool))
}

/// At most `max` bytes of `s`, cut on a UTF-8 boundary, `…` marking a cut.
pub fn prefix(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// How deep JSON text nests (objects and lists; brackets inside strings do not count).
pub fn depth(json: &str) -> usize {
    let (mut d, mut most) = (0usize, 0usize);
    let (mut in_str, mut escaped) = (false, false);
    for b in json.bytes() {
        if in_str {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => {
                d += 1;
                most = most.max(d);
            }
            b'}' | b']' => d = d.saturating_sub(1),
            _ => {}
        }
    }
    most
}

/// A call over the bounds, refused before its arguments are looked at. Its message is short.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Oversized {
    /// `shown`: the name's first 40 bytes.
    #[error(
        "unknown tool `{shown}` (a name of {} bytes; the tools: {})",
        thousands(*bytes),
        super::args::TOOL_NAMES.join(", ")
    )]
    Name { shown: String, bytes: usize },
    #[error(
        "the arguments are {} bytes, more than the limit of {} (256 KiB): send a diff against the incumbent instead of a whole file, or a smaller change",
        thousands(*.0),
        thousands(MAX_ARGS)
    )]
    Arguments(usize),
    #[error(
        "the arguments nest {} levels deep, more than {MAX_DEPTH} (the tools take strings, numbers and a list of shape ids)",
        thousands(*.0)
    )]
    Nesting(usize),
}

/// Why a call is refused before its arguments are looked at (None: they may be parsed).
pub fn refusal(u: &ToolUse) -> Option<Oversized> {
    if u.name.len() > MAX_NAME {
        return Some(Oversized::Name {
            shown: prefix(&u.name, 40),
            bytes: u.name.len(),
        });
    }
    if u.input.len() > MAX_ARGS {
        return Some(Oversized::Arguments(u.input.len()));
    }
    let d = depth(&u.input);
    if d > MAX_DEPTH {
        return Some(Oversized::Nesting(d));
    }
    None
}

/// The calls as the conversation keeps them: a refused call's arguments replaced by a short
/// note (a JSON object, as Anthropic's `tool_use.input` must be), its name cut.
pub fn echoed(calls: &[ToolUse]) -> Vec<ToolUse> {
    calls
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if c.input.len() > MAX_ARGS || depth(&c.input) > MAX_DEPTH {
                c.input = serde_json::json!({
                    "arguments_not_kept": format!("{} bytes, refused", thousands(c.input.len()))
                })
                .to_string();
            }
            if c.name.len() > MAX_NAME {
                c.name = prefix(&c.name, MAX_NAME - '…'.len_utf8());
            }
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, input: String) -> ToolUse {
        ToolUse {
            id: "c1".into(),
            name: name.into(),
            input,
        }
    }

    #[test]
    fn a_long_text_is_cut_on_a_character_boundary_with_a_notice_within_the_bound() {
        let text = "é".repeat(3000) + &"x".repeat(5_000_000);
        let out = cut(&text, 6000, 6000);
        assert!(out.len() <= 6000, "{}", out.len());
        assert!(out.len() > 5800, "the bound is used: {}", out.len());
        let kept = out.split("\n[…").next().unwrap();
        assert!(kept.chars().all(|c| c == 'é'), "whole characters only");
        let cut_chars = 3000 + 5_000_000 - kept.chars().count();
        assert!(
            out.ends_with(&format!(
                "[… {} characters cut: the result exceeded 6,000 bytes; ask for less (fewer shapes, a smaller change, a narrower query)]",
                thousands(cut_chars)
            )),
            "{}",
            &out[out.len() - 200..]
        );
        assert_eq!(cut("short", 6000, 6000), "short");
        assert_eq!(thousands(4_993_000), "4,993,000");
        assert_eq!(thousands(999), "999");
        assert!(result("run", &text).len() <= MAX_RESULT - TAIL);
        assert!(
            result("read", &text).len() > MAX_RESULT,
            "a document gets 14 KB"
        );
    }

    #[test]
    fn oversized_names_arguments_and_nesting_are_refused_briefly() {
        let e = refusal(&call(&"n".repeat(1 << 20), "{}".into()))
            .unwrap()
            .to_string();
        assert!(e.starts_with("unknown tool `nnn") && e.len() < 200, "{e}");
        let e = refusal(&call(
            "compile",
            format!("{{\"source\": \"{}\"}}", "a".repeat(3 << 20)),
        ))
        .unwrap()
        .to_string();
        assert!(
            e.contains("the arguments are 3,145,742 bytes") && e.len() < 300,
            "{e}"
        );
        let nested = format!(
            "{{\"shapes\": {}{}}}",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        let e = refusal(&call("run", nested)).unwrap().to_string();
        assert!(e.contains("nest 10,001 levels deep"), "{e}");
        // Brackets inside strings are text, not nesting.
        let ok = serde_json::json!({"diff": "@@ [[[[[[[[[[[[ {{{{{{{{{ \\\" [[[[["}).to_string();
        assert_eq!(depth(&ok), 1);
        assert_eq!(refusal(&call("run", ok)), None);
        let kept = echoed(&[call(&"n".repeat(1000), "[".repeat(100))]);
        assert!(kept[0].name.len() <= MAX_NAME);
        assert_eq!(
            kept[0].input,
            "{\"arguments_not_kept\":\"100 bytes, refused\"}"
        );
    }
}
