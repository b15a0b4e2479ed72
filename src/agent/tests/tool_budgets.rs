//! Iterations with tools at their limits: the token and GPU budgets, a stream cut in the
//! middle of a tool call (retried, never half carried out), and a server without tool calling
//! (one reply per iteration from then on).

use super::tool_sse::*;
use super::*;

fn lookup(kind: BackendKind, tin: u64, tout: u64) -> Resp {
    calls(
        kind,
        "",
        &[("lookup", args(serde_json::json!({"query": "vectorized"})))],
        tin,
        tout,
    )
}

fn run_call() -> Call<'static> {
    (
        "run",
        args(serde_json::json!({"diff": diff_to(0.7), "shapes": [1]})),
    )
}

fn propose_call(s: f64) -> Call<'static> {
    (
        "propose",
        args(serde_json::json!({"hypothesis": "h", "category": "caching", "diff": diff_to(s)})),
    )
}

#[tokio::test]
async fn the_token_budget_ends_the_iteration_but_a_propose_in_the_last_reply_counts() {
    for kind in [BackendKind::Openai, BackendKind::Anthropic] {
        // 500 + 600 tokens against 1000: the run in the second reply is refused, and the
        // iteration ends without a revision.
        let srv = serve(vec![
            lookup(kind, 400, 100),
            calls(kind, "", &[run_call()], 500, 100),
        ])
        .await;
        let m = FakeMeasurer::default();
        let jobs = m.jobs.clone();
        let sink = MemSink::default();
        let events = sink.events.clone();
        let limits = ToolSettings {
            max_tokens: 1000,
            ..ToolSettings::on()
        };
        let mut d = tool_driver(&srv.url, kind, m, sink, limits);
        d.run().await;
        assert_eq!(srv.requests.lock().unwrap().len(), 2, "{kind:?}");
        let tc = tool_calls(&events.lock().unwrap());
        assert_eq!(tc.len(), 2);
        assert!(!tc[1].1 && tc[1].2.contains("token budget of the iteration (1000)"));
        assert_eq!(
            jobs.lock().unwrap().len(),
            1,
            "only the incumbent was measured"
        );
        let last = d.state.history.last().unwrap();
        assert_eq!(
            last.result,
            "no revision: the token budget of the iteration (1000) is spent before propose"
        );
        assert_eq!(d.state.tokens(), 1100, "the tokens count for the run");

        // A propose in the reply that spends the budget is still carried out.
        let srv = serve(vec![calls(
            kind,
            "",
            &[run_call(), propose_call(0.7)],
            900,
            200,
        )])
        .await;
        let sink = MemSink::default();
        let events = sink.events.clone();
        let mut d = tool_driver(&srv.url, kind, FakeMeasurer::default(), sink, limits);
        d.run().await;
        let tc = tool_calls(&events.lock().unwrap());
        let got: Vec<(&str, bool)> = tc.iter().map(|t| (t.0.as_str(), t.1)).collect();
        assert_eq!(got, [("run", false), ("propose", true)], "{kind:?}");
        assert_eq!(d.state.incumbent_rev, 1, "{kind:?}");
    }
}

#[tokio::test]
async fn the_gpu_budget_refuses_gpu_tools_but_not_lookups() {
    let kind = BackendKind::Openai;
    let srv = serve(vec![
        calls(kind, "", &[("compile", "{}".into())], 10, 5),
        calls(
            kind,
            "",
            &[
                run_call(),
                ("lookup", args(serde_json::json!({"query": "tma"}))),
            ],
            10,
            5,
        ),
        calls(kind, "", &[propose_call(0.7)], 10, 5),
    ])
    .await;
    let m = FakeMeasurer {
        delay: Duration::from_millis(20),
        ..Default::default()
    };
    let sink = MemSink::default();
    let events = sink.events.clone();
    let limits = ToolSettings {
        max_gpu_s: 0.001,
        ..ToolSettings::on()
    };
    let mut d = tool_driver(&srv.url, kind, m, sink, limits);
    d.run().await;
    let ev = events.lock().unwrap().clone();
    let tc = tool_calls(&ev);
    let got: Vec<(&str, bool)> = tc.iter().map(|t| (t.0.as_str(), t.1)).collect();
    assert_eq!(
        got,
        [
            ("compile", true),
            ("run", false),
            ("lookup", true),
            ("propose", true)
        ]
    );
    assert!(
        tc[1]
            .2
            .contains("GPU budget (0 s) is spent; lookup, read and propose still work")
    );
    let gpu: Vec<f64> = ev
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolCall { gpu_s, .. } => Some(*gpu_s),
            _ => None,
        })
        .collect();
    assert!(gpu[0] >= 0.02, "the compile's GPU time: {gpu:?}");
    assert_eq!(&gpu[1..], [0.0, 0.0, 0.0]);
    let third = body(&srv.requests.lock().unwrap()[2]).to_string();
    assert!(third.contains("of 0 GPU s"), "{third}");
    assert_eq!(d.state.incumbent_rev, 1);
}

/// A reply cut half-way through a tool call's arguments is retried as a whole: the call is
/// never carried out from the cut reply, nothing of it is recorded; with no retry left the
/// loop stops with a clear error.
async fn cut_mid_tool_call(kind: BackendKind) {
    let compile = ("compile", args(serde_json::json!({"diff": diff_to(0.7)})));
    let srv = serve(vec![
        cut_calls(
            kind,
            "Compiling, then running.",
            &[compile.clone(), run_call()],
        ),
        calls(kind, "", &[compile.clone(), run_call()], 10, 5),
        calls(kind, "", &[propose_call(0.7)], 10, 5),
    ])
    .await;
    let m = FakeMeasurer::default();
    let jobs = m.jobs.clone();
    let sink = MemSink::default();
    let events = sink.events.clone();
    let mut d = tool_driver(&srv.url, kind, m, sink, ToolSettings::on());
    d.run().await;
    assert_eq!(srv.requests.lock().unwrap().len(), 3, "{kind:?}");
    let tc = tool_calls(&events.lock().unwrap());
    let names: Vec<&str> = tc.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(names, ["compile", "run", "propose"], "{kind:?}");
    let compiles = jobs
        .lock()
        .unwrap()
        .iter()
        .filter(|j| j.1 == JobKind::Compile)
        .count();
    assert_eq!(
        compiles, 1,
        "the cut reply's complete call was not carried out"
    );
    assert_eq!(d.state.incumbent_rev, 1);

    // Without retries: the loop stops, saying where the stream was cut; nothing half done.
    let srv = serve(vec![cut_calls(kind, "", &[run_call()])]).await;
    let sink = MemSink::default();
    let events = sink.events.clone();
    let mut d = tool_driver(
        &srv.url,
        kind,
        FakeMeasurer::default(),
        sink,
        ToolSettings::on(),
    );
    d.proposer.client.retries = 0;
    let stop = d.run().await;
    let StopReason::Backend(msg) = &stop else {
        panic!("{stop:?}")
    };
    assert!(
        msg.contains(
            "the stream was cut in the middle of tool call `run` (its arguments are incomplete)"
        ),
        "{msg}"
    );
    let ev = events.lock().unwrap().clone();
    assert!(tool_calls(&ev).is_empty());
    assert!(
        !ev.iter()
            .any(|e| matches!(e, SessionEvent::Revision { rev, .. } if *rev > 0))
    );
}

#[tokio::test]
async fn openai_a_stream_cut_mid_tool_call_is_retried_and_never_half_carried_out() {
    cut_mid_tool_call(BackendKind::Openai).await;
}

#[tokio::test]
async fn anthropic_a_stream_cut_mid_tool_call_is_retried_and_never_half_carried_out() {
    cut_mid_tool_call(BackendKind::Anthropic).await;
}

#[tokio::test]
async fn a_server_without_tool_calling_falls_back_to_one_reply() {
    let refusal = "{\"error\":{\"message\":\"\\\"auto\\\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set\"}}";
    let srv = serve(vec![
        Resp::Status(400, refusal.into()),
        openai_sse(&good_reply(), 10, 5),
    ])
    .await;
    let sink = MemSink::default();
    let events = sink.events.clone();
    let mut d = tool_driver(
        &srv.url,
        BackendKind::Openai,
        FakeMeasurer::default(),
        sink,
        ToolSettings::on(),
    );
    d.state.incumbent_source = FIXTURE.to_string();
    assert_eq!(d.run().await, StopReason::MaxIterations(1));
    let reqs = srv.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 2, "no retry of the refused request");
    assert!(body(&reqs[0]).get("tools").is_some());
    assert!(body(&reqs[1]).get("tools").is_none());
    assert!(!d.budget.tools.enabled);
    let ev = events.lock().unwrap().clone();
    assert!(ev.iter().any(|e| matches!(e,
        SessionEvent::AgentState { reason: Some(r), .. } if r.contains("no tool calling here"))));
    assert!(
        ev.iter()
            .any(|e| matches!(e, SessionEvent::Revision { rev: 1, .. }))
    );
}
