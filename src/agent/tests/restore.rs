//! Restoring the agent's memory from a recorded session.

use super::*;

#[test]
fn restore_rebuilds_the_agents_memory_from_a_session() {
    use crate::session::{DecidedBy, Decision, Model, Record};
    let s = suite();
    let mut recs = Vec::new();
    let mut push = |e: SessionEvent| {
        let n = recs.len() as u64 + 1;
        recs.push(Record {
            v: 1,
            seq: n,
            t: n as f64,
            event: e,
        });
    };
    let base =
        crate::contract::kernels::suite_kernel(&s, s.problem("rms_norm").unwrap(), "baseline.cu")
            .unwrap()
            .code;
    for rev in 1..=4u32 {
        push(SessionEvent::Revision {
            op: "rms_norm".into(),
            rev,
            parent: Some(0),
            author: Author::Tuner,
            rationale: format!("step {rev}"),
            source: format!("{base}// {rev}\n"),
            via: None,
            request_id: None,
            tokens_in: Some(10),
            tokens_out: Some(5),
            category: Some("launch-config".into()),
            knowledge: vec!["hopper-h200".into()],
        });
    }
    push(SessionEvent::Decision {
        op: "rms_norm".into(),
        rev: 2,
        decision: Decision::Accepted,
        by: DecidedBy::Auto,
    });
    push(SessionEvent::AgentState {
        state: "dropout".into(),
        reason: Some("x".into()),
        op: Some("rms_norm".into()),
        masked: vec![1, 3],
    });
    push(SessionEvent::Steer {
        op: Some("rms_norm".into()),
        text: "try one warp per row".into(),
    });
    let m = Model::from_records(&s, &recs);
    let (st, sources) = super::setup::restore(&m, "rms_norm").unwrap();
    assert_eq!(st.incumbent_rev, 2);
    assert_eq!(st.history.len(), 5, "v0 and four agent revisions");
    assert_eq!(st.iterations, 4);
    assert_eq!(st.tokens(), 60);
    assert_eq!(st.since_improvement, 2, "v3 and v4 after the accepted v2");
    let masked: Vec<u32> = st
        .history
        .iter()
        .filter(|h| h.masked)
        .filter_map(|h| h.rev)
        .collect();
    assert_eq!(masked, vec![1, 3]);
    assert_eq!(st.steering, vec!["try one warp per row".to_string()]);
    assert_eq!(st.history[2].category, "launch-config");
    assert_eq!(sources.len(), 4);
}
