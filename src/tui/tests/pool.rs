//! The pool and parallel agents on screen: the workers per host (up, busy, down), restarts and
//! the queue in the header's pool line; agents on two operators at once, each with its own
//! controls and news.

use super::{fixture_state, screen, send};
use crate::pool::{PoolStatus, SeatState, WorkerStatus};
use crate::session::SessionEvent;
use crate::tui::event::{AgentCtl, AgentMsg, AppEvent, Effect, press};
use crate::tui::state::AppState;
use crate::tui::view;
use crossterm::event::KeyCode;

fn worker(name: &str, host: &str, state: SeatState, restarts: u64) -> WorkerStatus {
    WorkerStatus {
        name: name.into(),
        command: format!("ssh -T {host} atrex-tui worker --device 0"),
        templated: true,
        group: String::new(),
        device: 0,
        host: Some(host.into()),
        gpu: Some("NVIDIA H200".into()),
        gpu_info: None,
        driver: Some("12.8".into()),
        nvrtc: None,
        protocol: Some(3),
        tool_version: Some(env!("CARGO_PKG_VERSION").into()),
        visible: vec![0, 1],
        state,
        error: (state == SeatState::Down).then(|| "ssh: connect to host box-b: timed out".into()),
        restarts,
        start_s: Some(0.4),
        greeted: true,
    }
}

fn pool() -> PoolStatus {
    PoolStatus {
        workers: vec![
            worker("box-a:0", "box-a", SeatState::Idle, 0),
            worker("box-a:1", "box-a", SeatState::Busy, 2),
            worker("box-b:0", "box-b", SeatState::Down, 0),
        ],
        queued: 12,
        running: 1,
        requeued: 1,
    }
}

fn agent_state(op: &str, state: &str, reason: &str) -> AppEvent {
    AppEvent::Agent(
        op.into(),
        AgentMsg::Record(SessionEvent::AgentState {
            state: state.into(),
            reason: Some(reason.into()),
            op: Some(op.into()),
            masked: vec![],
        }),
    )
}

/// Starts agents on rms_norm and silu_and_mul (keys) and brings their states in.
fn two_agents(s: &mut AppState) -> Vec<Effect> {
    let mut fx = send(s, vec![press(KeyCode::Char('a'))]);
    s.select_op_name("silu_and_mul");
    fx.extend(send(s, vec![press(KeyCode::Char('a'))]));
    send(
        s,
        vec![
            agent_state("rms_norm", "running", "v4: measuring"),
            agent_state("silu_and_mul", "waiting", "v1: S_op 0.612, pass"),
        ],
    );
    fx
}

#[test]
fn snapshot_pool_line_and_parallel_agents_200x50() {
    let mut s = fixture_state(vec![]);
    send(&mut s, vec![AppEvent::Pool(pool())]);
    two_agents(&mut s);
    let out = screen(&s, 200, 50);
    assert!(
        out.contains("workers: box-a 1 up 1 busy · box-b 1 down │ 2 restarts │ queue 12 · running 1 · 1 requeued"),
        "{out}"
    );
    assert!(
        out.contains("2 agents: rms_norm running · silu_and_mul waiting"),
        "{out}"
    );
    assert!(
        out.contains("▶ agent") && out.contains("▶ waits y/n"),
        "{out}"
    );
    assert!(
        out.contains("(2 restarts)"),
        "the GPU's restarts count every worker's"
    );
    insta::assert_snapshot!("pool_agents_200x50", out);
}

#[test]
fn one_local_worker_keeps_the_two_line_header() {
    let mut s = fixture_state(vec![]);
    let mut one = pool();
    one.workers.truncate(1);
    send(&mut s, vec![AppEvent::Pool(one)]);
    assert_eq!(view::header_height(&s), 2);
    assert!(!screen(&s, 160, 45).contains("workers:"));
    // A templated worker down shows the line even alone; this machine's only worker down is
    // the header's "no GPU".
    let mut down = pool();
    down.workers.drain(..2);
    send(&mut s, vec![AppEvent::Pool(down.clone())]);
    assert_eq!(view::header_height(&s), 3);
    assert!(screen(&s, 160, 45).contains("workers: box-b 1 down"));
    down.workers[0].templated = false;
    send(&mut s, vec![AppEvent::Pool(down)]);
    assert_eq!(view::header_height(&s), 2);
}

#[test]
fn agents_on_two_operators_run_at_once_each_with_its_own_controls() {
    let mut s = fixture_state(vec![]);
    let fx = two_agents(&mut s);
    let started: Vec<&str> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::StartAgent { op, .. } => Some(op.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, vec!["rms_norm", "silu_and_mul"]);
    assert_eq!(s.work.running_agents().len(), 2);
    // News of one agent stays with it.
    send(
        &mut s,
        vec![AppEvent::Agent(
            "silu_and_mul".into(),
            AgentMsg::Stream("thinking about silu".into()),
        )],
    );
    assert!(s.work.agents["rms_norm"].stream.is_empty());
    assert_eq!(s.work.agents["silu_and_mul"].stream, "thinking about silu");
    // x drops out the selected operator's agent only.
    let fx = send(&mut s, vec![press(KeyCode::Char('x'))]);
    assert_eq!(
        fx,
        vec![Effect::Agent("silu_and_mul".into(), AgentCtl::Dropout)]
    );
    // a stops the selected operator's agent; the other goes on.
    let fx = send(&mut s, vec![press(KeyCode::Char('a'))]);
    assert_eq!(
        fx,
        vec![Effect::Agent("silu_and_mul".into(), AgentCtl::Stop)]
    );
    send(
        &mut s,
        vec![AppEvent::Agent(
            "silu_and_mul".into(),
            AgentMsg::Finished("stopped by the engineer".into()),
        )],
    );
    assert!(s.work.running_agent("silu_and_mul").is_none());
    assert!(s.work.running_agent("rms_norm").is_some());
    // Quitting stops every agent still running.
    let fx = send(&mut s, vec![press(KeyCode::Char('q'))]);
    let fx = if fx.is_empty() {
        send(&mut s, vec![press(KeyCode::Char('y'))])
    } else {
        fx
    };
    assert!(
        fx.contains(&Effect::Agent("rms_norm".into(), AgentCtl::Stop)),
        "{fx:?}"
    );
}
