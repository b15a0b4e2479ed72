//! Tool calls assembled from a streamed reply: OpenAI-compatible `delta.tool_calls` pieces
//! (id and name first, the arguments' JSON text in fragments, by `index`) and Anthropic
//! `tool_use` content blocks (`content_block_start`, `input_json_delta` fragments,
//! `content_block_stop`). A call is complete when its block stops (Anthropic) or the reply
//! ends with a finish reason or its terminator; a stream cut before that is an error, and no
//! part of such a call is ever executed.

use super::ToolUse;
use serde_json::Value;

/// A tool call that the stream cut short (its arguments incomplete): its name, when the
/// stream had given it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", match name { Some(n) => format!("tool call `{n}`"), None => "a tool call".into() })]
pub struct CutShort {
    pub name: Option<String>,
}
#[derive(Debug, Default)]
pub struct CallStream {
    calls: Vec<Pending>,
}

#[derive(Debug)]
struct Pending {
    index: u64,
    id: String,
    name: String,
    args: String,
    /// `args` came whole with the block's start (fragments replace it).
    from_start: bool,
    done: bool,
}

impl CallStream {
    fn at(&mut self, index: u64) -> &mut Pending {
        if let Some(i) = self.calls.iter().position(|c| c.index == index) {
            return &mut self.calls[i];
        }
        self.calls.push(Pending {
            index,
            id: String::new(),
            name: String::new(),
            args: String::new(),
            from_start: false,
            done: false,
        });
        self.calls.last_mut().expect("just pushed")
    }

    /// An OpenAI-compatible chunk's first choice (`choices[0]`).
    pub fn openai_choice(&mut self, choice: &Value) {
        if let Some(items) = choice["delta"]["tool_calls"].as_array() {
            for (n, it) in items.iter().enumerate() {
                let index = it["index"].as_u64().unwrap_or(n as u64);
                let p = self.at(index);
                if let Some(id) = it["id"].as_str().filter(|s| !s.is_empty()) {
                    p.id = id.to_string();
                }
                if let Some(name) = it["function"]["name"].as_str() {
                    p.name.push_str(name);
                }
                if let Some(a) = it["function"]["arguments"].as_str() {
                    p.args.push_str(a);
                }
            }
        }
        if choice["finish_reason"].as_str().is_some() {
            self.finish();
        }
    }

    /// An Anthropic `content_block_start`.
    pub fn anthropic_start(&mut self, v: &Value) {
        let block = &v["content_block"];
        if block["type"] != "tool_use" {
            return;
        }
        let p = self.at(v["index"].as_u64().unwrap_or(0));
        p.id = block["id"].as_str().unwrap_or_default().to_string();
        p.name = block["name"].as_str().unwrap_or_default().to_string();
        // The input comes as `input_json_delta` fragments; a non-empty start input stands
        // when none follow.
        if let Some(o) = block["input"].as_object().filter(|o| !o.is_empty()) {
            p.args = Value::Object(o.clone()).to_string();
            p.from_start = true;
        }
    }

    /// An Anthropic `content_block_delta` of type `input_json_delta`.
    pub fn anthropic_delta(&mut self, v: &Value) {
        let Some(part) = v["delta"]["partial_json"].as_str() else {
            return;
        };
        let index = v["index"].as_u64().unwrap_or(0);
        if let Some(p) = self.calls.iter_mut().find(|c| c.index == index) {
            if std::mem::take(&mut p.from_start) {
                p.args.clear();
            }
            p.args.push_str(part);
        }
    }

    /// An Anthropic `content_block_stop`.
    pub fn anthropic_stop(&mut self, v: &Value) {
        let index = v["index"].as_u64().unwrap_or(0);
        if let Some(p) = self.calls.iter_mut().find(|c| c.index == index) {
            p.done = true;
        }
    }

    /// The reply ended properly (a finish reason, `[DONE]`, `message_stop`): every call is whole.
    pub fn finish(&mut self) {
        for c in &mut self.calls {
            c.done = true;
        }
    }

    /// The calls, in order; Err names the first call the stream cut short.
    pub fn into_calls(self) -> Result<Vec<ToolUse>, CutShort> {
        if let Some(c) = self.calls.iter().find(|c| !c.done) {
            return Err(CutShort {
                name: Some(c.name.clone()).filter(|n| !n.is_empty()),
            });
        }
        Ok(self
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| ToolUse {
                id: if c.id.is_empty() {
                    format!("call_{}", i + 1)
                } else {
                    c.id
                },
                name: c.name,
                input: c.args,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_fragments_are_joined_by_index() {
        let mut s = CallStream::default();
        let chunks = [
            json!({"delta": {"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "run", "arguments": ""}}]}}),
            json!({"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"sha"}}]}}),
            json!({"delta": {"tool_calls": [{"index": 1, "function": {"name": "lookup", "arguments": "{\"query\": \"x\"}"}}]}}),
            json!({"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "pes\": [1]}"}}]}}),
        ];
        for c in &chunks {
            s.openai_choice(c);
        }
        // Cut before the finish reason: not executable.
        let cut = std::mem::take(&mut s.calls);
        assert_eq!(
            CallStream { calls: cut }
                .into_calls()
                .unwrap_err()
                .to_string(),
            "tool call `run`"
        );
        for c in &chunks {
            s.openai_choice(c);
        }
        s.openai_choice(&json!({"delta": {}, "finish_reason": "tool_calls"}));
        let calls = s.into_calls().unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (
                calls[0].id.as_str(),
                calls[0].name.as_str(),
                calls[0].input.as_str()
            ),
            ("call_a", "run", "{\"shapes\": [1]}")
        );
        assert_eq!(calls[1].id, "call_2", "a missing id is made up");
    }

    #[test]
    fn anthropic_blocks_complete_at_their_stop() {
        let mut s = CallStream::default();
        s.anthropic_start(&json!({"index": 0, "content_block": {"type": "text", "text": ""}}));
        s.anthropic_start(&json!({"index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "compile", "input": {}}}));
        s.anthropic_delta(&json!({"index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"diff\": "}}));
        s.anthropic_delta(
            &json!({"index": 1, "delta": {"type": "input_json_delta", "partial_json": "\"@@\"}"}}),
        );
        s.anthropic_stop(&json!({"index": 1}));
        s.anthropic_start(&json!({"index": 2, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "run", "input": {}}}));
        s.anthropic_delta(
            &json!({"index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"mo"}}),
        );
        let e = std::mem::take(&mut s).into_calls().unwrap_err();
        assert_eq!(e.to_string(), "tool call `run`");

        let mut s = CallStream::default();
        s.anthropic_start(&json!({"index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "compile", "input": {}}}));
        s.anthropic_delta(&json!({"index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"diff\": \"@@\"}"}}));
        s.anthropic_stop(&json!({"index": 1}));
        let c = s.into_calls().unwrap();
        assert_eq!(c[0].input, "{\"diff\": \"@@\"}");
        assert_eq!(c[0].id, "toolu_1");
    }
}
