//! Deep profiles (`p`): off the input loop, recorded, shown, handed to the agent, or refused.

use super::{fixture_state, last_event, screen, send};
use crate::session::SessionEvent;
use crate::tui::event::{AgentCtl, AppEvent, Effect, press};
use crate::tui::view_state::PaneId;
use crate::tui::workbench::WorkerState;
use crossterm::event::KeyCode;

fn profile_fx(fx: &[Effect]) -> (String, u32, u32) {
    match fx {
        [Effect::Profile { op, rev, shape, .. }] => (op.clone(), *rev, *shape),
        _ => panic!("not one profile effect: {fx:?}"),
    }
}

#[test]
fn p_profiles_off_the_input_loop_and_shows_the_result() {
    let mut s = fixture_state(vec![]);
    s.work.ncu = Some(Ok("/opt/cuda/bin/ncu".into()));
    let largest = crate::profile::largest_shape(s.work.suite.problem("rms_norm").unwrap()).unwrap();
    // No shape selected: the operator's largest.
    let fx = send(&mut s, vec![press(KeyCode::Char('p'))]);
    assert_eq!(profile_fx(&fx), ("rms_norm".into(), 1, largest));
    let [Effect::Profile { device, ncu, .. }] = &fx[..] else {
        unreachable!()
    };
    assert_eq!(device, "NVIDIA H200");
    assert_eq!(
        ncu.as_deref(),
        Some(std::path::Path::new("/opt/cuda/bin/ncu"))
    );
    assert_eq!(
        s.view.phase,
        crate::suite::PhaseFilter::All,
        "p no longer filters"
    );
    let progress = &s.work.ui_log.last().unwrap().text;
    assert_eq!(
        progress,
        &format!(
            "profiling rms_norm v1 on shape #{largest} under Nsight Compute (takes a few seconds)…"
        )
    );
    assert!(screen(&s, 200, 50).contains("profiling rms_norm v1"));
    // One profile at a time.
    assert!(send(&mut s, vec![press(KeyCode::Char('p'))]).is_empty());
    assert!(
        s.work
            .ui_log
            .last()
            .unwrap()
            .text
            .contains("being profiled")
    );
    // The result: recorded, findings in the log, gauges in the shapes pane.
    let n = s.work.journal.len();
    let prof = crate::profile::fixture("rms_norm", 1, largest);
    let fx = send(
        &mut s,
        vec![AppEvent::Profiled {
            op: "rms_norm".into(),
            rev: 1,
            result: Ok(Box::new(prof.clone())),
        }],
    );
    assert!(fx.is_empty());
    assert!(s.work.profiling.is_none());
    assert_eq!(s.work.journal.len(), n + 1);
    assert!(matches!(
        last_event(&s),
        SessionEvent::Profile { rev: 1, .. }
    ));
    assert_eq!(
        s.work.model.ops["rms_norm"]
            .rev(1)
            .unwrap()
            .profile
            .as_deref(),
        Some(&prof)
    );
    let log: Vec<&str> = s.work.model.log.iter().map(|l| l.text.as_str()).collect();
    assert!(
        log.contains(
            &"finding [latency_bound] rms_norm_kernel: latency-bound: neither memory nor compute is near its peak — memory 17%, SM 31%; top stall long_scoreboard (3.9 cycles per instruction)"
        ),
        "{log:?}"
    );
    assert_eq!(
        log.iter().filter(|l| l.starts_with("finding [")).count(),
        prof.findings.len()
    );
    s.view.focus = PaneId::Gauges;
    let big = screen(&s, 200, 50);
    assert!(big.contains("profile · #"), "{big}");
    assert!(big.contains("occupancy"), "{big}");
    assert!(big.contains("long_scoreboard"), "{big}");
    // 80×24: one line.
    let small = screen(&s, 80, 24);
    assert!(
        small.contains(&format!("ncu #{largest} · DRAM 16%")),
        "{small}"
    );
    // A selected shape is profiled instead (j in the shapes pane selects).
    send(
        &mut s,
        vec![press(KeyCode::Char('j')), press(KeyCode::Char('j'))],
    );
    assert_eq!(s.view.shape_sel, Some(1));
    let second = s.work.shape_info["rms_norm"][1].id;
    let fx = send(&mut s, vec![press(KeyCode::Char('p'))]);
    assert_eq!(profile_fx(&fx), ("rms_norm".into(), 1, second));
    // Counters not permitted: one line, nothing else changes.
    let (n, logn, mlog) = (
        s.work.journal.len(),
        s.work.ui_log.len(),
        s.work.model.log.len(),
    );
    send(
        &mut s,
        vec![AppEvent::Profiled {
            op: "rms_norm".into(),
            rev: 1,
            result: Err("ncu is not permitted to read the GPU's performance counters on this machine (ERR_NVGPUCTRPERM); event-timing gauges still work".into()),
        }],
    );
    assert_eq!(s.work.journal.len(), n);
    assert_eq!(s.work.model.log.len(), mlog);
    assert_eq!(s.work.ui_log.len(), logn + 1);
    assert!(
        s.work
            .ui_log
            .last()
            .unwrap()
            .text
            .starts_with("cannot profile rms_norm v1: ncu is not permitted")
    );
    assert_eq!(
        s.work.model.ops["rms_norm"]
            .rev(1)
            .unwrap()
            .profile
            .as_deref(),
        Some(&prof),
        "the earlier profile stays"
    );
    assert!(s.work.profiling.is_none());
    // Changing the operator forgets the shape.
    s.view.focus = PaneId::Operators;
    send(&mut s, vec![press(KeyCode::Char('g'))]);
    assert_eq!(s.view.shape_sel, None);
}

#[test]
fn a_profile_reaches_the_running_agent_of_its_operator() {
    let mut s = fixture_state(vec![]);
    let fx = send(&mut s, vec![press(KeyCode::Char('a'))]);
    assert!(matches!(fx.as_slice(), [Effect::StartAgent { .. }]));
    let fx = send(
        &mut s,
        vec![AppEvent::Profiled {
            op: "rms_norm".into(),
            rev: 1,
            result: Ok(Box::new(crate::profile::fixture("rms_norm", 1, 3))),
        }],
    );
    let [Effect::Agent(_, AgentCtl::Profile(note))] = &fx[..] else {
        panic!("{fx:?}")
    };
    assert_eq!(note.rev, 1);
    assert!(note.rules.iter().any(|r| r == "low_occupancy"));
}

#[test]
fn profiling_without_a_gpu_or_ncu_is_one_line_and_nothing_else() {
    let mut s = fixture_state(vec![]);
    for (worker, ncu, says) in [
        (
            WorkerState::NoGpu("no CUDA driver".into()),
            None,
            "cannot profile rms_norm v1: no GPU: browse and replay only (no CUDA driver)",
        ),
        (
            s.work.worker.clone(),
            Some(Err(
                "ncu (Nsight Compute) not found on PATH or in the CUDA installation: deep profiles are unavailable; event-timing gauges still work".to_string(),
            )),
            "cannot profile rms_norm v1: ncu (Nsight Compute) not found",
        ),
    ] {
        s.work.worker = worker;
        s.work.ncu = ncu;
        let (n, logn, mlog) = (s.work.journal.len(), s.work.ui_log.len(), s.work.model.log.len());
        let fx = send(&mut s, vec![press(KeyCode::Char('p'))]);
        assert!(fx.is_empty(), "{fx:?}");
        assert_eq!(s.work.ui_log.len(), logn + 1);
        assert!(s.work.ui_log.last().unwrap().text.starts_with(says), "{:?}", s.work.ui_log.last());
        assert_eq!((s.work.journal.len(), s.work.model.log.len()), (n, mlog));
        assert!(s.work.profiling.is_none());
    }
}
