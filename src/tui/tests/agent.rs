//! The agent in the TUI: start, stream, decisions, steering, dropout, stop.

use super::{fixture_state, last_event, screen, send, tuner_v3, typed};
use crate::session::fixtures::{measured, revision};
use crate::session::{Author, Decision, SessionEvent};
use crate::tui::event::{AgentCtl, AgentMsg, AppEvent, Effect, press};
use crate::tui::state::AppState;
use crate::tui::view_state::PaneId;
use crate::tui::workbench::{AgentView, WorkerState};
use crossterm::event::KeyCode;

/// News from the rms_norm agent reaching the app.
fn from_agent(s: &mut AppState, m: AgentMsg) -> Vec<Effect> {
    send(s, vec![AppEvent::Agent("rms_norm".into(), m)])
}

#[test]
fn the_agent_starts_streams_takes_decisions_steering_dropout_and_stops() {
    let mut s = fixture_state(tuner_v3());
    // Without a GPU it refuses.
    s.work.worker = WorkerState::NoGpu("none".into());
    assert!(send(&mut s, vec![press(KeyCode::Char('a'))]).is_empty());
    assert!(s.work.ui_log.last().unwrap().text.contains("cannot start"));
    s.work.worker = WorkerState::Ready {
        gpu: "NVIDIA H200".into(),
        sm_clock_mhz: 1980,
    };
    let fx = send(&mut s, vec![press(KeyCode::Char('a'))]);
    let Some(Effect::StartAgent {
        op, state, sources, ..
    }) = fx.first()
    else {
        panic!("{fx:?}")
    };
    assert_eq!(op, "rms_norm");
    // The agent remembers the session: the tuner's v3 and its S_op.
    assert!(state.history.iter().any(|h| h.rev == Some(3)));
    assert!(
        sources
            .iter()
            .any(|(src, s)| src.contains("// v3") && s.is_some())
    );
    assert!(s.work.running_agent("rms_norm").is_some());
    // Streaming text shows in the diff pane; a revision from the agent is selected.
    from_agent(&mut s, AgentMsg::Stream("Hypothesis: wider loads".into()));
    assert!(screen(&s, 200, 50).contains("Hypothesis: wider loads"));
    let mut ev = revision(
        "rms_norm",
        4,
        Some(1),
        Author::Tuner,
        "BLOCK = 512",
        "// v4\nint y;\n",
    );
    if let SessionEvent::Revision {
        category,
        knowledge,
        ..
    } = &mut ev
    {
        *category = Some("launch-config".into());
        *knowledge = vec!["hopper-h200".into(), "warp-per-row".into()];
    }
    from_agent(&mut s, AgentMsg::Record(ev));
    assert_eq!(s.selected_rev().map(|r| r.rev), Some(4));
    let sc = screen(&s, 200, 50);
    assert!(
        sc.contains("v4    tuner") && sc.contains("[launch-conf"),
        "{sc}"
    );
    assert!(sc.contains("knowledge: hopper-h200, warp-per-row"), "{sc}");
    for e in measured(
        "rms_norm",
        4,
        9,
        &[(0, 0.9), (1, 0.9), (2, 0.9), (3, 0.9), (4, 0.9), (5, 0.9)],
    ) {
        from_agent(&mut s, AgentMsg::Record(e));
    }
    from_agent(
        &mut s,
        AgentMsg::Record(SessionEvent::AgentState {
            state: "waiting".into(),
            reason: Some("v4: accept (y), reject (n) or steer (s)".into()),
            op: Some("rms_norm".into()),
            masked: vec![],
        }),
    );
    assert!(screen(&s, 200, 50).contains("tuner on rms_norm: waiting"));
    // y decides for the agent too.
    s.view.focus = PaneId::Revisions;
    let fx = send(&mut s, vec![press(KeyCode::Char('y'))]);
    assert_eq!(
        fx[0],
        Effect::Agent(
            "rms_norm".into(),
            AgentCtl::Decided {
                rev: 4,
                decision: Decision::Accepted
            }
        )
    );
    assert!(
        matches!(&fx[1], Effect::RecordStanding { update, .. } if update.op == "rms_norm"),
        "{fx:?}"
    );
    // Steering goes to the session and to the agent.
    send(&mut s, vec![press(KeyCode::Char('s'))]);
    let mut evs = typed("try two rows per warp");
    evs.push(press(KeyCode::Enter));
    let fx = send(&mut s, evs);
    assert_eq!(
        fx,
        vec![Effect::Agent(
            "rms_norm".into(),
            AgentCtl::Steer("try two rows per warp".into())
        )]
    );
    assert!(matches!(last_event(&s), SessionEvent::Steer { .. }));
    assert_eq!(
        send(&mut s, vec![press(KeyCode::Char('x'))]),
        vec![Effect::Agent("rms_norm".into(), AgentCtl::Dropout)]
    );
    // A dropout shows in the header and the log.
    from_agent(
        &mut s,
        AgentMsg::Record(SessionEvent::AgentState {
            state: "dropout".into(),
            reason: Some("asked by the engineer: 1 of 3 history entries masked (v3)".into()),
            op: Some("rms_norm".into()),
            masked: vec![3],
        }),
    );
    assert_eq!(s.work.model.agents["rms_norm"].masked, vec![3]);
    assert!(screen(&s, 200, 50).contains("(masked)"));
    assert!(screen(&s, 200, 50).contains("dropout (asked by the engineer"));
    assert_eq!(
        send(&mut s, vec![press(KeyCode::Char('a'))]),
        vec![Effect::Agent("rms_norm".into(), AgentCtl::Stop)]
    );
    from_agent(&mut s, AgentMsg::Finished("stopped by the engineer".into()));
    assert!(!s.work.agents["rms_norm"].running);
    assert!(
        s.work
            .ui_log
            .last()
            .unwrap()
            .text
            .contains("agent on rms_norm finished: stopped by the engineer")
    );
}

/// After a steering note the header follows the agent (not "waiting" on the old revision), and
/// while the agent waits on a revision, `y` answers that revision even when another is
/// selected, saying so.
#[test]
fn decision_keys_answer_the_revision_the_agent_offers() {
    let mut extra = vec![revision(
        "rms_norm",
        4,
        Some(1),
        Author::Tuner,
        "tuned",
        "// v4\n",
    )];
    extra.extend(measured(
        "rms_norm",
        4,
        9,
        &[(0, 0.9), (1, 0.9), (2, 0.9), (3, 0.9), (4, 0.9), (5, 0.9)],
    ));
    let mut s = fixture_state(extra);
    s.work.agents.insert(
        "rms_norm".into(),
        AgentView {
            op: "rms_norm".into(),
            backend: "tuner".into(),
            running: true,
            stopping: false,
            stream: String::new(),
            ..Default::default()
        },
    );
    let state = |st: &str, reason: &str| {
        AppEvent::Agent(
            "rms_norm".into(),
            AgentMsg::Record(SessionEvent::AgentState {
                state: st.into(),
                reason: Some(reason.into()),
                op: Some("rms_norm".into()),
                masked: vec![],
            }),
        )
    };
    send(
        &mut s,
        vec![state("waiting", "v4: accept (y), reject (n) or steer (s)")],
    );
    assert!(screen(&s, 200, 50).contains("tuner on rms_norm: waiting (v4: accept"));
    // The engineer steers: the agent goes on, and the header says so.
    send(
        &mut s,
        vec![state(
            "running",
            "v4 left pending; steered, working on the next revision",
        )],
    );
    let sc = screen(&s, 200, 50);
    assert!(sc.contains("running (v4 left pending"), "{sc}");
    assert!(!sc.contains("waiting (v4"), "{sc}");
    // Waiting on v4 again while v2 is selected: y accepts v4 and says which.
    send(
        &mut s,
        vec![state("waiting", "v4: accept (y), reject (n) or steer (s)")],
    );
    s.view.focus = PaneId::Revisions;
    s.select_rev_number(2);
    let fx = send(&mut s, vec![press(KeyCode::Char('y'))]);
    assert_eq!(
        fx[0],
        Effect::Agent(
            "rms_norm".into(),
            AgentCtl::Decided {
                rev: 4,
                decision: Decision::Accepted
            }
        )
    );
    assert!(
        matches!(&fx[1], Effect::RecordStanding { update, .. } if update.op == "rms_norm"),
        "{fx:?}"
    );
    assert!(
        s.work
            .model
            .log
            .iter()
            .chain(s.work.ui_log.iter())
            .any(|l| l
                .text
                .contains("accepting rms_norm v4: the revision the agent waits on")),
        "{:?}",
        s.work.ui_log
    );
}

/// The model's tool calls show in the agent pane as they start and end, with the iteration's
/// budgets in its title, and in the log; the next revision gives the pane back to the diff.
#[test]
fn tool_calls_stream_into_the_agent_pane_with_the_budgets() {
    let mut s = fixture_state(vec![]);
    s.work.agents.insert(
        "rms_norm".into(),
        AgentView {
            op: "rms_norm".into(),
            backend: "kernel-model (openai)".into(),
            running: true,
            ..Default::default()
        },
    );
    let args = "diff +1 −1, shapes 0 2, quick";
    send(
        &mut s,
        vec![AppEvent::Agent(
            "rms_norm".into(),
            AgentMsg::ToolStarted {
                name: "run".into(),
                args: args.into(),
            },
        )],
    );
    let sc = screen(&s, 200, 50);
    assert!(sc.contains(&format!("▸ run({args}) …")), "{sc}");
    assert!(
        sc.contains("agent · kernel-model (openai) · calls 0/12"),
        "{sc}"
    );
    let done = SessionEvent::ToolCall {
        op: "rms_norm".into(),
        iteration: 1,
        call: 1,
        name: "run".into(),
        args: args.into(),
        ok: true,
        result: "pass · S_op 0.8000 on 2 shapes".into(),
        ms: 1200.0,
        gpu_s: 1.1,
        spent: crate::session::ToolSpent {
            calls: 1,
            gpu_s: 1.1,
            tokens: 1050,
        },
    };
    send(
        &mut s,
        vec![AppEvent::Agent("rms_norm".into(), AgentMsg::Record(done))],
    );
    let sc = screen(&s, 200, 50);
    assert!(
        sc.contains(&format!(
            "✓ run({args}) → pass · S_op 0.8000 on 2 shapes (1.2 s, GPU 1.1 s)"
        )),
        "{sc}"
    );
    assert!(
        sc.contains("calls 1/12 · GPU 1/120 s · tokens 1.1k/250k"),
        "{sc}"
    );
    assert!(
        s.work
            .model
            .log
            .last()
            .unwrap()
            .text
            .starts_with("tool 1.1 run(diff +1 −1, shapes 0 2, quick) → pass")
    );
    send(
        &mut s,
        vec![AppEvent::Agent(
            "rms_norm".into(),
            AgentMsg::Record(revision(
                "rms_norm",
                4,
                Some(1),
                Author::Model("kernel-model".into()),
                "the marker",
                "// v4\n",
            )),
        )],
    );
    let a = &s.work.agents["rms_norm"];
    assert!(a.tools.is_empty() && a.spent == Default::default());
    assert!(!screen(&s, 200, 50).contains("✓ run("));
}
