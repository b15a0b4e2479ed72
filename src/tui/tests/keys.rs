//! Keys on the main screen: accept, reject, steer, quit, navigation, phase filter, diff modes.

use super::{fixture_state, last_event, screen, send, tuner_v3, typed};
use crate::contract::protocol::Verdict;
use crate::session::fixtures::revision;
use crate::session::{Author, DecidedBy, Decision, SessionEvent};
use crate::tui::event::{AppEvent, Effect, press, press_ctrl};
use crate::tui::view_state::{Modal, PaneId};
use crossterm::event::KeyCode;

#[test]
fn accept_makes_the_incumbent_and_is_recorded() {
    let mut s = fixture_state(tuner_v3());
    s.view.focus = PaneId::Revisions;
    send(&mut s, vec![press(KeyCode::Char('G'))]);
    assert_eq!(s.selected_rev().unwrap().rev, 3);
    let fx = send(&mut s, vec![press(KeyCode::Char('y'))]);
    // The accepted revision becomes the standing's incumbent; measured quick, it is measured
    // again in full in the background (its record is replaced when that ends).
    let [
        Effect::RecordStanding {
            hardware, update, ..
        },
        Effect::Measure {
            rev: 3, full: true, ..
        },
    ] = &fx[..]
    else {
        panic!("{fx:?}");
    };
    assert_eq!(
        (hardware.as_str(), update.op.as_str()),
        ("H200", "rms_norm")
    );
    assert_eq!(
        update.record.origin,
        crate::standing::Origin::Session {
            session: "unrecorded session".into(),
            rev: 3
        }
    );
    assert_eq!(update.record.measurement.mode, "quick");
    assert_eq!(update.source, "// v3\nint x;\n");
    let e = s.work.standing.view.entry("rms_norm").unwrap();
    assert_eq!(e.layer, crate::standing::Layer::Workspace);
    // Quick, the record names the incumbent but its figure does not count until the full
    // measurement replaces it (nor after the app closed first: U measures it then).
    assert_eq!(
        e.stale,
        vec![crate::standing::Stale::NotFull {
            mode: "quick".into()
        }]
    );
    assert_eq!(s.work.standing.run, Some((0, 1)));
    assert_eq!(
        s.work.journal[s.work.journal.len() - 2].event,
        SessionEvent::Decision {
            op: "rms_norm".into(),
            rev: 3,
            decision: Decision::Accepted,
            by: DecidedBy::Human
        }
    );
    assert_eq!(s.work.model.ops["rms_norm"].incumbent, Some(3));
    let sc = screen(&s, 200, 50);
    assert!(sc.contains("★ v3"), "{sc}");
    assert!(sc.contains("◔ standing 1/1"), "{sc}");
}

/// A revision a resumed session measured in an earlier run on another GPU keeps that GPU in
/// its record (stale here) and is measured again in full; one measured in full on this GPU is
/// recorded as it is.
#[test]
fn accept_keeps_the_gpu_a_revision_was_measured_on() {
    let full = crate::session::fixtures::in_full;
    let earlier = SessionEvent::RunStart {
        tool_version: "0.1.0".into(),
        resumed: true,
        gpu: Some("NVIDIA H100 80GB HBM3".into()),
        driver: Some("12.8".into()),
        nvrtc: Some("12.8".into()),
        hardware: Some("H100".into()),
        suite: "tui-fixture".into(),
        suite_version: "1".into(),
    };
    // Accepted in the earlier run, v3's H100 figure does not count in this H200 run's header.
    let accepted = SessionEvent::Decision {
        op: "rms_norm".into(),
        rev: 3,
        decision: Decision::Accepted,
        by: DecidedBy::Human,
    };
    let s = fixture_state([vec![earlier.clone()], full(tuner_v3()), vec![accepted]].concat());
    assert_eq!(s.work.model.ops["rms_norm"].incumbent, Some(3));
    assert!(
        !matches!(
            s.work.figure("rms_norm"),
            crate::tui::workbench::Figure::Live(_)
        ),
        "{:?}",
        s.work.figure("rms_norm")
    );
    for (other_gpu, events) in [
        (true, [vec![earlier.clone()], full(tuner_v3())].concat()),
        (false, full(tuner_v3())),
    ] {
        let mut s = fixture_state(events);
        s.view.focus = PaneId::Revisions;
        send(&mut s, vec![press(KeyCode::Char('G'))]);
        let fx = send(&mut s, vec![press(KeyCode::Char('y'))]);
        let Some(Effect::RecordStanding { update, .. }) = fx.first() else {
            panic!("{fx:?}");
        };
        let again = fx.iter().any(|e| {
            matches!(
                e,
                Effect::Measure {
                    rev: 3,
                    full: true,
                    ..
                }
            )
        });
        let e = s.work.standing.view.entry("rms_norm").unwrap();
        if other_gpu {
            assert_eq!(update.record.fingerprint.gpu, "NVIDIA H100 80GB HBM3");
            assert_eq!(update.record.measurement.hardware, "H100");
            assert!(again, "{fx:?}");
            let keys: Vec<&str> = e.stale.iter().map(|x| x.key()).collect();
            assert!(keys.contains(&"gpu_differs"), "{keys:?}");
        } else {
            assert_eq!(update.record.fingerprint.gpu, "NVIDIA H200");
            assert!(!again, "{fx:?}");
            assert!(e.fresh(), "{:?}", e.stale);
        }
    }
}

#[test]
fn reject_is_recorded_and_failing_revisions_cannot_be_accepted() {
    let mut s = fixture_state(tuner_v3());
    s.view.rev_sel = 3;
    send(&mut s, vec![press(KeyCode::Char('n'))]);
    assert_eq!(
        last_event(&s),
        &SessionEvent::Decision {
            op: "rms_norm".into(),
            rev: 3,
            decision: Decision::Rejected,
            by: DecidedBy::Human
        }
    );
    assert_eq!(s.work.model.ops["rms_norm"].incumbent, Some(1));
    // v2 has a compile error: accepting it is refused, nothing recorded
    s.view.rev_sel = 2;
    let n = s.work.journal.len();
    send(&mut s, vec![press(KeyCode::Char('y'))]);
    assert_eq!(s.work.journal.len(), n);
    assert!(
        s.work
            .ui_log
            .last()
            .unwrap()
            .text
            .contains("cannot accept rms_norm v2: compile error")
    );
    // the baseline cannot be rejected
    s.view.rev_sel = 0;
    send(&mut s, vec![press(KeyCode::Char('n'))]);
    assert_eq!(s.work.journal.len(), n);
}

#[test]
fn steer_is_recorded_and_shown_in_the_log() {
    let mut s = fixture_state(vec![]);
    send(&mut s, vec![press(KeyCode::Char('s'))]);
    assert!(matches!(s.view.modal, Modal::Steer(_)));
    send(&mut s, typed("use one warp per row"));
    send(&mut s, vec![press(KeyCode::Enter)]);
    assert!(matches!(s.view.modal, Modal::None));
    assert_eq!(
        last_event(&s),
        &SessionEvent::Steer {
            op: Some("rms_norm".into()),
            text: "use one warp per row".into()
        }
    );
    assert_eq!(s.work.model.steering.len(), 2);
    assert!(screen(&s, 200, 50).contains("steer (rms_norm): use one warp per row"));
    // Esc cancels without recording
    let n = s.work.journal.len();
    send(&mut s, vec![press(KeyCode::Char('s'))]);
    send(&mut s, typed("x"));
    send(&mut s, vec![press(KeyCode::Esc)]);
    assert_eq!(s.work.journal.len(), n);
}

#[test]
fn quit_confirms_while_measuring() {
    let mut s = fixture_state(vec![]);
    let fx = send(&mut s, vec![press(KeyCode::Char('m'))]);
    let [Effect::Measure { mid, .. }] = fx[..] else {
        panic!()
    };
    assert!(send(&mut s, vec![press(KeyCode::Char('q'))]).is_empty());
    assert!(matches!(s.view.modal, Modal::ConfirmQuit));
    send(&mut s, vec![press(KeyCode::Char('n'))]);
    assert!(!s.work.quit);
    let fx = send(
        &mut s,
        vec![press(KeyCode::Char('q')), press(KeyCode::Char('y'))],
    );
    assert_eq!(fx, vec![Effect::Cancel { mid }, Effect::Quit]);
    assert!(s.work.quit);
    let mut s = fixture_state(vec![]);
    assert_eq!(
        send(&mut s, vec![press(KeyCode::Char('q'))]),
        vec![Effect::Quit]
    );
}

/// Ctrl-Z suspends from the main view and every dialog but the built-in editor (where it
/// undoes); SIGTSTP does the same.
#[test]
fn ctrl_z_and_sigtstp_suspend_except_in_the_built_in_editor() {
    let mut s = fixture_state(vec![]);
    assert_eq!(send(&mut s, vec![press_ctrl('z')]), vec![Effect::Suspend]);
    send(&mut s, vec![press(KeyCode::Char('?'))]);
    assert!(matches!(s.view.modal, Modal::Help { .. }));
    assert_eq!(send(&mut s, vec![press_ctrl('z')]), vec![Effect::Suspend]);
    assert!(
        matches!(s.view.modal, Modal::Help { .. }),
        "the dialog stays"
    );
    s.view.modal = Modal::None;
    assert_eq!(send(&mut s, vec![AppEvent::Stop]), vec![Effect::Suspend]);
    send(
        &mut s,
        vec![press(KeyCode::Char('e')), press(KeyCode::Char('x'))],
    );
    assert!(send(&mut s, vec![press_ctrl('z')]).is_empty());
    let Modal::Editor(ed) = &s.view.modal else {
        panic!("the editor stays open")
    };
    assert_eq!(ed.text(), ed.base_source, "Ctrl-Z undid the typing");
    assert!(s.work.journal.is_empty());
}

/// SIGTERM, SIGHUP, SIGINT: quit at once (running jobs cancelled and recorded so) with 128 +
/// the signal as the exit status.
#[test]
fn a_signal_quits_with_128_plus_its_number() {
    let mut s = fixture_state(vec![]);
    assert_eq!(s.work.exit_status, 0);
    let fx = send(&mut s, vec![press(KeyCode::Char('m'))]);
    let [Effect::Measure { mid, .. }] = fx[..] else {
        panic!("{fx:?}")
    };
    let fx = send(&mut s, vec![AppEvent::Signal("SIGTERM", 15)]);
    assert_eq!(fx, vec![Effect::Cancel { mid }, Effect::Quit]);
    assert!(s.work.quit);
    assert_eq!(s.work.exit_status, 143);
    assert!(matches!(
        last_event(&s),
        SessionEvent::MeasureDone {
            verdict: Verdict::Cancelled,
            ..
        }
    ));
    let mut s = fixture_state(vec![]);
    send(&mut s, vec![AppEvent::Signal("SIGHUP", 1)]);
    assert_eq!((s.work.quit, s.work.exit_status), (true, 129));
}

#[test]
fn navigation_phase_filter_and_diff_modes() {
    let mut s = fixture_state(tuner_v3());
    let before = s.selected_op();
    send(&mut s, vec![press(KeyCode::Char('P'))]);
    assert_eq!(s.view.phase, crate::suite::PhaseFilter::Prefill);
    assert_eq!(
        s.selected_op(),
        before,
        "rms_norm runs in prefill: stays selected"
    );
    send(
        &mut s,
        vec![press(KeyCode::Char('P')), press(KeyCode::Char('P'))],
    );
    assert_eq!(s.view.phase, crate::suite::PhaseFilter::All);
    send(&mut s, vec![press(KeyCode::Char('g'))]);
    assert_eq!(s.view.op_sel, 0);
    send(&mut s, vec![press(KeyCode::Tab)]);
    assert_eq!(s.view.focus, PaneId::Revisions);
    assert!(
        super::keymap::key_bar(&s).iter().any(|(k, _)| *k == "y"),
        "hints come from the focused pane"
    );
    send(
        &mut s,
        vec![press(KeyCode::BackTab), press(KeyCode::Char('G'))],
    );
    let ops = s.visible_ops();
    assert_eq!(s.selected_op().as_deref(), ops.last().map(|x| x.as_str()));
    let i = ops.iter().position(|o| o == "rms_norm").unwrap();
    s.view.op_sel = i;
    s.view.rev_sel = 3;
    s.refresh();
    assert!(
        s.view.diff.title.contains("vs v1 (parent)"),
        "{}",
        s.view.diff.title
    );
    send(&mut s, vec![press(KeyCode::Char('d'))]);
    assert!(
        s.view.diff.title.contains("v3 vs v1 (incumbent)"),
        "{}",
        s.view.diff.title
    );
    send(&mut s, vec![press(KeyCode::Char('f'))]);
    assert!(
        s.view.diff.title.contains("full source"),
        "{}",
        s.view.diff.title
    );
    let fx = send(&mut s, vec![press(KeyCode::Char('a'))]);
    assert!(
        s.work
            .ui_log
            .last()
            .unwrap()
            .text
            .contains("agent: tuner on rms_norm"),
        "{:?}",
        s.work.ui_log.last()
    );
    assert!(matches!(fx.as_slice(), [Effect::StartAgent { op, .. }] if op == "rms_norm"));
}

/// An operator with revisions shows what happened to it: `pending` while a revision waits for
/// a decision, `tried` once decided without an improvement.
#[test]
fn operators_with_revisions_are_not_untouched() {
    let s = fixture_state(vec![revision(
        "silu_and_mul",
        1,
        Some(0),
        Author::Human,
        "hand edit",
        "// edit\n",
    )]);
    assert_eq!(
        s.work.model.ops["silu_and_mul"].status(),
        crate::session::OpStatus::Pending
    );
    let s = fixture_state(vec![
        revision(
            "silu_and_mul",
            1,
            Some(0),
            Author::Human,
            "hand edit",
            "// edit\n",
        ),
        SessionEvent::Decision {
            op: "silu_and_mul".into(),
            rev: 1,
            decision: Decision::Rejected,
            by: DecidedBy::Human,
        },
    ]);
    assert_eq!(
        s.work.model.ops["silu_and_mul"].status(),
        crate::session::OpStatus::Tried
    );
    let text = screen(&s, 200, 50);
    assert!(text.contains("○ tried"), "{text}");
}
