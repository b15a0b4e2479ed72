//! Decision gates and budgets: the human gate, target and token budgets, suggest mode.

use super::*;

/// A scripted human: answers in order, notes steering, then stops.
struct ScriptGate {
    answers: Vec<GateAnswer>,
    asked: Arc<Mutex<Vec<u32>>>,
    notes: Vec<String>,
}

impl Gate for ScriptGate {
    async fn decide(&mut self, rev: u32) -> GateAnswer {
        self.asked.lock().unwrap().push(rev);
        if self.answers.is_empty() {
            GateAnswer::Stop
        } else {
            self.answers.remove(0)
        }
    }
    fn steering(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }
}

#[tokio::test]
async fn the_human_gate_decides_and_stops_the_loop() {
    use crate::session::Decision;
    let s = suite();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let mut d = Driver {
        state: AgentState::new("rms_norm", 0, FIXTURE.to_string(), None),
        budget: Budget::default(),
        proposer: tuner_for(FIXTURE, 2),
        measurer: FakeMeasurer::default(),
        gate: ScriptGate {
            answers: vec![
                GateAnswer::Decided(Decision::Rejected),
                GateAnswer::Decided(Decision::Accepted),
                GateAnswer::Steer("unroll the loads".into()),
            ],
            asked: asked.clone(),
            notes: vec!["prefer 512 threads".into()],
        },
        sink: MemSink::default(),
        problem: s.problem("rms_norm").unwrap().clone(),
        hw: s.hardware("H200").unwrap().clone(),
        docs: vec![],
        incumbent_measure: None,
        mode: DecisionMode::Human,
        seed: 1,
        k_docs: 0,
        best_seen: None,
    };
    let stop = d.run().await;
    assert_eq!(stop, StopReason::Stopped);
    assert_eq!(*asked.lock().unwrap(), vec![1, 2, 3, 4]);
    assert_eq!(
        d.state.incumbent_rev, 2,
        "the accepted revision is the incumbent"
    );
    assert_eq!(
        d.state.steering,
        vec![
            "prefer 512 threads".to_string(),
            "unroll the loads".to_string()
        ]
    );
    let decisions: Vec<AgentDecision> =
        d.state.history.iter().skip(1).map(|h| h.decision).collect();
    assert_eq!(
        decisions,
        vec![
            AgentDecision::Rejected,
            AgentDecision::Accepted,
            AgentDecision::Pending,
            AgentDecision::Pending
        ]
    );
    // The steering note reaches the context.
    let ctx = context::build(&d.problem, &d.hw, &d.state, &[], None, 0);
    assert!(ctx.user.contains("prefer 512 threads"));
}

#[tokio::test]
async fn budgets_stop_on_target_and_tokens_and_suggest_mode_decides_nothing() {
    // Target: the first accepted step from 0.6 reaches 0.65.
    let budget = Budget {
        target_s: Some(0.65),
        ..Default::default()
    };
    let mut d = driver(
        tuner_for(FIXTURE, 4),
        FakeMeasurer::default(),
        MemSink::default(),
        FIXTURE,
        budget,
        DecisionMode::Auto,
    );
    let stop = d.run().await;
    assert!(
        matches!(stop, StopReason::TargetReached(s) if s >= 0.65),
        "{stop:?}"
    );
    // Tokens: one LLM reply of 300 tokens spends a budget of 100.
    let srv = serve(vec![openai_sse(&good_reply(), 200, 100)]).await;
    let p = LlmProposer {
        client: client(BackendKind::Openai, &srv.url, 2000),
    };
    let budget = Budget {
        max_tokens: Some(100),
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
    assert_eq!(d.run().await, StopReason::MaxTokens(100));
    assert_eq!(srv.requests.lock().unwrap().len(), 1);
    // Suggest: revisions measured, nothing decided, the incumbent stays.
    let sink = MemSink::default();
    let events = sink.events.clone();
    let budget = Budget {
        max_iters: 4,
        ..Default::default()
    };
    let mut d = driver(
        tuner_for(FIXTURE, 4),
        FakeMeasurer::default(),
        sink,
        FIXTURE,
        budget,
        DecisionMode::Suggest,
    );
    d.run().await;
    assert_eq!(d.state.incumbent_rev, 0);
    assert!(
        !events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, SessionEvent::Decision { .. }))
    );
    assert!(
        d.state
            .history
            .iter()
            .skip(1)
            .all(|h| h.decision == AgentDecision::Pending)
    );
    assert_eq!(
        d.state.dropouts, 0,
        "improving measurements are not a stall"
    );
}
