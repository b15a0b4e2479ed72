//! Scripted replies with tool calls, as each protocol streams them: OpenAI-compatible
//! `delta.tool_calls` fragments and Anthropic `tool_use` blocks with `input_json_delta`
//! fragments; whole, or cut in the middle of the last call's arguments.

use super::*;

/// A tool call of a scripted reply: the tool and its arguments' JSON text (sent as is, so that
/// bad JSON can be scripted too).
pub(super) type Call<'a> = (&'a str, String);

/// The JSON text of arguments.
pub(super) fn args(v: serde_json::Value) -> String {
    v.to_string()
}

/// `text` in three fragments (at character boundaries).
fn thirds(text: &str) -> Vec<&str> {
    let cut = |mut i: usize| {
        while !text.is_char_boundary(i) {
            i += 1;
        }
        i
    };
    let (a, b) = (cut(text.len() / 3), cut(2 * text.len() / 3));
    vec![&text[..a], &text[a..b], &text[b..]]
}

fn openai_chunk(delta: serde_json::Value) -> String {
    format!(
        "data: {}",
        serde_json::json!({"id": "chatcmpl-t", "choices": [{"index": 0, "delta": delta}]})
    )
}

/// An OpenAI-style reply: some text, then each call's id and name, then its arguments in
/// three fragments; `cut`: the stream stops half-way through the last call's arguments.
pub(super) fn openai_calls(text: &str, calls: &[Call<'_>], tin: u64, tout: u64, cut: bool) -> Resp {
    let mut ev = Vec::new();
    if !text.is_empty() {
        ev.push(openai_chunk(
            serde_json::json!({"role": "assistant", "content": text}),
        ));
    }
    for (i, (name, a)) in calls.iter().enumerate() {
        ev.push(openai_chunk(serde_json::json!({"tool_calls": [{
            "index": i, "id": format!("call_{}", i + 1), "type": "function",
            "function": {"name": name, "arguments": ""}
        }]})));
        let parts = thirds(a);
        let last = cut && i + 1 == calls.len();
        for p in parts.iter().take(if last { 2 } else { 3 }) {
            ev.push(openai_chunk(
                serde_json::json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
            ));
        }
    }
    if !cut {
        ev.push(format!(
            "data: {}",
            serde_json::json!({"id": "chatcmpl-t", "choices": [{"index": 0, "delta": {}, "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" }}]})
        ));
        ev.push(format!(
            "data: {}",
            serde_json::json!({"id": "chatcmpl-t", "choices": [], "usage": {"prompt_tokens": tin, "completion_tokens": tout}})
        ));
        ev.push("data: [DONE]".into());
    }
    Resp::Sse(ev)
}

fn anthropic_event(ty: &str, v: serde_json::Value) -> String {
    format!("event: {ty}\ndata: {v}")
}

/// An Anthropic-style reply: a text block, then a `tool_use` block per call with its input in
/// three `input_json_delta` fragments; `cut`: the stream stops half-way through the last
/// call's input.
pub(super) fn anthropic_calls(
    text: &str,
    calls: &[Call<'_>],
    tin: u64,
    tout: u64,
    cut: bool,
) -> Resp {
    let mut ev = vec![anthropic_event(
        "message_start",
        serde_json::json!({"type": "message_start", "message": {"id": "msg_t", "usage": {"input_tokens": tin, "output_tokens": 1}}}),
    )];
    let mut index = 0;
    if !text.is_empty() {
        ev.push(anthropic_event("content_block_start", serde_json::json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})));
        ev.push(anthropic_event("content_block_delta", serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})));
        ev.push(anthropic_event(
            "content_block_stop",
            serde_json::json!({"type": "content_block_stop", "index": 0}),
        ));
        index = 1;
    }
    for (i, (name, a)) in calls.iter().enumerate() {
        let k = index + i;
        ev.push(anthropic_event("content_block_start", serde_json::json!({"type": "content_block_start", "index": k, "content_block": {"type": "tool_use", "id": format!("toolu_{}", i + 1), "name": name, "input": {}}})));
        let last = cut && i + 1 == calls.len();
        for p in thirds(a).iter().take(if last { 2 } else { 3 }) {
            ev.push(anthropic_event("content_block_delta", serde_json::json!({"type": "content_block_delta", "index": k, "delta": {"type": "input_json_delta", "partial_json": p}})));
        }
        if !last {
            ev.push(anthropic_event(
                "content_block_stop",
                serde_json::json!({"type": "content_block_stop", "index": k}),
            ));
        }
    }
    if !cut {
        ev.push(anthropic_event("message_delta", serde_json::json!({"type": "message_delta", "delta": {"stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" }}, "usage": {"output_tokens": tout}})));
        ev.push(anthropic_event(
            "message_stop",
            serde_json::json!({"type": "message_stop"}),
        ));
    }
    Resp::Sse(ev)
}

/// A reply in the protocol of `kind`.
pub(super) fn calls(
    kind: BackendKind,
    text: &str,
    calls: &[Call<'_>],
    tin: u64,
    tout: u64,
) -> Resp {
    match kind {
        BackendKind::Anthropic => anthropic_calls(text, calls, tin, tout, false),
        _ => openai_calls(text, calls, tin, tout, false),
    }
}

/// A reply cut half-way through its last call's arguments.
pub(super) fn cut_calls(kind: BackendKind, text: &str, c: &[Call<'_>]) -> Resp {
    match kind {
        BackendKind::Anthropic => anthropic_calls(text, c, 10, 5, true),
        _ => openai_calls(text, c, 10, 5, true),
    }
}

/// A diff against `PLAIN` that sets the fake measurer's S to `s`.
pub(super) fn diff_to(s: f64) -> String {
    format!("--- a/kernel.cu\n+++ b/kernel.cu\n@@ -8,1 +8,1 @@\n-// S=0.5\n+// S={s}\n")
}

/// The tool calls a sink recorded, in order: (name, ok, result).
pub(super) fn tool_calls(events: &[SessionEvent]) -> Vec<(String, bool, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolCall {
                name, ok, result, ..
            } => Some((name.clone(), *ok, result.clone())),
            _ => None,
        })
        .collect()
}

/// A driver on `PLAIN` with tools on (`limits`), one iteration, in auto mode.
pub(super) fn tool_driver(
    url: &str,
    kind: BackendKind,
    measurer: FakeMeasurer,
    sink: MemSink,
    limits: ToolSettings,
) -> Driver<LlmProposer, FakeMeasurer, super::setup::NoGate, MemSink> {
    let p = LlmProposer {
        client: client(kind, url, 2000),
    };
    let budget = Budget {
        max_iters: 1,
        tools: limits,
        ..Default::default()
    };
    driver(p, measurer, sink, PLAIN, budget, DecisionMode::Auto)
}

/// The body of a recorded request (after the head).
pub(super) fn body(req: &str) -> serde_json::Value {
    let b = req.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str(b).unwrap_or_else(|e| panic!("request body is not JSON ({e}): {b}"))
}
