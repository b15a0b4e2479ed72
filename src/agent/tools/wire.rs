//! The conversation of an iteration with tools, and its request bodies in each protocol:
//! OpenAI-compatible chat completions (`tools`, assistant `tool_calls`, `tool` messages) and
//! the Anthropic Messages API (`tools`, `tool_use` and `tool_result` content blocks).
//!
//! Invariant: every assistant message of a body is valid in its protocol whatever the model
//! replied: one without a tool call and without text (or only white space) carries
//! [`EMPTY_TURN`] as its text (OpenAI refuses `"content": null` without `tool_calls`,
//! Anthropic an empty or blank text block); one with tool calls and no text carries only them.

use super::ToolUse;
use super::schema::ToolDef;
use crate::agent::config::BackendKind;
use serde_json::{Value, json};

/// The text of an assistant turn that had none and called no tool.
pub const EMPTY_TURN: &str = "(empty reply)";

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// The engineer's side: the context, a nudge, a note.
    User(String),
    /// What the model said and the tools it called.
    Assistant { text: String, calls: Vec<ToolUse> },
    /// The results of the previous turn's calls, in the same order.
    Results(Vec<ToolResult>),
}

/// A tool's result as sent back.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The call's id.
    pub id: String,
    pub text: String,
    pub error: bool,
}

/// The request body of a streamed completion with tools.
pub fn body(
    kind: BackendKind,
    model: &str,
    max_tokens: u32,
    system: &str,
    turns: &[Turn],
    tools: &[ToolDef],
) -> Value {
    match kind {
        BackendKind::Anthropic => json!({
            "model": model,
            "max_tokens": max_tokens,
            "system": system,
            "messages": anthropic_messages(turns),
            "tools": tools.iter().map(|t| json!({
                "name": t.name,
                "description": t.description,
                "input_schema": t.schema,
            })).collect::<Vec<_>>(),
            "stream": true,
        }),
        _ => {
            let mut messages = vec![json!({"role": "system", "content": system})];
            messages.extend(openai_messages(turns));
            json!({
                "model": model,
                "messages": messages,
                "tools": tools.iter().map(|t| json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.schema,
                    }
                })).collect::<Vec<_>>(),
                "tool_choice": "auto",
                "max_tokens": max_tokens,
                "stream": true,
                "stream_options": {"include_usage": true},
            })
        }
    }
}

/// The arguments as a JSON object (what Anthropic's `tool_use.input` must be); arguments that
/// did not parse are kept as text under `unparsed_arguments`.
fn input_object(input: &str) -> Value {
    if input.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(input) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({"unparsed_arguments": input}),
    }
}

fn anthropic_messages(turns: &[Turn]) -> Vec<Value> {
    turns
        .iter()
        .map(|t| match t {
            Turn::User(text) => json!({"role": "user", "content": text}),
            Turn::Assistant { text, calls } => {
                let mut blocks = Vec::new();
                if !text.trim().is_empty() || calls.is_empty() {
                    let text = if text.trim().is_empty() {
                        EMPTY_TURN
                    } else {
                        text
                    };
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for c in calls {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": c.id,
                        "name": c.name,
                        "input": input_object(&c.input),
                    }));
                }
                json!({"role": "assistant", "content": blocks})
            }
            Turn::Results(results) => json!({
                "role": "user",
                "content": results.iter().map(|r| json!({
                    "type": "tool_result",
                    "tool_use_id": r.id,
                    "content": r.text,
                    "is_error": r.error,
                })).collect::<Vec<_>>(),
            }),
        })
        .collect()
}

fn openai_messages(turns: &[Turn]) -> Vec<Value> {
    let mut out = Vec::new();
    for t in turns {
        match t {
            Turn::User(text) => out.push(json!({"role": "user", "content": text})),
            Turn::Assistant { text, calls } => {
                let content = match (text.trim().is_empty(), calls.is_empty()) {
                    (false, _) => json!(text),
                    (true, false) => Value::Null,
                    (true, true) => json!(EMPTY_TURN),
                };
                let mut m = json!({"role": "assistant", "content": content});
                if !calls.is_empty() {
                    m["tool_calls"] = calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": c.input},
                            })
                        })
                        .collect();
                }
                out.push(m);
            }
            Turn::Results(results) => {
                for r in results {
                    let content = if r.error {
                        format!("ERROR: {}", r.text)
                    } else {
                        r.text.clone()
                    };
                    out.push(json!({"role": "tool", "tool_call_id": r.id, "content": content}));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turns() -> Vec<Turn> {
        vec![
            Turn::User("context".into()),
            Turn::Assistant {
                text: "Let me compile it.".into(),
                calls: vec![ToolUse {
                    id: "call_1".into(),
                    name: "compile".into(),
                    input: "{\"diff\": \"@@ x\"}".into(),
                }],
            },
            Turn::Results(vec![ToolResult {
                id: "call_1".into(),
                text: "compiled: ok".into(),
                error: false,
            }]),
        ]
    }

    #[test]
    fn openai_bodies_carry_tools_tool_calls_and_tool_messages() {
        let b = body(
            BackendKind::Openai,
            "m",
            100,
            "sys",
            &turns(),
            &super::super::schema::definitions(),
        );
        assert_eq!(b["tools"][0]["type"], "function");
        assert_eq!(b["tools"][0]["function"]["name"], "compile");
        let m = b["messages"].as_array().unwrap();
        assert_eq!(m[0]["role"], "system");
        assert_eq!(
            m[2]["tool_calls"][0]["function"]["arguments"],
            "{\"diff\": \"@@ x\"}"
        );
        assert_eq!(m[3]["role"], "tool");
        assert_eq!(m[3]["tool_call_id"], "call_1");
    }

    #[test]
    fn an_empty_or_blank_assistant_turn_gets_a_placeholder_in_both_protocols() {
        for text in ["", " \n\t"] {
            let t = vec![
                Turn::User("context".into()),
                Turn::Assistant {
                    text: text.into(),
                    calls: vec![],
                },
                Turn::User("nudge".into()),
            ];
            let defs = super::super::schema::definitions();
            let o = body(BackendKind::Openai, "m", 100, "sys", &t, &defs);
            assert_eq!(o["messages"][2]["content"], EMPTY_TURN, "{text:?}");
            let a = body(BackendKind::Anthropic, "m", 100, "sys", &t, &defs);
            assert_eq!(
                a["messages"][1]["content"][0]["text"], EMPTY_TURN,
                "{text:?}"
            );
        }
    }

    #[test]
    fn anthropic_bodies_carry_tool_use_and_tool_result_blocks() {
        let mut t = turns();
        t.push(Turn::Assistant {
            text: String::new(),
            calls: vec![ToolUse {
                id: "toolu_2".into(),
                name: "run".into(),
                input: "{broken".into(),
            }],
        });
        let b = body(
            BackendKind::Anthropic,
            "m",
            100,
            "sys",
            &t,
            &super::super::schema::definitions(),
        );
        assert_eq!(b["system"], "sys");
        assert_eq!(b["tools"][1]["name"], "run");
        assert!(b["tools"][1]["input_schema"]["properties"]["shapes"].is_object());
        let m = b["messages"].as_array().unwrap();
        assert_eq!(m[1]["content"][1]["type"], "tool_use");
        assert_eq!(m[1]["content"][1]["input"]["diff"], "@@ x");
        assert_eq!(m[2]["content"][0]["type"], "tool_result");
        assert_eq!(m[2]["content"][0]["tool_use_id"], "call_1");
        // No empty text block; arguments that did not parse are kept as text.
        assert_eq!(m[3]["content"][0]["type"], "tool_use");
        assert_eq!(m[3]["content"][0]["input"]["unparsed_arguments"], "{broken");
    }
}
