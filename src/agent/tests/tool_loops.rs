//! Iterations with tools against scripted models on loopback, in both protocols: several
//! steps ending in `propose`, steering notes reaching the model at the next tool result, bad
//! arguments and a failing tool answered and survived, a model that never proposes.

use super::tool_sse::*;
use super::*;

/// A gate whose steering note arrives at the n-th call of `steering()` (the first is the
/// loop's own, before the iteration).
struct NoteGate {
    calls: usize,
    at: usize,
    note: String,
}

impl Gate for NoteGate {
    async fn decide(&mut self, _rev: u32) -> GateAnswer {
        GateAnswer::Stop
    }
    fn steering(&mut self) -> Vec<String> {
        self.calls += 1;
        if self.calls == self.at {
            vec![self.note.clone()]
        } else {
            vec![]
        }
    }
}

fn with_gate<P: Proposer, G: Gate>(
    d: Driver<P, FakeMeasurer, super::setup::NoGate, MemSink>,
    gate: G,
) -> Driver<P, FakeMeasurer, G, MemSink> {
    Driver {
        state: d.state,
        budget: d.budget,
        proposer: d.proposer,
        measurer: d.measurer,
        gate,
        sink: d.sink,
        problem: d.problem,
        hw: d.hw,
        docs: d.docs,
        incumbent_measure: d.incumbent_measure,
        mode: d.mode,
        seed: d.seed,
        k_docs: d.k_docs,
        best_seen: d.best_seen,
    }
}

/// compile + lookup, then run + profile, then read, then propose: every call carried out in
/// order, its result sent back in the protocol's form, recorded, and the revision measured.
async fn multi_step(kind: BackendKind) {
    let d = diff_to(0.8);
    let script = multi_step_script(kind, &d);
    let srv = serve(script).await;
    let m = FakeMeasurer::default();
    let jobs = m.jobs.clone();
    let sink = MemSink::default();
    let (events, started) = (sink.events.clone(), sink.started.clone());
    let d0 = tool_driver(&srv.url, kind, m, sink, ToolSettings::on());
    // The engineer's note arrives while the first results are out (the 3rd steering call:
    // the loop's, then one per turn).
    let mut drv = with_gate(
        d0,
        NoteGate {
            calls: 0,
            at: 3,
            note: "keep the launch plan".into(),
        },
    );
    let stop = drv.run().await;
    assert_eq!(stop, StopReason::MaxIterations(1), "{kind:?}");
    let ev = events.lock().unwrap().clone();
    let tc = tool_calls(&ev);
    let names: Vec<&str> = tc.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(
        names,
        ["compile", "lookup", "run", "profile", "read", "propose"],
        "{kind:?}"
    );
    assert!(tc.iter().all(|t| t.1), "{tc:?}");
    assert!(tc[0].2.starts_with("ok · k 32 regs"), "{}", tc[0].2);
    assert!(tc[1].2.contains("warp-per-row"), "{}", tc[1].2);
    assert_eq!(tc[2].2, "pass · S_op 0.8000 on 2 shapes");
    assert!(tc[3].2.contains("findings: "), "{}", tc[3].2);
    assert!(
        tc[4].2.starts_with("warp-per-row (technique"),
        "{}",
        tc[4].2
    );
    assert_eq!(tc[5].2, "[instruction-level] the marker raises S");
    // Shown as they started, with their arguments in one line.
    assert_eq!(
        started.lock().unwrap()[2],
        "run(diff +1 −1, shapes 0 2, quick)"
    );
    // Calls numbered in the iteration, budgets spent recorded with each.
    let spent: Vec<(u32, u32, u32, u64)> = ev
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolCall {
                iteration,
                call,
                spent,
                ..
            } => Some((*iteration, *call, spent.calls, spent.tokens)),
            _ => None,
        })
        .collect();
    assert_eq!(spent[0], (1, 1, 1, 1050));
    assert_eq!(spent[5], (1, 6, 5, 10260), "propose is not counted");
    // The proposal became a revision with the iteration's tokens, after its tool call.
    let pos = |f: &dyn Fn(&SessionEvent) -> bool| ev.iter().position(f).unwrap();
    let rev_at = pos(&|e| matches!(e, SessionEvent::Revision { rev: 1, .. }));
    let propose_at =
        pos(&|e| matches!(e, SessionEvent::ToolCall { name, .. } if name == "propose"));
    assert!(propose_at < rev_at);
    let SessionEvent::Revision {
        tokens_in,
        tokens_out,
        source,
        category,
        ..
    } = &ev[rev_at]
    else {
        unreachable!()
    };
    assert_eq!((*tokens_in, *tokens_out), (Some(10_000), Some(260)));
    assert_eq!(category.as_deref(), Some("instruction-level"));
    assert!(source.contains("// S=0.8"));
    assert_eq!(drv.state.incumbent_rev, 1, "accepted: 0.8 beats 0.5");
    // The tools ran on the measurer: compile, run (2 shapes), profile, after the incumbent.
    let j = jobs.lock().unwrap().clone();
    assert_eq!(j[1].1, JobKind::Compile);
    assert_eq!((j[2].1, j[2].2), (JobKind::All, Mode::Quick));
    assert!(j[1].0.contains("// S=0.8") && j[2].0.contains("// S=0.8"));
    check_multi_step_requests(kind, &d, &srv.requests.lock().unwrap());
    // The note stays with the agent for the next contexts.
    assert_eq!(drv.state.steering, vec!["keep the launch plan".to_string()]);
}

/// The model's side of `multi_step`: four turns of tool calls, the last one `propose`.
fn multi_step_script(kind: BackendKind, d: &str) -> Vec<Resp> {
    vec![
        calls(
            kind,
            "Let me compile the change first.",
            &[
                ("compile", args(serde_json::json!({"diff": d}))),
                (
                    "lookup",
                    args(serde_json::json!({"query": "warp per row reduction"})),
                ),
            ],
            1000,
            50,
        ),
        calls(
            kind,
            "",
            &[
                (
                    "run",
                    args(serde_json::json!({"diff": d, "shapes": [0, 2], "mode": "quick"})),
                ),
                ("profile", args(serde_json::json!({"diff": d, "shape": 2}))),
            ],
            2000,
            60,
        ),
        calls(
            kind,
            "",
            &[("read", args(serde_json::json!({"id": "warp-per-row"})))],
            3000,
            70,
        ),
        calls(
            kind,
            "It passes and is faster.",
            &[(
                "propose",
                args(serde_json::json!({
                    "hypothesis": "the marker raises S", "category": "instruction-level", "diff": d
                })),
            )],
            4000,
            80,
        ),
    ]
}

/// The requests of `multi_step`: tools offered, results returned in the protocol's form, the
/// note with the results that followed it, and the budget line.
fn check_multi_step_requests(kind: BackendKind, d: &str, reqs: &[String]) {
    assert_eq!(reqs.len(), 4);
    let b: Vec<serde_json::Value> = reqs.iter().map(|r| body(r)).collect();
    assert_eq!(b[0]["tools"].as_array().unwrap().len(), 6);
    let second = b[1].to_string();
    match kind {
        BackendKind::Anthropic => {
            assert!(b[0]["system"].as_str().unwrap().contains("## Tools"));
            let m = b[1]["messages"].as_array().unwrap();
            assert_eq!(m[1]["content"][1]["type"], "tool_use");
            assert_eq!(m[1]["content"][1]["input"]["diff"], d);
            assert_eq!(m[2]["content"][0]["tool_use_id"], "toolu_1");
            assert_eq!(m[2]["content"][1]["tool_use_id"], "toolu_2");
            assert_eq!(m[2]["content"][0]["is_error"], false);
        }
        _ => {
            assert_eq!(b[0]["tool_choice"], "auto");
            let m = b[1]["messages"].as_array().unwrap();
            assert_eq!(
                m[2]["tool_calls"][0]["function"]["arguments"],
                args(serde_json::json!({"diff": d}))
            );
            assert_eq!(
                (m[3]["role"].as_str(), m[3]["tool_call_id"].as_str()),
                (Some("tool"), Some("call_1"))
            );
            assert_eq!(m[4]["tool_call_id"], "call_2");
        }
    }
    assert!(second.contains("compiled: ok"), "{second}");
    assert!(
        second.contains("[budget left: 10 of 12 tool calls"),
        "{second}"
    );
    assert!(!second.contains("keep the launch plan"));
    let third = b[2].to_string();
    assert!(third.contains("Note from the engineer (follow it): keep the launch plan"));
    assert!(
        third.contains("S 0.800"),
        "the run's per-shape figures: {third}"
    );
    assert!(
        b[3].to_string()
            .contains("# One warp per row for short rows (warp-per-row, technique)"),
        "the document read"
    );
}

#[tokio::test]
async fn openai_multi_step_tool_use_ends_in_propose() {
    multi_step(BackendKind::Openai).await;
}

#[tokio::test]
async fn anthropic_multi_step_tool_use_ends_in_propose() {
    multi_step(BackendKind::Anthropic).await;
}

/// Bad arguments and a tool whose worker fails are answered with error results; the model
/// goes on and proposes.
async fn bad_arguments_and_a_failing_tool(kind: BackendKind) {
    let lost = PLAIN.replace("// S=0.5", WORKER_LOST);
    let script = vec![
        calls(
            kind,
            "",
            &[
                ("run", args(serde_json::json!({"shapes": "all"}))),
                ("run", "{\"shapes\": [0,".into()),
                ("compile", args(serde_json::json!({"source": lost}))),
                (
                    "profile",
                    args(serde_json::json!({"source": PLAIN.replace("// a", NO_NCU)})),
                ),
                ("benchmark", "{}".into()),
            ],
            10,
            5,
        ),
        calls(
            kind,
            "",
            &[(
                "propose",
                args(
                    serde_json::json!({"hypothesis": "h", "category": "fusion", "diff": diff_to(0.7)}),
                ),
            )],
            10,
            5,
        ),
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
    let tc = tool_calls(&events.lock().unwrap());
    let got: Vec<(&str, bool)> = tc.iter().map(|t| (t.0.as_str(), t.1)).collect();
    assert_eq!(
        got,
        [
            ("run", false),
            ("run", false),
            ("compile", false),
            ("profile", false),
            ("benchmark", false),
            ("propose", true)
        ],
        "{kind:?}"
    );
    assert!(
        tc[0].2.contains("bad arguments: `shapes` must be a list"),
        "{}",
        tc[0].2
    );
    assert!(tc[1].2.contains("not valid JSON"), "{}", tc[1].2);
    assert!(tc[2].2.contains("the worker exited"), "{}", tc[2].2);
    assert!(
        tc[3].2.contains("ncu (Nsight Compute) not found"),
        "{}",
        tc[3].2
    );
    assert!(tc[4].2.contains("unknown tool `benchmark`"), "{}", tc[4].2);
    assert_eq!(d.state.incumbent_rev, 1, "the proposal went on");
    let reqs = srv.requests.lock().unwrap().clone();
    let second = body(&reqs[1]);
    let text = second.to_string();
    assert!(text.contains("the harness failed"), "{text}");
    match kind {
        BackendKind::Anthropic => {
            let results = second["messages"][2]["content"].as_array().unwrap();
            assert_eq!(results.len(), 5);
            assert!(results.iter().all(|r| r["is_error"] == true));
            // Arguments that did not parse go back as text, never as a broken object.
            assert_eq!(
                second["messages"][1]["content"][1]["input"]["unparsed_arguments"],
                "{\"shapes\": [0,"
            );
        }
        _ => {
            let m = second["messages"].as_array().unwrap();
            let tools: Vec<&serde_json::Value> = m.iter().filter(|x| x["role"] == "tool").collect();
            assert_eq!(tools.len(), 5);
            assert!(
                tools[0]["content"]
                    .as_str()
                    .unwrap()
                    .starts_with("ERROR: bad arguments")
            );
        }
    }
}

#[tokio::test]
async fn openai_bad_arguments_and_a_failing_tool_are_answered_and_the_loop_goes_on() {
    bad_arguments_and_a_failing_tool(BackendKind::Openai).await;
}

#[tokio::test]
async fn anthropic_bad_arguments_and_a_failing_tool_are_answered_and_the_loop_goes_on() {
    bad_arguments_and_a_failing_tool(BackendKind::Anthropic).await;
}

/// A model that keeps looking things up: the tool-call budget, a last turn for `propose`,
/// then the iteration ends without a revision, and says so.
async fn never_proposes(kind: BackendKind) {
    let lookup = || {
        calls(
            kind,
            "",
            &[("lookup", args(serde_json::json!({"query": "occupancy"})))],
            10,
            5,
        )
    };
    let srv = serve(vec![lookup(), lookup(), lookup(), lookup()]).await;
    let sink = MemSink::default();
    let events = sink.events.clone();
    let limits = ToolSettings {
        max_calls: 2,
        ..ToolSettings::on()
    };
    let mut d = tool_driver(&srv.url, kind, FakeMeasurer::default(), sink, limits);
    assert_eq!(d.run().await, StopReason::MaxIterations(1));
    let reqs = srv.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 3, "two calls, then the last turn");
    assert!(
        body(&reqs[2])
            .to_string()
            .contains("this is your last turn")
    );
    let ev = events.lock().unwrap().clone();
    let tc = tool_calls(&ev);
    assert_eq!(tc.len(), 3);
    assert!(
        !tc[2].1
            && tc[2]
                .2
                .contains("refused: the tool-call budget (2) is spent")
    );
    assert!(
        !ev.iter()
            .any(|e| matches!(e, SessionEvent::Revision { rev, .. } if *rev > 0))
    );
    let last = d.state.history.last().unwrap();
    assert_eq!(last.rev, None);
    let why = "no revision: the tool-call budget (2) is spent and the last turn did not propose";
    assert_eq!(last.result, why);
    assert_eq!((last.tokens_in, last.tokens_out), (30, 15));
    assert!(ev.iter().any(|e| matches!(e,
        SessionEvent::AgentState { state, reason: Some(r), .. } if state == "failed" && r == why)));
}

#[tokio::test]
async fn openai_a_model_that_never_proposes_ends_at_the_tool_budget_without_a_revision() {
    never_proposes(BackendKind::Openai).await;
}

#[tokio::test]
async fn anthropic_a_model_that_never_proposes_ends_at_the_tool_budget_without_a_revision() {
    never_proposes(BackendKind::Anthropic).await;
}

#[tokio::test]
async fn a_model_that_only_talks_is_nudged_then_the_iteration_ends() {
    let talk = || {
        calls(
            BackendKind::Anthropic,
            "I would vectorize the loads.",
            &[],
            10,
            5,
        )
    };
    let srv = serve(vec![talk(), talk(), talk(), talk()]).await;
    let mut d = tool_driver(
        &srv.url,
        BackendKind::Anthropic,
        FakeMeasurer::default(),
        MemSink::default(),
        ToolSettings::on(),
    );
    d.run().await;
    let reqs = srv.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 3, "two nudges");
    assert!(
        body(&reqs[1])
            .to_string()
            .contains("end the iteration by calling `propose`")
    );
    assert_eq!(
        d.state.history.last().unwrap().result,
        "no revision: the model ended its turn without calling propose"
    );
}

#[tokio::test]
async fn a_reply_in_the_single_reply_format_counts_as_a_proposal() {
    let srv = serve(vec![openai_sse(&good_reply(), 10, 5)]).await;
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
    d.run().await;
    let ev = events.lock().unwrap().clone();
    assert_eq!(
        tool_calls(&ev).first().map(|t| t.0.as_str()),
        Some("propose")
    );
    assert!(
        ev.iter()
            .any(|e| matches!(e, SessionEvent::Revision { rev: 1, .. }))
    );
}

/// A gate whose stop comes at the n-th call of `stop_requested()` (the first is the loop's own,
/// before the iteration).
struct StopGate {
    calls: usize,
    at: usize,
}

impl Gate for StopGate {
    async fn decide(&mut self, _rev: u32) -> GateAnswer {
        GateAnswer::Stop
    }
    fn stop_requested(&mut self) -> bool {
        self.calls += 1;
        self.calls >= self.at
    }
}

#[tokio::test]
async fn a_stop_during_an_iteration_ends_it_before_the_next_call() {
    let lookup = |q: &str| ("lookup", args(serde_json::json!({"query": q})));
    let srv = serve(vec![calls(
        BackendKind::Openai,
        "",
        &[lookup("tma"), lookup("wgmma")],
        10,
        5,
    )])
    .await;
    let sink = MemSink::default();
    let events = sink.events.clone();
    let d = tool_driver(
        &srv.url,
        BackendKind::Openai,
        FakeMeasurer::default(),
        sink,
        ToolSettings::on(),
    );
    // The loop's check, the first call's, then the stop before the second call.
    let mut d = with_gate(d, StopGate { calls: 0, at: 3 });
    assert_eq!(d.run().await, StopReason::Stopped);
    assert_eq!(tool_calls(&events.lock().unwrap()).len(), 1);
    assert_eq!(
        d.state.history.last().unwrap().result,
        "no revision: stopped by the engineer before propose"
    );
}
