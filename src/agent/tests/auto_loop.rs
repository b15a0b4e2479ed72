//! The auto loop: the tuner climbing to the optimum, stalls and dropout masking, compile
//! errors, the A B B A noise rule and refusing kernels caught in their timed runs.

use super::*;

#[tokio::test]
async fn the_tuner_loop_in_auto_mode_climbs_to_the_optimum() {
    let m = FakeMeasurer::default();
    let jobs = m.jobs.clone();
    let (holds, unheld) = (m.holds.clone(), m.timed_unheld.clone());
    let sink = MemSink::default();
    let events = sink.events.clone();
    let budget = Budget {
        max_iters: 40,
        ..Default::default()
    };
    let mut d = driver(
        tuner_for(FIXTURE, 1),
        m,
        sink,
        FIXTURE,
        budget,
        DecisionMode::Auto,
    );
    let stop = d.run().await;
    assert_eq!(stop, StopReason::SearchExhausted, "{stop}");
    assert!(
        (d.state.incumbent_s.unwrap() - 0.9).abs() < 1e-9,
        "{:?}",
        d.state.incumbent_s
    );
    let p = crate::contract::plan::parse(&d.state.incumbent_source).unwrap();
    assert_eq!(p.defines["BLOCK"].as_f64(), Some(512.0));
    assert_eq!(p.defines["VEC"].as_f64(), Some(4.0));
    // Every revision is a real revision with a [defines] change, by the tuner; no source twice.
    let ev = events.lock().unwrap().clone();
    let revs: Vec<&SessionEvent> = ev
        .iter()
        .filter(|e| matches!(e, SessionEvent::Revision { .. }))
        .collect();
    assert_eq!(
        revs.len(),
        15,
        "16 configurations, the start already measured"
    );
    let mut sources: Vec<String> = revs
        .iter()
        .map(|e| match e {
            SessionEvent::Revision {
                source,
                author,
                category,
                ..
            } => {
                assert_eq!(author, &Author::Tuner);
                assert!(category.is_some());
                assert!(source.contains("[defines]"));
                source.clone()
            }
            _ => unreachable!(),
        })
        .collect();
    sources.sort();
    sources.dedup();
    assert_eq!(sources.len(), 15);
    // Auto decisions, each accepted one after an A B B A of four timing jobs.
    let accepted = ev
        .iter()
        .filter(|e| {
            matches!(
                e,
                SessionEvent::Decision {
                    decision: crate::session::Decision::Accepted,
                    by: crate::session::DecidedBy::Auto,
                    ..
                }
            )
        })
        .count();
    assert!(accepted >= 2);
    let times = jobs
        .lock()
        .unwrap()
        .iter()
        .filter(|j| j.1 == JobKind::Time)
        .count();
    assert!(times >= 4 * accepted && times % 4 == 0);
    // Every A B B A ran its four timings on one held worker.
    assert_eq!(holds.load(std::sync::atomic::Ordering::SeqCst), times / 4);
    assert_eq!(unheld.load(std::sync::atomic::Ordering::SeqCst), 0);
    // A stop reason is recorded.
    assert!(
        matches!(ev.last(), Some(SessionEvent::AgentState { state, reason: Some(r), .. }) if state == "stopped" && r.contains("exhausted"))
    );
}

#[tokio::test]
async fn a_stalled_loop_drops_out_and_masks_about_half_never_v0_nor_the_best() {
    let m = FakeMeasurer {
        flat: true,
        ..Default::default()
    };
    let sink = MemSink::default();
    let events = sink.events.clone();
    let budget = Budget {
        max_iters: 7,
        dropout_k: 3,
        ..Default::default()
    };
    let mut d = driver(
        tuner_for(FIXTURE, 5),
        m,
        sink,
        FIXTURE,
        budget,
        DecisionMode::Auto,
    );
    let stop = d.run().await;
    assert_eq!(stop, StopReason::MaxIterations(7));
    assert!(d.state.dropouts >= 2, "{}", d.state.dropouts);
    let ev = events.lock().unwrap().clone();
    let drops: Vec<(String, Vec<u32>)> = ev
        .iter()
        .filter_map(|e| match e {
            SessionEvent::AgentState {
                state,
                reason,
                masked,
                ..
            } if state == "dropout" => Some((reason.clone().unwrap_or_default(), masked.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(drops.len(), d.state.dropouts);
    for (reason, masked) in &drops {
        assert!(reason.contains("masked"), "{reason}");
        assert!(!masked.contains(&0));
        assert!(!masked.is_empty());
    }
    // The stall was logged before the first dropout.
    assert!(
        ev.iter()
            .any(|e| matches!(e, SessionEvent::AgentState { state, .. } if state == "stall"))
    );
    // The masked entries are not in the next context.
    let ctx = context::build(&d.problem, &d.hw, &d.state, &[], None, 0);
    for h in d.state.history.iter().filter(|h| h.masked) {
        assert!(
            !ctx.user.contains(&format!("- v{} ", h.rev.unwrap())),
            "v{:?} is masked",
            h.rev
        );
    }
}

fn entry(rev: Option<u32>, s: Option<f64>) -> HistoryEntry {
    HistoryEntry {
        rev,
        parent: Some(0),
        hypothesis: String::new(),
        category: "fusion".into(),
        change: String::new(),
        evidence: Evidence {
            full: s.map(|s| MeasureSummary {
                s_op: Some(s),
                compiled: true,
                verdict: "pass".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
        result: String::new(),
        decision: AgentDecision::Pending,
        masked: false,
        tokens_in: 0,
        tokens_out: 0,
        request_id: None,
        knowledge: vec![],
    }
}

#[test]
fn dropout_masking_rules() {
    // v0 .. v8 plus a failed proposal; v5 is the best.
    let mut h: Vec<HistoryEntry> = (0..9)
        .map(|r| {
            entry(
                Some(r),
                Some(if r == 5 { 0.9 } else { 0.1 * (r as f64 % 4.0) }),
            )
        })
        .collect();
    h.push(entry(None, None));
    for seed in 0..200 {
        let m = dropout_mask(&h, Some(5), seed);
        // 8 eligible (v1..v4, v6..v8, the failed one): half of them.
        assert_eq!(m.len(), 4, "seed {seed}");
        for i in &m {
            assert_ne!(h[*i].rev, Some(0));
            assert_ne!(h[*i].rev, Some(5));
        }
    }
    // Different seeds give different masks.
    assert_ne!(dropout_mask(&h, Some(5), 1), dropout_mask(&h, Some(5), 2));
    let mut st = AgentState::new("rms_norm", 0, String::new(), Some(0.1));
    st.history = h;
    assert_eq!(st.best_rev(), Some(5));
    let masked = st.dropout(9);
    assert_eq!(st.history.iter().filter(|e| e.masked).count(), 4);
    assert!(!masked.contains(&0) && !masked.contains(&5));
    assert_eq!(st.since_improvement, 0);
    // Too little history: nothing to mask but v0.
    assert!(dropout_mask(&[entry(Some(0), Some(0.5))], Some(0), 3).is_empty());
}

#[tokio::test]
async fn compile_errors_are_rejected_and_counted_toward_dropout() {
    let m = FakeMeasurer {
        broken: Some("BLOCK = 256".into()),
        ..Default::default()
    };
    let budget = Budget {
        max_iters: 2,
        ..Default::default()
    };
    let mut d = driver(
        tuner_for(FIXTURE, 0),
        m,
        MemSink::default(),
        FIXTURE,
        budget,
        DecisionMode::Auto,
    );
    d.run().await;
    let h: Vec<&HistoryEntry> = d
        .state
        .history
        .iter()
        .filter(|h| h.result.starts_with("compile error"))
        .collect();
    assert_eq!(
        h.len(),
        1,
        "{:?}",
        d.state
            .history
            .iter()
            .map(|h| h.result.clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(h[0].decision, AgentDecision::Rejected);
}

#[test]
fn search_without_a_start_score_still_moves() {
    let b = Base::from_source("k", FIXTURE).unwrap();
    let mut s = Search::new(vec![b], None, 0);
    let (p, _) = s.next().unwrap();
    s.report(&p, Some(0.1));
    assert!(s.best().is_some());
}

#[test]
fn abba_noise_rule() {
    let a = Abba::from_runs([0.50, 0.55, 0.55, 0.50], 0.001);
    assert!(a.significant() && (a.gain - 0.1).abs() < 1e-9);
    // The incumbent moved by 10 % between its two runs: a 5 % gain is noise.
    let b = Abba::from_runs([0.50, 0.55, 0.55, 0.55], 0.001);
    assert!(!b.significant(), "{b:?}");
    let c = Abba::from_runs([0.50, 0.501, 0.501, 0.50], 0.01);
    assert!(!c.significant());
    // A failed timing run (S_op 0) never makes a gain.
    let d = Abba::from_runs([0.0, 0.6, 0.6, 0.5], 0.001);
    assert!(!d.significant(), "{d:?}");
}

/// A candidate that passes every check but whose timed runs the harness catches (outputs that
/// differ from the check) is refused by the auto rule even though it times faster, and what it
/// printed reaches both the session and the agent's next context.
#[tokio::test]
async fn auto_mode_refuses_a_kernel_caught_in_its_timed_runs() {
    let reply = "Hypothesis: skip finished rows\nCategory: algorithm\n```diff\n--- a/kernel.cu\n+++ b/kernel.cu\n@@ -12,1 +12,3 @@\n extern \"C\" __global__ void k() {}\n+// S=0.8 printf\n+// TIMED-CHEAT\n```\n";
    let srv = serve(vec![openai_sse(reply, 100, 10)]).await;
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
    assert_eq!(
        d.state.incumbent_rev, 0,
        "the cheating candidate was not accepted"
    );
    let h = d.state.history.last().unwrap();
    let a = h.evidence.abba.as_ref().expect("an A B B A ran");
    assert!(!a.significant());
    assert!(
        a.refused.as_deref().unwrap().contains("timed run differs"),
        "{a:?}"
    );
    let ev = events.lock().unwrap().clone();
    assert!(ev.iter().any(|e| matches!(
        e,
        SessionEvent::Decision {
            decision: crate::session::Decision::Rejected,
            ..
        }
    )));
    assert!(ev.iter().any(|e| matches!(e,
        SessionEvent::KernelOutput { text, .. } if text.contains("row 0: sum 1.5"))));
    let text = super::context::history_text_for_test(&d.state);
    assert!(text.contains("A B B A refused"), "{text}");
    assert!(text.contains("the kernel printed"), "{text}");
}
