//! LLM backends over HTTP with streamed replies (server-sent events, parsed by
//! `eventsource-stream`): OpenAI-compatible chat completions (OpenAI, vLLM, SGLang, llama.cpp's
//! server, Ollama) and the Anthropic Messages API.
//! Retries with backoff on 429, 5xx, dropped connections and timeouts; clear errors for 401,
//! 404 and unknown models. Keys are sent in headers only and never appear in errors. A refusal
//! is "tools refused" only when its body says the model or server has no tool calling
//! (`tool_refusal`); any other names its status and quotes a bounded excerpt of the body.
//! A completion may offer tools (`complete_tools`): the calls the model makes are assembled
//! from the stream (`tools::stream`), and a stream cut in the middle of one is retried.

use super::config::{BackendKind, Endpoint};
use super::tools::ToolUse;
use super::tools::schema::ToolDef;
use super::tools::stream::CallStream;
use super::tools::wire::{self, Turn};
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// "user" or "assistant".
    pub role: &'static str,
    pub content: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    pub text: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub request_id: Option<String>,
    /// Attempts made (1 when the first one succeeded).
    pub attempts: u32,
    /// The tools the model called (a completion with tools), whole.
    pub tool_calls: Vec<ToolUse>,
}

/// Streaming progress.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta<'a> {
    /// A retry starts: forget the text streamed so far.
    Reset(&'a str),
    Text(&'a str),
}

/// Why a completion failed for good. Each holds the last attempt's cause in words (its HTTP
/// status and a bounded excerpt of the body, scrubbed of secrets).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// Authentication, not found, unknown model, bad request: retrying will not help.
    #[error("{0}")]
    Fatal(String),
    /// Retries spent on 429 / 5xx / timeouts.
    #[error("{0} (retries spent)")]
    Exhausted(String),
    /// The server refused a request with tools (the model or the server has no tool calling).
    #[error("tools refused: {0}")]
    ToolsRefused(String),
}

/// The HTTP client could not be made (its TLS backend).
#[derive(Debug, thiserror::Error)]
#[error("HTTP client: {0}")]
pub struct HttpClientError(#[from] reqwest::Error);

crate::error::text_at_the_edge!(LlmError, HttpClientError);

enum Attempt {
    Retry(String, Option<Duration>),
    Fatal(String),
    ToolsRefused(String),
}

#[derive(Clone)]
pub struct LlmClient {
    pub endpoint: Endpoint,
    http: reqwest::Client,
    /// Silence allowed while waiting for the headers or between stream chunks.
    pub timeout: Duration,
    pub retries: u32,
    pub backoff: Duration,
    pub max_reply_tokens: u32,
}

fn excerpt(body: &str) -> String {
    let b: String = body.chars().take(300).collect();
    crate::session::scrub(b.trim())
}

impl LlmClient {
    pub fn new(
        endpoint: Endpoint,
        timeout: Duration,
        retries: u32,
        max_reply_tokens: u32,
    ) -> Result<LlmClient, HttpClientError> {
        let http = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(30)))
            .build()?;
        Ok(LlmClient {
            endpoint,
            http,
            timeout,
            retries,
            backoff: Duration::from_millis(500),
            max_reply_tokens,
        })
    }

    fn url(&self) -> String {
        let b = self.endpoint.base_url.trim_end_matches('/');
        match self.endpoint.kind {
            BackendKind::Anthropic => {
                if b.ends_with("/v1") {
                    format!("{b}/messages")
                } else {
                    format!("{b}/v1/messages")
                }
            }
            _ => format!("{b}/chat/completions"),
        }
    }

    fn body(&self, system: &str, messages: &[Message]) -> Value {
        // An empty assistant reply is sent back with a placeholder (both protocols refuse an
        // empty assistant message before the last one).
        let msgs: Vec<Value> = messages
            .iter()
            .map(|m| {
                let content = if m.role == "assistant" && m.content.trim().is_empty() {
                    wire::EMPTY_TURN
                } else {
                    m.content.as_str()
                };
                json!({"role": m.role, "content": content})
            })
            .collect();
        match self.endpoint.kind {
            BackendKind::Anthropic => json!({
                "model": self.endpoint.model,
                "max_tokens": self.max_reply_tokens,
                "system": system,
                "messages": msgs,
                "stream": true,
            }),
            _ => {
                let mut all = vec![json!({"role": "system", "content": system})];
                all.extend(msgs);
                json!({
                    "model": self.endpoint.model,
                    "messages": all,
                    "max_tokens": self.max_reply_tokens,
                    "stream": true,
                    "stream_options": {"include_usage": true},
                })
            }
        }
    }

    /// One completion, streamed, with retries.
    pub async fn complete(
        &self,
        system: &str,
        messages: &[Message],
        on_delta: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<Completion, LlmError> {
        self.complete_body(&self.body(system, messages), false, on_delta)
            .await
    }

    /// One turn of a conversation with tools, streamed, with retries: the text and the whole
    /// tool calls of the reply.
    pub async fn complete_tools(
        &self,
        system: &str,
        turns: &[Turn],
        tools: &[ToolDef],
        on_delta: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<Completion, LlmError> {
        let body = wire::body(
            self.endpoint.kind,
            &self.endpoint.model,
            self.max_reply_tokens,
            system,
            turns,
            tools,
        );
        self.complete_body(&body, true, on_delta).await
    }

    async fn complete_body(
        &self,
        body: &Value,
        tools: bool,
        on_delta: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<Completion, LlmError> {
        let mut last = String::new();
        for attempt in 0..=self.retries {
            if attempt > 0 {
                on_delta(Delta::Reset(&last));
            }
            match self.attempt(body, tools, on_delta).await {
                Ok(mut c) => {
                    c.attempts = attempt + 1;
                    return Ok(c);
                }
                Err(Attempt::Fatal(m)) => return Err(LlmError::Fatal(m)),
                Err(Attempt::ToolsRefused(m)) => return Err(LlmError::ToolsRefused(m)),
                Err(Attempt::Retry(m, after)) => {
                    last = m;
                    if attempt < self.retries {
                        let back = self.backoff * 2u32.saturating_pow(attempt).min(16);
                        let wait = after
                            .map(|a| a.min(Duration::from_secs(30)))
                            .unwrap_or(back);
                        tokio::time::sleep(wait.max(back / 4)).await;
                    }
                }
            }
        }
        Err(LlmError::Exhausted(last))
    }

    async fn attempt(
        &self,
        body: &Value,
        tools: bool,
        on_delta: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<Completion, Attempt> {
        let url = self.url();
        let mut req = self
            .http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .json(body);
        let key = self.endpoint.key.expose();
        req = match self.endpoint.kind {
            BackendKind::Anthropic => req
                .header("x-api-key", key)
                .header("anthropic-version", "2023-06-01"),
            _ if !key.is_empty() => req.bearer_auth(key),
            _ => req,
        };
        let resp = match tokio::time::timeout(self.timeout, req.send()).await {
            Err(_) => {
                return Err(Attempt::Retry(
                    format!(
                        "{url}: no answer within {:.1} s",
                        self.timeout.as_secs_f64()
                    ),
                    None,
                ));
            }
            Ok(Err(e)) => {
                let e = crate::session::scrub(&e.to_string());
                return Err(Attempt::Retry(format!("{url}: {e}"), None));
            }
            Ok(Ok(r)) => r,
        };
        let status = resp.status().as_u16();
        let request_id = ["x-request-id", "request-id", "openai-request-id"]
            .iter()
            .find_map(|h| resp.headers().get(*h)?.to_str().ok().map(|s| s.to_string()));
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.trim().parse::<f64>().ok())
            .map(|s| Duration::from_secs_f64(s.max(0.0)));
        if status != 200 {
            let body = tokio::time::timeout(self.timeout, resp.text())
                .await
                .ok()
                .and_then(|r| r.ok())
                .unwrap_or_default();
            let model = &self.endpoint.model;
            let lower = body.to_lowercase();
            return Err(match status {
                // vLLM without a tool parser, Ollama models without tools, … (a body that
                // only mentions tools is refused below, with its status and an excerpt).
                400 | 422 if tools && super::tool_refusal::says_no_tools(&body) => {
                    Attempt::ToolsRefused(format!("{url} ({status}): {}", excerpt(&body)))
                }
                429 => Attempt::Retry(format!("{url}: rate limited (429)"), retry_after),
                500..=599 => Attempt::Retry(
                    format!("{url}: server error ({status}): {}", excerpt(&body)),
                    retry_after,
                ),
                401 | 403 => Attempt::Fatal(format!(
                    "{url}: authentication failed ({status}): check the API key ({})",
                    match self.endpoint.kind {
                        BackendKind::Anthropic => "ANTHROPIC_API_KEY or anthropic_api_key",
                        _ => "OPENAI_API_KEY or api_key",
                    }
                )),
                404 if lower.contains("model") => Attempt::Fatal(format!(
                    "{url}: unknown model `{model}` (404): {}",
                    excerpt(&body)
                )),
                404 => Attempt::Fatal(format!(
                    "{url}: not found (404): check the base URL (it should end before /chat/completions, e.g. http://host:8000/v1) and the model `{model}`"
                )),
                400 if lower.contains("model")
                    && (lower.contains("not found")
                        || lower.contains("does not exist")
                        || lower.contains("unknown")
                        || lower.contains("invalid")) =>
                {
                    Attempt::Fatal(format!(
                        "{url}: unknown model `{model}` ({status}): {}",
                        excerpt(&body)
                    ))
                }
                _ => Attempt::Fatal(format!(
                    "{url}: request refused ({status}): {}",
                    excerpt(&body)
                )),
            });
        }
        self.read_stream(&url, resp, request_id, on_delta).await
    }

    /// Reads the reply's event stream into a completion. A stream that ends without its
    /// terminator still yields what it delivered, and fails when that holds no text and no
    /// tool call, or when it cut a tool call short.
    async fn read_stream(
        &self,
        url: &str,
        resp: reqwest::Response,
        request_id: Option<String>,
        on_delta: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<Completion, Attempt> {
        let mut c = Completion {
            request_id,
            ..Default::default()
        };
        let mut calls = CallStream::default();
        let mut events = std::pin::pin!(events(resp, self.timeout));
        let mut ended = false;
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| self.cut(url, e))?;
            if self.handle_event(&event.event, &event.data, &mut c, &mut calls, on_delta)? {
                ended = true;
                break;
            }
        }
        if ended {
            calls.finish();
        }
        // A tool call is carried out only whole: one the stream cut short voids the reply.
        c.tool_calls = calls.into_calls().map_err(|name| {
            Attempt::Retry(
                format!("{url}: the stream was cut in the middle of {name} (its arguments are incomplete)"),
                None,
            )
        })?;
        if ended {
            return Ok(c);
        }
        if c.text.is_empty() && c.tool_calls.is_empty() {
            return Err(Attempt::Retry(
                format!("{url}: the stream ended without a reply"),
                None,
            ));
        }
        Ok(c)
    }

    /// The retry for a stream that stopped before its end.
    fn cut(&self, url: &str, e: EventStreamError<Cut>) -> Attempt {
        let why = match e {
            EventStreamError::Transport(Cut::Stalled) => {
                return Attempt::Retry(
                    format!(
                        "{url}: the stream stalled for {:.1} s",
                        self.timeout.as_secs_f64()
                    ),
                    None,
                );
            }
            EventStreamError::Transport(Cut::Broken(e)) => e.to_string(),
            EventStreamError::Utf8(e) => e.to_string(),
            EventStreamError::Parser(e) => e.to_string(),
        };
        let why = crate::session::scrub(&why);
        Attempt::Retry(format!("{url}: stream broken: {why}"), None)
    }

    /// Handles one SSE event (its type, `message` when unnamed, and its data); true at the end
    /// of the reply.
    fn handle_event(
        &self,
        name: &str,
        data: &str,
        c: &mut Completion,
        calls: &mut CallStream,
        on_delta: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<bool, Attempt> {
        if data.is_empty() {
            return Ok(false);
        }
        if data.trim() == "[DONE]" {
            return Ok(true);
        }
        let v: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            // A malformed event: skip it (the reply parser judges the text).
            Err(_) => return Ok(false),
        };
        if let Some(err) = v.get("error") {
            let msg = err
                .get("message")
                .and_then(|m| m.as_str())
                .unwrap_or("error event")
                .to_string();
            let ty = err.get("type").and_then(|m| m.as_str()).unwrap_or("");
            let msg = crate::session::scrub(&msg);
            return Err(
                if ty.contains("overloaded")
                    || ty.contains("rate_limit")
                    || ty.contains("api_error")
                {
                    Attempt::Retry(format!("stream error: {msg}"), None)
                } else {
                    Attempt::Fatal(format!("stream error: {msg}"))
                },
            );
        }
        match self.endpoint.kind {
            BackendKind::Anthropic => {
                let ty = v.get("type").and_then(|t| t.as_str()).unwrap_or(name);
                match ty {
                    "message_start" => {
                        let m = &v["message"];
                        if let Some(id) = m["id"].as_str() {
                            c.request_id.get_or_insert_with(|| id.to_string());
                        }
                        c.tokens_in = m["usage"]["input_tokens"].as_u64().unwrap_or(0);
                        c.tokens_out = m["usage"]["output_tokens"].as_u64().unwrap_or(0);
                    }
                    "content_block_start" => calls.anthropic_start(&v),
                    "content_block_delta" => {
                        if let Some(t) = v["delta"]["text"].as_str() {
                            c.text.push_str(t);
                            on_delta(Delta::Text(t));
                        }
                        calls.anthropic_delta(&v);
                    }
                    "content_block_stop" => calls.anthropic_stop(&v),
                    "message_delta" => {
                        if let Some(o) = v["usage"]["output_tokens"].as_u64() {
                            c.tokens_out = o;
                        }
                    }
                    "message_stop" => return Ok(true),
                    _ => {}
                }
            }
            _ => {
                if c.request_id.is_none()
                    && let Some(id) = v["id"].as_str()
                {
                    c.request_id = Some(id.to_string());
                }
                if let Some(t) = v["choices"][0]["delta"]["content"].as_str() {
                    c.text.push_str(t);
                    on_delta(Delta::Text(t));
                }
                calls.openai_choice(&v["choices"][0]);
                if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
                    c.tokens_in = u["prompt_tokens"].as_u64().unwrap_or(c.tokens_in);
                    c.tokens_out = u["completion_tokens"].as_u64().unwrap_or(c.tokens_out);
                }
            }
        }
        Ok(false)
    }
}

/// Why a response body stopped before its end.
#[derive(Debug)]
enum Cut {
    /// No chunk within the idle timeout.
    Stalled,
    Broken(reqwest::Error),
}

/// The server-sent events of a response (parsed by `eventsource-stream`). Each body chunk is
/// awaited at most `idle`: a stall or a transport error ends the stream with a [`Cut`]. A blank
/// line closes the body so that a last event cut short by the end of the stream is delivered.
fn events(
    resp: reqwest::Response,
    idle: Duration,
) -> impl Stream<Item = Result<Event, EventStreamError<Cut>>> {
    let body = Some(Box::pin(resp.bytes_stream()));
    futures::stream::unfold(body, move |body| async move {
        let mut body = body?;
        let item = match tokio::time::timeout(idle, body.next()).await {
            Err(_) => Err(Cut::Stalled),
            Ok(None) => return Some((Ok(b"\n\n"[..].into()), None)),
            Ok(Some(Err(e))) => Err(Cut::Broken(e)),
            Ok(Some(Ok(chunk))) => return Some((Ok(chunk), Some(body))),
        };
        Some((item, None))
    })
    .eventsource()
}
