//! Deep profiles in the agent: context, retrieval symptoms and notes sent to a running agent.

use super::*;

#[test]
fn a_recorded_profile_changes_the_context_and_retrieval() {
    use crate::session::{Model, Record};
    let s = suite();
    let p = s.problem("rms_norm").unwrap().clone();
    let hw = s.hardware("H200").unwrap().clone();
    let docs = super::knowledge::docs();
    let base = crate::contract::kernels::suite_kernel(&s, &p, "baseline.cu")
        .unwrap()
        .code;
    let rec = |seq: u64, event: SessionEvent| Record {
        v: 1,
        seq,
        t: seq as f64,
        event,
    };
    let rev0 = SessionEvent::Revision {
        op: "rms_norm".into(),
        rev: 0,
        parent: None,
        author: Author::Baseline,
        rationale: "suite baseline".into(),
        source: base,
        via: None,
        request_id: None,
        tokens_in: None,
        tokens_out: None,
        category: None,
        knowledge: vec![],
    };
    let without = Model::from_records(&s, &[rec(1, rev0.clone())]);
    let with = Model::from_records(
        &s,
        &[
            rec(1, rev0),
            rec(
                2,
                SessionEvent::Profile {
                    op: "rms_norm".into(),
                    rev: 0,
                    profile: Box::new(crate::profile::fixture("rms_norm", 0, 27)),
                },
            ),
        ],
    );
    let (st0, _) = super::setup::restore(&without, "rms_norm").unwrap();
    let (st1, _) = super::setup::restore(&with, "rms_norm").unwrap();
    assert!(st0.profiles.is_empty());
    assert_eq!(st1.profiles.len(), 1);
    assert_eq!(
        st1.profiles[0].rules,
        vec!["warp_divergence", "low_occupancy", "latency_bound"]
    );
    let c0 = context::build(&p, &hw, &st0, &docs, None, 6);
    let c1 = context::build(&p, &hw, &st1, &docs, None, 6);
    // The finding rules are retrieval symptoms …
    for sym in ["warp-divergence", "low-occupancy", "latency-bound"] {
        assert!(!c0.query.symptoms.iter().any(|x| x == sym));
        assert!(
            c1.query.symptoms.iter().any(|x| x == sym),
            "{:?}",
            c1.query.symptoms
        );
    }
    // … that change what is retrieved …
    assert_ne!(c0.knowledge, c1.knowledge);
    assert!(
        c1.knowledge.iter().any(|k| k == "ilp-unroll")
            || c1.knowledge.iter().any(|k| k == "warp-per-row"),
        "{:?}",
        c1.knowledge
    );
    // … and the findings are in the model's context.
    assert!(!c0.user.contains("## Profiler findings"));
    assert!(c1.user.contains("## Profiler findings (Nsight Compute)"));
    assert!(c1.user.contains("v0 (the incumbent) on shape #27"));
    assert!(
        c1.user
            .contains("finding [low_occupancy] rms_norm_kernel: low occupancy — achieved 19%"),
        "{}",
        c1.user
    );
    assert!(c1.user.contains("long_scoreboard"));
}

/// A gate that hands over one deep profile, then stops at the first decision.
struct ProfileGate(Vec<ProfileNote>);

impl Gate for ProfileGate {
    async fn decide(&mut self, _rev: u32) -> GateAnswer {
        GateAnswer::Stop
    }
    fn profiles(&mut self) -> Vec<ProfileNote> {
        std::mem::take(&mut self.0)
    }
}

#[tokio::test]
async fn a_profile_sent_to_the_running_agent_reaches_its_state() {
    let s = suite();
    let note = ProfileNote::from_profile(0, &crate::profile::fixture("rms_norm", 0, 27));
    assert!(note.figures.contains("rms_norm_kernel"), "{}", note.figures);
    let mut d = Driver {
        state: AgentState::new("rms_norm", 0, FIXTURE.to_string(), None),
        budget: Budget::default(),
        proposer: tuner_for(FIXTURE, 2),
        measurer: FakeMeasurer::default(),
        gate: ProfileGate(vec![note.clone()]),
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
    d.run().await;
    assert_eq!(d.state.profiles, vec![note]);
    let ctx = context::build(&d.problem, &d.hw, &d.state, &[], None, 0);
    assert!(ctx.user.contains("finding [latency_bound]"), "{}", ctx.user);
}

#[test]
fn finding_rules_map_to_retrieval_symptoms() {
    let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        super::knowledge::symptoms_of_findings(&v(&["grid_too_small", "tail_effect"])),
        v(&["grid-too-small", "low-occupancy", "tail-effect"])
    );
    // Every rule-derived symptom is known to at least one document, so findings matter.
    let docs = super::knowledge::docs();
    for rule in [
        "grid_too_small",
        "tail_effect",
        "uncoalesced_access",
        "register_spills",
        "unintended_fp64",
        "bank_conflicts",
        "warp_divergence",
        "low_occupancy",
        "compute_without_tensor_cores",
        "latency_bound",
        "redundant_traffic",
    ] {
        let sym = rule.replace('_', "-");
        assert!(
            docs.iter().any(|d| d.meta.symptoms.contains(&sym)),
            "no document lists the symptom {sym}"
        );
    }
}
