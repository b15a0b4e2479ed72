//! The agent's boundary against scripted models on loopback, in both protocols: a tool result
//! of megabytes reaches the model cut to its bound, with a notice; arguments and names of
//! megabytes are refused before they are parsed and counted; an empty reply is answered with a
//! valid request; a 400 that only mentions tools is a refusal of that request, not of tools.

use super::tool_sse::*;
use super::*;
use crate::agent::tools::bound;
use crate::agent::tools::wire::EMPTY_TURN;

fn propose(kind: BackendKind, s: f64) -> Resp {
    calls(
        kind,
        "",
        &[(
            "propose",
            args(serde_json::json!({"hypothesis": "h", "category": "fusion", "diff": diff_to(s)})),
        )],
        10,
        5,
    )
}

/// The results the model got for the previous turn's calls, in order.
fn results_in(body: &serde_json::Value, kind: BackendKind) -> Vec<String> {
    let m = body["messages"].as_array().unwrap();
    match kind {
        BackendKind::Anthropic => m.last().unwrap()["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["content"].as_str().unwrap().to_string())
            .collect(),
        _ => m
            .iter()
            .filter(|x| x["role"] == "tool")
            .map(|r| r["content"].as_str().unwrap().to_string())
            .collect(),
    }
}

/// Every message a valid request of its protocol may hold: OpenAI assistant messages have a
/// non-blank text or tool calls; Anthropic messages have content, and no blank text block.
fn assert_valid(body: &serde_json::Value, kind: BackendKind) {
    for m in body["messages"].as_array().unwrap() {
        match kind {
            BackendKind::Anthropic => match &m["content"] {
                serde_json::Value::String(s) => assert!(!s.trim().is_empty(), "{m}"),
                serde_json::Value::Array(blocks) => {
                    assert!(!blocks.is_empty(), "{m}");
                    for b in blocks.iter().filter(|b| b["type"] == "text") {
                        assert!(!b["text"].as_str().unwrap().trim().is_empty(), "{m}");
                    }
                }
                other => panic!("content {other}"),
            },
            _ if m["role"] == "assistant" => {
                let text = m["content"].as_str().is_some_and(|s| !s.trim().is_empty());
                let calls = m["tool_calls"].as_array().is_some_and(|c| !c.is_empty());
                assert!(text || calls, "an assistant message without content: {m}");
            }
            _ => {}
        }
    }
}

async fn huge_result(kind: BackendKind) {
    let huge = PLAIN.replace("// a", HUGE_ERROR);
    let script = vec![
        calls(
            kind,
            "",
            &[("compile", args(serde_json::json!({"source": huge})))],
            10,
            5,
        ),
        propose(kind, 0.7),
    ];
    let srv = serve(script).await;
    let sink = MemSink::default();
    let events = sink.events.clone();
    let mut d = tool_driver(
        &srv.url,
        kind,
        FakeMeasurer::default(),
        sink,
        ToolSettings::on(),
    );
    d.run().await;
    let reqs = srv.requests.lock().unwrap().clone();
    let results = results_in(&body(&reqs[1]), kind);
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert!(r.len() <= bound::MAX_RESULT, "{} bytes", r.len());
    // (OpenAI's error results start with `ERROR: `, within the bound.)
    assert!(
        r.trim_start_matches("ERROR: ")
            .starts_with("compile: error: the worker exited: é log line"),
        "{}",
        &r[..80]
    );
    assert!(
        r.contains("characters cut: the result exceeded 6,000 bytes"),
        "{}",
        &r[r.len() - 400..]
    );
    assert!(
        r.contains("[budget left: 11 of 12 tool calls"),
        "the budget line stays"
    );
    // The session keeps one bounded line.
    let tc = tool_calls(&events.lock().unwrap());
    assert!(
        !tc[0].1 && tc[0].2.chars().count() <= bound::MAX_SUMMARY + 1,
        "{}",
        tc[0].2
    );
    assert_eq!(d.state.incumbent_rev, 1, "the conversation went on");
}

#[tokio::test]
async fn openai_a_tool_result_of_5_mb_reaches_the_model_cut_to_its_bound() {
    huge_result(BackendKind::Openai).await;
}

#[tokio::test]
async fn anthropic_a_tool_result_of_5_mb_reaches_the_model_cut_to_its_bound() {
    huge_result(BackendKind::Anthropic).await;
}

async fn huge_arguments(kind: BackendKind) {
    // A complete kernel file (it has the launch plan) of 2 MB: it would compile.
    let big = format!(
        "{PLAIN}{}",
        "// padding line of a huge file\n".repeat(70_000)
    );
    let nested = format!(
        "{{\"shapes\": {}0{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let name = "x".repeat(1 << 20);
    let script = vec![
        calls(
            kind,
            "",
            &[
                ("compile", args(serde_json::json!({"source": big}))),
                ("run", nested),
                (name.as_str(), "{}".into()),
            ],
            10,
            5,
        ),
        propose(kind, 0.7),
    ];
    let srv = serve(script).await;
    let m = FakeMeasurer::default();
    let jobs = m.jobs.clone();
    let sink = MemSink::default();
    let (events, started) = (sink.events.clone(), sink.started.clone());
    let mut d = tool_driver(&srv.url, kind, m, sink, ToolSettings::on());
    d.run().await;
    let ev = events.lock().unwrap().clone();
    let tc = tool_calls(&ev);
    assert_eq!(tc.len(), 4, "three refused calls and the proposal");
    assert!(tc[..3].iter().all(|t| !t.1), "{tc:?}");
    assert!(
        tc[0].2.contains("bad arguments: the arguments are 2,"),
        "{}",
        tc[0].2
    );
    assert!(tc[1].2.contains("nest 100,001 levels deep"), "{}", tc[1].2);
    assert!(
        tc[2].2.starts_with("bad arguments: unknown tool `xxx"),
        "{}",
        tc[2].2
    );
    assert!(tc[2].0.len() <= bound::MAX_NAME, "the recorded name is cut");
    assert!(started.lock().unwrap().iter().all(|s| s.len() < 400));
    // Counted against the tool-call budget.
    let spent: Vec<u32> = ev
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolCall { spent, .. } => Some(spent.calls),
            _ => None,
        })
        .collect();
    assert_eq!(spent[..3], [1, 2, 3]);
    // Nothing of the refused calls reached the measurer.
    assert!(
        jobs.lock().unwrap().iter().all(|j| j.0.len() < 10_000),
        "the 2 MB source was not compiled"
    );
    // The model got short errors, and the next request does not carry the arguments again.
    let reqs = srv.requests.lock().unwrap().clone();
    let b = body(&reqs[1]);
    let results = results_in(&b, kind);
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|r| r.len() < 1000), "{results:?}");
    assert!(
        reqs[1].len() < 100_000,
        "request of {} bytes",
        reqs[1].len()
    );
    assert_valid(&b, kind);
    assert_eq!(d.state.incumbent_rev, 1, "the conversation went on");
}

#[tokio::test]
async fn openai_megabyte_arguments_and_names_are_refused_and_counted() {
    huge_arguments(BackendKind::Openai).await;
}

#[tokio::test]
async fn anthropic_megabyte_arguments_and_names_are_refused_and_counted() {
    huge_arguments(BackendKind::Anthropic).await;
}

async fn empty_turns(kind: BackendKind) {
    let script = vec![
        calls(kind, "", &[], 10, 5),
        calls(kind, " \n\t", &[], 10, 5),
        propose(kind, 0.7),
    ];
    let srv = serve(script).await;
    let mut d = tool_driver(
        &srv.url,
        kind,
        FakeMeasurer::default(),
        MemSink::default(),
        ToolSettings::on(),
    );
    d.run().await;
    let reqs = srv.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 3);
    for r in &reqs[1..] {
        let b = body(r);
        assert_valid(&b, kind);
        assert!(b.to_string().contains("Your reply was empty"), "{b}");
    }
    let b = body(&reqs[2]);
    let m = b["messages"].as_array().unwrap();
    let placeholder = match kind {
        BackendKind::Anthropic => &m[1]["content"][0]["text"],
        _ => &m[2]["content"],
    };
    assert_eq!(placeholder, EMPTY_TURN);
    assert_eq!(
        d.state.incumbent_rev, 1,
        "the model proposed after the nudges"
    );
}

#[tokio::test]
async fn openai_an_empty_reply_is_answered_with_a_valid_request() {
    empty_turns(BackendKind::Openai).await;
}

#[tokio::test]
async fn anthropic_an_empty_reply_is_answered_with_a_valid_request() {
    empty_turns(BackendKind::Anthropic).await;
}

#[tokio::test]
async fn an_endpoint_that_keeps_replying_empty_ends_the_iteration_saying_so() {
    let empty = || calls(BackendKind::Openai, "", &[], 10, 5);
    let srv = serve(vec![empty(), empty(), empty(), empty()]).await;
    let mut d = tool_driver(
        &srv.url,
        BackendKind::Openai,
        FakeMeasurer::default(),
        MemSink::default(),
        ToolSettings::on(),
    );
    assert_eq!(d.run().await, StopReason::MaxIterations(1));
    assert_eq!(srv.requests.lock().unwrap().len(), 3, "two nudges");
    let last = d.state.history.last().unwrap();
    assert_eq!(
        last.result,
        "no revision: the model's last reply was empty (no text and no tool call; 3 empty replies in this iteration)"
    );
    assert_eq!(
        (last.tokens_in, last.tokens_out),
        (30, 15),
        "their tokens count"
    );
}

#[tokio::test]
async fn an_empty_single_reply_is_sent_back_with_a_placeholder() {
    let srv = serve(vec![
        anthropic_sse("", 10, 0),
        anthropic_sse(&good_reply(), 10, 5),
    ])
    .await;
    let p = LlmProposer {
        client: client(BackendKind::Anthropic, &srv.url, 2000),
    };
    let budget = Budget {
        max_iters: 1,
        ..Default::default()
    };
    let mut d = driver(
        p,
        FakeMeasurer::default(),
        MemSink::default(),
        FIXTURE,
        budget,
        DecisionMode::Auto,
    );
    d.run().await;
    let reqs = srv.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 2);
    let b = body(&reqs[1]);
    assert_valid(&b, BackendKind::Anthropic);
    assert_eq!(b["messages"][1]["content"], EMPTY_TURN);
}

#[tokio::test]
async fn a_400_that_only_mentions_tools_is_not_a_refusal_of_tools() {
    let refusal = "{\"error\":{\"message\":\"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'.\",\"type\":\"invalid_request_error\"}}";
    let srv = serve(vec![
        Resp::Status(400, refusal.into()),
        openai_sse(&good_reply(), 10, 5),
    ])
    .await;
    let mut d = tool_driver(
        &srv.url,
        BackendKind::Openai,
        FakeMeasurer::default(),
        MemSink::default(),
        ToolSettings::on(),
    );
    let stop = d.run().await;
    let StopReason::Backend(msg) = &stop else {
        panic!("{stop:?}")
    };
    assert!(!msg.contains("tools refused"), "{msg}");
    assert!(
        msg.contains("request refused (400): ")
            && msg.contains("must be followed by tool messages"),
        "{msg}"
    );
    assert!(d.budget.tools.enabled, "tools stay on");
    assert_eq!(
        srv.requests.lock().unwrap().len(),
        1,
        "no retry, no fallback"
    );
}
