//! Whether a server that refused a request with tools (HTTP 400 or 422) said that the model or
//! the server has no tool calling — the only refusal that turns tools off for the run.
//!
//! Invariant: a body counts only when it says so in words servers use for it: a negation
//! ("does not support", "not supported", "unsupported", "not enabled", "not available") within
//! a few words of "tool" or "function call", or a server's switch for tool calling named as
//! missing (vLLM's `--enable-auto-tool-choice` / `--tool-call-parser`, llama.cpp's `--jinja`).
//! A body that merely mentions tools (a malformed `tool_calls` history, a schema error) does
//! not: that request is refused as any other, with its status and an excerpt of the body.

/// How far (in bytes, each side) a negation may be from the word "tool".
const NEAR: usize = 60;

const NEGATIONS: &[&str] = &[
    "not support",
    "n't support",
    "unsupported",
    "not enabled",
    "not available",
];

const SWITCHES: &[&str] = &["--enable-auto-tool-choice", "--tool-call-parser", "--jinja"];

const SUBJECTS: &[&str] = &["tool", "function call", "function_call"];

/// True when the body of a refused request says the model or server has no tool calling.
pub fn says_no_tools(body: &str) -> bool {
    let b = body.to_lowercase();
    if SWITCHES.iter().any(|s| b.contains(s)) {
        return true;
    }
    NEGATIONS.iter().any(|neg| {
        b.match_indices(neg).any(|(i, _)| {
            let mut lo = i.saturating_sub(NEAR);
            while !b.is_char_boundary(lo) {
                lo -= 1;
            }
            let mut hi = (i + neg.len() + NEAR).min(b.len());
            while !b.is_char_boundary(hi) {
                hi += 1;
            }
            SUBJECTS.iter().any(|s| b[lo..hi].contains(s))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_without_tool_calling_are_recognised() {
        for body in [
            // vLLM without a tool parser
            r#"{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","code":400}"#,
            // Ollama, a model without tools
            r#"{"error":{"message":"registry.ollama.ai/library/gemma:2b does not support tools","type":"api_error"}}"#,
            // OpenAI, a model without tools
            r#"{"error":{"message":"Unsupported parameter: 'tools' is not supported with this model.","type":"invalid_request_error","param":"tools","code":"unsupported_parameter"}}"#,
            // llama.cpp's server without --jinja
            r#"{"error":{"code":400,"message":"tools param requires --jinja flag","type":"invalid_request_error"}}"#,
            // a proxy naming the parameters it drops
            r#"{"error":{"message":"litellm.UnsupportedParamsError: model does not support parameters: ['tools', 'tool_choice']"}}"#,
            r#"{"error":{"message":"Function calling is not enabled for this model"}}"#,
        ] {
            assert!(says_no_tools(body), "{body}");
        }
    }

    #[test]
    fn bodies_that_only_mention_tools_are_not_a_refusal_of_tools() {
        for body in [
            r#"{"error":{"message":"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_1","type":"invalid_request_error","param":"messages.[3].role"}}"#,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1"}}"#,
            r#"{"error":{"message":"Invalid schema for function 'compile': In context=(), 'additionalProperties' is required to be supplied and to be false.","type":"invalid_request_error","param":"tools[0].function.parameters"}}"#,
            r#"{"error":{"message":"Invalid value for 'content': expected a string, got null.","param":"messages.[2].content"}}"#,
            r#"{"error":{"message":"This model's maximum context length is 32768 tokens. However, you requested 40123 tokens. Please reduce the length of the messages or tools."}}"#,
            r#"{"error":{"message":"Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported."}}"#,
        ] {
            assert!(!says_no_tools(body), "{body}");
        }
    }
}
