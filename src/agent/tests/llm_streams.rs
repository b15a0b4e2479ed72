//! The streaming client alone: SSE parsing across chunks, cut streams, idle timeouts, error
//! events and bounded retries.

use super::*;

#[tokio::test]
async fn retries_are_bounded() {
    let srv = serve(vec![Resp::Status(500, "a".into()); 10]).await;
    let c = client(BackendKind::Openai, &srv.url, 2000);
    let mut sink = |_d: Delta<'_>| {};
    let e = c.complete("s", &[], &mut sink).await.unwrap_err();
    assert!(
        matches!(e, super::llm::LlmError::Exhausted(ref m) if m.contains("500")),
        "{e:?}"
    );
    assert_eq!(srv.requests.lock().unwrap().len(), 4, "1 + 3 retries");
}

/// One OpenAI-style chunk carrying `text`.
fn openai_chunk(text: &str) -> String {
    format!(
        "data: {}",
        serde_json::json!({"id": "chatcmpl-7", "choices": [{"index": 0, "delta": {"content": text}}]})
    )
}

/// A completion against `script`, with the texts streamed (a reset shows as `<reset: why>`).
async fn complete(
    kind: BackendKind,
    script: Vec<Resp>,
    timeout_ms: u64,
) -> (Result<super::llm::Completion, super::llm::LlmError>, String) {
    let srv = serve(script).await;
    let c = client(kind, &srv.url, timeout_ms);
    let mut seen = String::new();
    let mut sink = |d: Delta<'_>| match d {
        Delta::Text(t) => seen.push_str(t),
        Delta::Reset(why) => seen.push_str(&format!("<reset: {why}>")),
    };
    let r = c.complete("s", &[], &mut sink).await;
    (r, seen)
}

#[tokio::test]
async fn sse_events_split_across_chunks_with_crlf_comments_and_multibyte_text() {
    let usage =
        serde_json::json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}});
    let body = format!(
        ": keep-alive\r\n\r\n{}\r\n\r\n{}\r\n\r\ndata: {usage}\r\n\r\ndata: [DONE]\r\n\r\n",
        openai_chunk("héllo "),
        openai_chunk("wörld")
    );
    // Cut every 5 bytes: through lines, through "\r\n" and through two-byte characters.
    let chunks: Vec<Vec<u8>> = body.as_bytes().chunks(5).map(|c| c.to_vec()).collect();
    let script = vec![Resp::Chunks(chunks, Duration::from_millis(1))];
    let (r, seen) = complete(BackendKind::Openai, script, 2000).await;
    let c = r.unwrap();
    assert_eq!(
        (c.text.as_str(), seen.as_str()),
        ("héllo wörld", "héllo wörld")
    );
    assert_eq!((c.tokens_in, c.tokens_out, c.attempts), (7, 3, 1));
    assert_eq!(c.request_id.as_deref(), Some("chatcmpl-7"));
}

#[tokio::test]
async fn a_cut_stream_keeps_what_it_delivered_and_retries_when_nothing_came() {
    // No [DONE] and no blank line after the last event: its text still counts.
    let cut = format!(
        "{}\n\n{}",
        openai_chunk("part one, "),
        openai_chunk("part two")
    );
    let script = vec![Resp::Chunks(vec![cut.into_bytes()], Duration::ZERO)];
    let (r, _) = complete(BackendKind::Openai, script, 2000).await;
    let c = r.unwrap();
    assert_eq!((c.text.as_str(), c.attempts), ("part one, part two", 1));

    let empty = vec![Resp::Chunks(
        vec![b": nothing\n\n".to_vec()],
        Duration::ZERO,
    )];
    let script = [empty, vec![openai_sse("second try", 1, 1)]].concat();
    let (r, seen) = complete(BackendKind::Openai, script, 2000).await;
    assert_eq!(r.unwrap().attempts, 2);
    assert!(seen.contains("the stream ended without a reply"), "{seen}");
}

#[tokio::test]
async fn the_idle_timeout_is_between_chunks_not_between_events() {
    // Keep-alive comments every 100 ms for 600 ms, with a 300 ms timeout: no stall.
    let mut chunks = vec![b": keep-alive\n\n".to_vec(); 6];
    chunks.push(format!("{}\n\ndata: [DONE]\n\n", openai_chunk("slow but alive")).into_bytes());
    let script = vec![Resp::Chunks(chunks, Duration::from_millis(100))];
    let (r, _) = complete(BackendKind::Openai, script, 300).await;
    assert_eq!(r.unwrap().attempts, 1);

    // A first chunk, then silence past the timeout: retried with a clear message.
    let first = format!("{}\n\n", openai_chunk("lost "));
    let stalled = Resp::Chunks(
        vec![first.into_bytes(), b"data: [DONE]\n\n".to_vec()],
        Duration::from_millis(400),
    );
    let (r, seen) = complete(
        BackendKind::Openai,
        vec![stalled, openai_sse("kept", 1, 1)],
        300,
    )
    .await;
    let c = r.unwrap();
    assert_eq!((c.text.as_str(), c.attempts), ("kept", 2));
    assert!(seen.contains("the stream stalled for 0.3 s"), "{seen}");
}

#[tokio::test]
async fn anthropic_error_events_retry_when_transient_and_stop_otherwise() {
    let error = |ty: &str| {
        let e =
            serde_json::json!({"type": "error", "error": {"type": ty, "message": "it went wrong"}});
        Resp::Sse(vec![format!("event: error\ndata: {e}")])
    };
    let script = vec![error("overloaded_error"), anthropic_sse("fine now", 5, 2)];
    let (r, seen) = complete(BackendKind::Anthropic, script, 2000).await;
    let c = r.unwrap();
    assert_eq!(
        (c.text.as_str(), c.tokens_in, c.tokens_out),
        ("fine now", 5, 2)
    );
    assert_eq!(c.request_id.as_deref(), Some("req-42"));
    assert!(
        seen.contains("<reset: stream error: it went wrong>"),
        "{seen}"
    );

    let (r, _) = complete(
        BackendKind::Anthropic,
        vec![error("invalid_request_error")],
        2000,
    )
    .await;
    assert_eq!(
        r.unwrap_err(),
        super::llm::LlmError::Fatal("stream error: it went wrong".into())
    );
}
