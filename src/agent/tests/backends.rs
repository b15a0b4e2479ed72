//! LLM backends driving the loop: retries, corrective replies, timeouts, unparseable replies,
//! auth and not-found errors, patches that do not apply, and keys kept out of sessions.

use super::*;

#[tokio::test]
async fn openai_backend_retries_429_corrects_a_malformed_reply_and_records_tokens() {
    let srv = serve(vec![
        Resp::Status(429, "{\"error\":{\"message\":\"slow down\"}}".into()),
        Resp::Status(503, "overloaded".into()),
        openai_sse("I think we should vectorize. No format here.", 100, 10),
        openai_sse(&good_reply(), 200, 50),
    ])
    .await;
    let sink = MemSink::default();
    let events = sink.events.clone();
    let streamed = sink.streamed.clone();
    let p = LlmProposer {
        client: client(BackendKind::Openai, &srv.url, 2000),
    };
    let budget = Budget {
        max_iters: 1,
        ..Default::default()
    };
    let mut d = driver(
        p,
        FakeMeasurer::default(),
        sink,
        PLAIN,
        budget,
        DecisionMode::Auto,
    );
    let stop = d.run().await;
    assert_eq!(stop, StopReason::MaxIterations(1));
    let reqs = srv.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 4);
    assert!(reqs[0].starts_with("POST /chat/completions"), "{}", reqs[0]);
    assert!(
        reqs[0].contains(&format!("authorization: Bearer {KEY}"))
            || reqs[0].contains(&format!("Authorization: Bearer {KEY}"))
    );
    assert!(reqs[0].contains("\"stream\":true"));
    // The corrective message went with the second completion.
    assert!(reqs[3].contains("could not be used") && reqs[3].contains("assistant"));
    let ev = events.lock().unwrap().clone();
    let rev = ev
        .iter()
        .find_map(|e| match e {
            SessionEvent::Revision {
                rev,
                author,
                tokens_in,
                tokens_out,
                request_id,
                category,
                source,
                knowledge,
                ..
            } => Some((
                *rev,
                author.clone(),
                *tokens_in,
                *tokens_out,
                request_id.clone(),
                category.clone(),
                source.clone(),
                knowledge.clone(),
            )),
            _ => None,
        })
        .expect("a revision");
    assert_eq!(rev.1, Author::Model("kernel-model".into()));
    assert_eq!(
        (rev.2, rev.3),
        (Some(300), Some(60)),
        "tokens of both completions"
    );
    assert_eq!(rev.4.as_deref(), Some("req-42"));
    assert_eq!(rev.5.as_deref(), Some("instruction-level"));
    assert!(rev.6.contains("// S=0.8") && rev.6.contains("// S=0.5"));
    assert!(!rev.7.is_empty(), "the knowledge given is recorded");
    assert_eq!(d.state.tokens(), 360);
    // The candidate (S 0.8) beat the incumbent (0.5) in the A B B A: accepted.
    assert_eq!(d.state.incumbent_rev, rev.0);
    assert!(streamed.lock().unwrap().contains("Hypothesis"));
}

#[tokio::test]
async fn anthropic_backend_survives_a_timeout_and_streams() {
    let full = format!(
        "Hypothesis: rewrite\nCategory: algorithm\n```cuda\n{}```\n",
        PLAIN.replace("// S=0.5", "// S=0.7")
    );
    let srv = serve(vec![
        Resp::Stall(Duration::from_millis(800)),
        anthropic_sse(&full, 1234, 99),
    ])
    .await;
    let sink = MemSink::default();
    let events = sink.events.clone();
    let p = LlmProposer {
        client: client(BackendKind::Anthropic, &srv.url, 300),
    };
    let budget = Budget {
        max_iters: 1,
        ..Default::default()
    };
    let mut d = driver(
        p,
        FakeMeasurer::default(),
        sink,
        PLAIN,
        budget,
        DecisionMode::Auto,
    );
    d.run().await;
    let reqs = srv.requests.lock().unwrap().clone();
    assert!(reqs.len() >= 2);
    assert!(reqs[1].starts_with("POST /v1/messages"), "{}", reqs[1]);
    assert!(
        reqs[1]
            .to_lowercase()
            .contains(&format!("x-api-key: {}", KEY.to_lowercase()))
    );
    assert!(reqs[1].contains("anthropic-version"));
    let ev = events.lock().unwrap().clone();
    let (tin, tout, rid) = ev
        .iter()
        .find_map(|e| match e {
            SessionEvent::Revision {
                tokens_in,
                tokens_out,
                request_id,
                ..
            } => Some((*tokens_in, *tokens_out, request_id.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!((tin, tout), (Some(1234), Some(99)));
    assert_eq!(rid.as_deref(), Some("req-42"));
    // Accepted automatically: S 0.7 > 0.5 beyond the noise.
    assert_eq!(d.state.incumbent_rev, 1);
    assert!((d.state.incumbent_s.unwrap() - 0.7).abs() < 1e-9);
}

#[tokio::test]
async fn two_unparseable_replies_make_a_failed_revision() {
    let srv = serve(vec![
        openai_sse("Category: fusion\n```cuda\nno plan\n```", 10, 5),
        openai_sse("still nothing useful", 10, 5),
    ])
    .await;
    let sink = MemSink::default();
    let events = sink.events.clone();
    let p = LlmProposer {
        client: client(BackendKind::Openai, &srv.url, 2000),
    };
    let budget = Budget {
        max_iters: 1,
        ..Default::default()
    };
    let mut d = driver(
        p,
        FakeMeasurer::default(),
        sink,
        PLAIN,
        budget,
        DecisionMode::Auto,
    );
    d.run().await;
    let last = d.state.history.last().unwrap();
    assert_eq!(last.rev, None);
    assert!(
        last.result.starts_with("unparseable reply"),
        "{}",
        last.result
    );
    assert_eq!((last.tokens_in, last.tokens_out), (20, 10));
    let ev = events.lock().unwrap().clone();
    assert!(
        !ev.iter()
            .any(|e| matches!(e, SessionEvent::Revision { rev, .. } if *rev > 0))
    );
    assert!(
        ev.iter()
            .any(|e| matches!(e, SessionEvent::AgentState { state, .. } if state == "failed"))
    );
}

#[tokio::test]
async fn auth_and_not_found_errors_stop_the_loop_with_clear_messages() {
    for (code, body, want) in [
        (
            401,
            "{\"error\":{\"message\":\"bad key sk-test-NEVERLOGME0123456789abcdef\"}}",
            "authentication failed (401)",
        ),
        (
            404,
            "{\"error\":{\"message\":\"The model `kernel-model` does not exist\"}}",
            "unknown model `kernel-model`",
        ),
        (404, "not here", "not found (404): check the base URL"),
        (
            400,
            "{\"error\":{\"message\":\"model not found: kernel-model\"}}",
            "unknown model",
        ),
    ] {
        let srv = serve(vec![Resp::Status(code, body.into())]).await;
        let sink = MemSink::default();
        let p = LlmProposer {
            client: client(BackendKind::Openai, &srv.url, 2000),
        };
        let mut d = driver(
            p,
            FakeMeasurer::default(),
            sink,
            PLAIN,
            Budget::default(),
            DecisionMode::Auto,
        );
        let stop = d.run().await;
        let StopReason::Backend(msg) = &stop else {
            panic!("{stop:?}")
        };
        assert!(msg.contains(want), "{code}: {msg}");
        assert!(!msg.contains(KEY), "the key never shows: {msg}");
        assert_eq!(srv.requests.lock().unwrap().len(), 1, "no retry on {code}");
    }
}

#[tokio::test]
async fn keys_never_reach_session_files() {
    let dir = std::env::temp_dir().join(format!("atrex-agent-keys-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("s.jsonl");
    let writer = crate::session::SessionWriter::create(&path).unwrap();
    // The server echoes the key in a reply (a hostile or confused endpoint).
    let reply = format!(
        "Hypothesis: h\nCategory: fusion\n```diff\n@@ -12,1 +12,3 @@\n extern \"C\" __global__ void k() {{}}\n+// S=0.8\n+// header was Bearer {KEY} and {KEY}\n```\n"
    );
    let srv = serve(vec![openai_sse(&reply, 1, 1)]).await;
    let p = LlmProposer {
        client: client(BackendKind::Openai, &srv.url, 2000),
    };
    let s = suite();
    let mut d = Driver {
        state: AgentState::new("rms_norm", 0, PLAIN.to_string(), None),
        budget: Budget {
            max_iters: 1,
            ..Default::default()
        },
        proposer: p,
        measurer: FakeMeasurer::default(),
        gate: super::setup::NoGate,
        sink: FileSink::new(crate::session::fixtures::test_log(writer, &[]), false),
        problem: s.problem("rms_norm").unwrap().clone(),
        hw: s.hardware("H200").unwrap().clone(),
        docs: knowledge::docs(),
        incumbent_measure: None,
        mode: DecisionMode::Auto,
        seed: 1,
        k_docs: 4,
        best_seen: None,
    };
    d.state.steering.push(format!("use api_key = {KEY} please"));
    d.run().await;
    let src = &d.state.incumbent_source;
    assert!(
        !src.contains("NEVERLOGME"),
        "the accepted source holds no key"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"kind\":\"revision\""), "{text}");
    assert!(
        !text.contains("NEVERLOGME"),
        "a key leaked into the session"
    );
    assert!(format!("{:?}", d.proposer.client.endpoint).contains("[REDACTED]"));
    assert!(!format!("{:?}", d.proposer.client.endpoint).contains("NEVERLOGME"));
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_patch_that_does_not_apply_is_a_failed_revision() {
    let bad = "Hypothesis: h\nCategory: fusion\n```diff\n@@ -3,1 +3,1 @@\n-this line is not there\n+x\n```\n";
    let srv = serve(vec![openai_sse(bad, 1, 1)]).await;
    let p = LlmProposer {
        client: client(BackendKind::Openai, &srv.url, 2000),
    };
    let budget = Budget {
        max_iters: 1,
        ..Default::default()
    };
    let mut d = driver(
        p,
        FakeMeasurer::default(),
        MemSink::default(),
        PLAIN,
        budget,
        DecisionMode::Auto,
    );
    d.run().await;
    let last = d.state.history.last().unwrap();
    assert!(
        last.result.contains("patch does not apply: hunk 1"),
        "{}",
        last.result
    );
    assert_eq!(last.rev, None);
}
