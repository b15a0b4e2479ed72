use super::app::*;
use super::highlight::Highlighter;
use super::theme::Theme;
use super::view;
use crate::engine::client::JobEvent;
use crate::engine::protocol::{Diagnostic, Event, Verdict};
use crate::session::fixtures::*;
use crate::session::{Author, DecidedBy, Decision, Model, RevVerdict, SessionEvent};
use crossterm::event::KeyCode;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::sync::Arc;

/// The fixture state: the fixture suite, the demo session, a GPU present, rms_norm selected.
fn fixture_state(extra: Vec<SessionEvent>) -> AppState {
    let suite = Arc::new(fixture_suite());
    let mut ev = demo_events(&suite);
    ev.extend(extra);
    let model = Model::from_records(&suite, &records(ev));
    let hw = suite.hardware("H200").ok().cloned();
    let mut s = AppState::new(
        suite,
        model,
        Theme::builtin("dark", true).unwrap(),
        hw,
        std::env::temp_dir().join("atrex-tui-test-kernels"),
    );
    s.worker = WorkerState::Ready {
        gpu: "NVIDIA H200".into(),
        sm_clock_mhz: 1980,
    };
    let i = s
        .visible_ops()
        .iter()
        .position(|o| o == "rms_norm")
        .unwrap();
    s.op_sel = i;
    s.rev_sel = 1;
    s.refresh();
    s
}

fn tuner_v3() -> Vec<SessionEvent> {
    let mut v = vec![revision(
        "rms_norm",
        3,
        Some(1),
        Author::Tuner,
        "MAX_THREADS 256",
        "// v3\nint x;\n",
    )];
    v.extend(measured(
        "rms_norm",
        3,
        5,
        &[
            (0, 0.7),
            (1, 0.72),
            (2, 0.74),
            (3, 0.8),
            (4, 0.81),
            (5, 0.9),
        ],
    ));
    v
}

fn render(s: &AppState, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| view::draw(f, s)).unwrap();
    t
}

fn screen(s: &AppState, w: u16, h: u16) -> String {
    render(s, w, h).backend().to_string()
}

fn send(s: &mut AppState, evs: Vec<AppEvent>) -> Vec<Effect> {
    evs.into_iter().flat_map(|e| update(s, e)).collect()
}

fn typed(text: &str) -> Vec<AppEvent> {
    text.chars().map(|c| press(KeyCode::Char(c))).collect()
}

fn last_event(s: &AppState) -> &SessionEvent {
    &s.journal.last().expect("an event was recorded").event
}

#[test]
fn snapshot_main_80x24() {
    let s = fixture_state(vec![]);
    insta::assert_snapshot!("main_80x24", screen(&s, 80, 24));
}

#[test]
fn snapshot_main_200x50() {
    let s = fixture_state(vec![]);
    insta::assert_snapshot!("main_200x50", screen(&s, 200, 50));
}

#[test]
fn snapshot_help_overlay() {
    let mut s = fixture_state(vec![]);
    send(&mut s, vec![press(KeyCode::Char('?'))]);
    let out = screen(&s, 100, 40);
    for (_, k, _) in super::keymap::help_rows() {
        assert!(out.contains(k), "help lacks {k}");
    }
    insta::assert_snapshot!("help_100x40", out);
}

#[test]
fn snapshot_diff_pane_with_a_compile_error() {
    let mut s = fixture_state(vec![]);
    s.rev_sel = 2; // v2: compile error, diff against v1
    s.refresh();
    let mut t = Terminal::new(TestBackend::new(90, 16)).unwrap();
    t.draw(|f| view::draw_diff(f, f.area(), &s)).unwrap();
    let out = t.backend().to_string();
    assert!(out.contains("▲ error (line 84)"), "{out}");
    assert!(out.contains("+ this is not C++"), "{out}");
    insta::assert_snapshot!("diff_pane", out);
}

#[test]
fn snapshot_gauges_pane() {
    let s = fixture_state(vec![]);
    let mut t = Terminal::new(TestBackend::new(70, 30)).unwrap();
    t.draw(|f| view::draw_gauges(f, f.area(), &s)).unwrap();
    let out = t.backend().to_string();
    assert!(out.contains("roofline · H200"), "{out}");
    assert!(out.contains("0.560"), "{out}");
    insta::assert_snapshot!("gauges_pane", out);
}

#[test]
fn snapshot_replay_bar() {
    let suite = Arc::new(fixture_suite());
    let recs = records(demo_events(&suite));
    let mut s = AppState::new(
        suite.clone(),
        Model::new(&suite),
        Theme::builtin("dark", true).unwrap(),
        suite.hardware("H200").ok().cloned(),
        std::env::temp_dir(),
    );
    s.worker = WorkerState::NoGpu("none".into());
    s.start_replay("demo.jsonl".into(), recs, vec![]);
    send(
        &mut s,
        vec![press(KeyCode::Char(',')), press(KeyCode::Char(','))],
    );
    let out = screen(&s, 120, 30);
    assert!(out.contains("no GPU: browse and replay only"), "{out}");
    assert!(out.contains("event 32/34"), "{out}");
    insta::assert_snapshot!("replay_120x30", out);
}

#[test]
fn light_theme_and_256_colours_render() {
    let mut s = fixture_state(vec![]);
    s.theme = Theme::builtin("light", false).unwrap();
    let t = render(&s, 80, 24);
    let cell = &t.backend().buffer()[(0, 0)];
    assert!(
        matches!(cell.bg, ratatui::style::Color::Indexed(_)),
        "{cell:?}"
    );
}

#[test]
fn accept_makes_the_incumbent_and_is_recorded() {
    let mut s = fixture_state(tuner_v3());
    s.focus = PaneId::Revisions;
    send(&mut s, vec![press(KeyCode::Char('G'))]);
    assert_eq!(s.selected_rev().unwrap().rev, 3);
    let fx = send(&mut s, vec![press(KeyCode::Char('y'))]);
    assert!(fx.is_empty());
    assert_eq!(
        last_event(&s),
        &SessionEvent::Decision {
            op: "rms_norm".into(),
            rev: 3,
            decision: Decision::Accepted,
            by: DecidedBy::Human
        }
    );
    assert_eq!(s.model.ops["rms_norm"].incumbent, Some(3));
    assert!(screen(&s, 200, 50).contains("★ v3"));
}

#[test]
fn reject_is_recorded_and_failing_revisions_cannot_be_accepted() {
    let mut s = fixture_state(tuner_v3());
    s.rev_sel = 3;
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
    assert_eq!(s.model.ops["rms_norm"].incumbent, Some(1));
    // v2 has a compile error: accepting it is refused, nothing recorded
    s.rev_sel = 2;
    let n = s.journal.len();
    send(&mut s, vec![press(KeyCode::Char('y'))]);
    assert_eq!(s.journal.len(), n);
    assert!(
        s.ui_log
            .last()
            .unwrap()
            .text
            .contains("cannot accept rms_norm v2: compile error")
    );
    // the baseline cannot be rejected
    s.rev_sel = 0;
    send(&mut s, vec![press(KeyCode::Char('n'))]);
    assert_eq!(s.journal.len(), n);
}

#[test]
fn steer_is_recorded_and_shown_in_the_log() {
    let mut s = fixture_state(vec![]);
    send(&mut s, vec![press(KeyCode::Char('s'))]);
    assert!(matches!(s.modal, Modal::Steer(_)));
    send(&mut s, typed("use one warp per row"));
    send(&mut s, vec![press(KeyCode::Enter)]);
    assert!(matches!(s.modal, Modal::None));
    assert_eq!(
        last_event(&s),
        &SessionEvent::Steer {
            op: Some("rms_norm".into()),
            text: "use one warp per row".into()
        }
    );
    assert_eq!(s.model.steering.len(), 2);
    assert!(screen(&s, 200, 50).contains("steer (rms_norm): use one warp per row"));
    // Esc cancels without recording
    let n = s.journal.len();
    send(&mut s, vec![press(KeyCode::Char('s'))]);
    send(&mut s, typed("x"));
    send(&mut s, vec![press(KeyCode::Esc)]);
    assert_eq!(s.journal.len(), n);
}

#[test]
fn built_in_edit_saves_a_human_revision_measures_it_and_shows_compile_errors() {
    let mut s = fixture_state(vec![]);
    s.rev_sel = 1;
    send(&mut s, vec![press(KeyCode::Char('e'))]);
    assert!(matches!(s.modal, Modal::Editor(_)));
    send(&mut s, vec![press_ctrl('s')]);
    assert!(s.journal.is_empty(), "unchanged text is not saved");
    send(&mut s, vec![press(KeyCode::Char('g'))]); // the editor takes keys as text
    send(&mut s, typed("oops "));
    let fx = send(&mut s, vec![press_ctrl('s')]);
    let src = match &s.journal[0].event {
        SessionEvent::Revision {
            op,
            rev,
            parent,
            author,
            via,
            source,
            ..
        } => {
            assert_eq!(
                (op.as_str(), *rev, *parent, author, via.as_deref()),
                ("rms_norm", 3, Some(1), &Author::Human, Some("editor"))
            );
            source.clone()
        }
        e => panic!("{e:?}"),
    };
    assert!(src.starts_with("goops /* atrex:plan"), "{}", &src[..30]);
    let mid = match &s.journal[1].event {
        SessionEvent::MeasureStart { op, rev, mid, .. } => {
            assert_eq!((op.as_str(), *rev), ("rms_norm", 3));
            *mid
        }
        e => panic!("{e:?}"),
    };
    assert_eq!(
        fx,
        vec![Effect::Measure {
            op: "rms_norm".into(),
            rev: 3,
            mid,
            source: src
        }]
    );
    assert_eq!(s.selected_rev().unwrap().rev, 3);
    assert_eq!(s.selected_rev().unwrap().verdict(), RevVerdict::Measuring);
    // the worker reports a compile error on line 1
    send(
        &mut s,
        vec![
            AppEvent::Job {
                mid,
                event: JobEvent::Worker(Event::Progress {
                    id: 9,
                    stage: "compile".into(),
                    shape: None,
                    done: 0,
                    total: 6,
                }),
            },
            AppEvent::Job {
                mid,
                event: JobEvent::Worker(Event::Compiled {
                    id: 9,
                    which: "candidate".into(),
                    ok: false,
                    cached: false,
                    ms: 120.0,
                    diagnostics: vec![Diagnostic {
                        line: 1,
                        severity: "error".into(),
                        msg: "identifier \"goops\" is undefined".into(),
                    }],
                    log: String::new(),
                    resources: Default::default(),
                }),
            },
            AppEvent::Job {
                mid,
                event: JobEvent::Worker(Event::Done {
                    id: 9,
                    verdict: Verdict::CompileError,
                    message: None,
                }),
            },
        ],
    );
    assert!(s.jobs.is_empty());
    assert_eq!(
        s.model.ops["rms_norm"].rev(3).unwrap().verdict(),
        RevVerdict::CompileError
    );
    let out = screen(&s, 120, 40);
    assert!(
        out.contains("line 1: error: identifier \"goops\" is undefined"),
        "{out}"
    );
    // closing the editor shows the diagnostic inline in the diff
    send(&mut s, vec![press(KeyCode::Esc)]);
    assert!(matches!(s.modal, Modal::None));
    assert!(
        s.diff
            .lines
            .iter()
            .any(|l| l.to_string().contains("▲ error (line 1)"))
    );
}

#[test]
fn edit_without_a_gpu_records_but_does_not_measure() {
    let mut s = fixture_state(vec![]);
    s.worker = WorkerState::NoGpu("no driver".into());
    send(
        &mut s,
        vec![
            press(KeyCode::Char('e')),
            press(KeyCode::Char('x')),
            press_ctrl('s'),
        ],
    );
    assert_eq!(s.journal.len(), 1);
    assert!(matches!(last_event(&s), SessionEvent::Revision { .. }));
    assert!(s.ui_log.last().unwrap().text.contains("no GPU"));
    let fx = send(&mut s, vec![press(KeyCode::Esc), press(KeyCode::Char('m'))]);
    assert!(fx.is_empty());
}

#[test]
fn external_edit_records_and_measures_every_save() {
    let mut s = fixture_state(vec![]);
    s.rev_sel = 1;
    let fx = send(&mut s, vec![press(KeyCode::Char('E'))]);
    let path = match &fx[..] {
        [Effect::ExternalEdit { op, path, content }] => {
            assert_eq!(op, "rms_norm");
            assert!(path.ends_with("rms_norm/v1.cu"), "{path:?}");
            assert_eq!(content, &s.model.ops["rms_norm"].rev(1).unwrap().source);
            path.clone()
        }
        other => panic!("{other:?}"),
    };
    let fx = send(
        &mut s,
        vec![AppEvent::FileChanged {
            path: path.clone(),
            content: Ok("// saved once\n".into()),
        }],
    );
    assert!(
        matches!(&fx[..], [Effect::Measure { rev: 3, .. }]),
        "{fx:?}"
    );
    assert!(
        matches!(&s.journal[0].event, SessionEvent::Revision { rev: 3, parent: Some(1), via: Some(v), .. } if v == "external")
    );
    // same content again: nothing; new content: v4 from v3
    assert!(
        send(
            &mut s,
            vec![AppEvent::FileChanged {
                path: path.clone(),
                content: Ok("// saved once\n".into())
            }]
        )
        .is_empty()
    );
    let fx = send(
        &mut s,
        vec![AppEvent::FileChanged {
            path,
            content: Ok("// saved twice\n".into()),
        }],
    );
    assert!(
        matches!(&fx[..], [Effect::Measure { rev: 4, .. }]),
        "{fx:?}"
    );
    assert_eq!(s.model.ops["rms_norm"].rev(4).unwrap().parent, Some(3));
}

#[test]
fn measure_streams_results_into_the_state() {
    let mut s = fixture_state(vec![]);
    s.rev_sel = 0;
    let fx = send(&mut s, vec![press(KeyCode::Char('m'))]);
    let [Effect::Measure { mid, rev: 0, .. }] = fx[..] else {
        panic!("{fx:?}")
    };
    send(
        &mut s,
        vec![AppEvent::Job {
            mid,
            event: JobEvent::Worker(Event::ShapeDone {
                id: 1,
                result: shape_result(0, Some(0.9), Verdict::Pass, 0.01),
            }),
        }],
    );
    assert_eq!(
        s.model.ops["rms_norm"].status(),
        crate::session::OpStatus::Measuring
    );
    assert!(screen(&s, 200, 50).contains("◔ measuring rms_norm v0"));
    send(
        &mut s,
        vec![AppEvent::Job {
            mid,
            event: JobEvent::Worker(Event::Done {
                id: 1,
                verdict: Verdict::Pass,
                message: None,
            }),
        }],
    );
    assert_eq!(
        s.model.ops["rms_norm"].rev(0).unwrap().verdict(),
        RevVerdict::Score(0.9)
    );
    // a lost worker ends the job with an error recorded
    let fx = send(&mut s, vec![press(KeyCode::Char('m'))]);
    let [Effect::Measure { mid, .. }] = fx[..] else {
        panic!()
    };
    send(
        &mut s,
        vec![AppEvent::Job {
            mid,
            event: JobEvent::WorkerLost {
                verdict: Verdict::Timeout,
                message: "watchdog".into(),
            },
        }],
    );
    assert_eq!(
        s.model.ops["rms_norm"].rev(0).unwrap().verdict(),
        RevVerdict::Failed("timeout".into())
    );
}

#[test]
fn quit_confirms_while_measuring() {
    let mut s = fixture_state(vec![]);
    let fx = send(&mut s, vec![press(KeyCode::Char('m'))]);
    let [Effect::Measure { mid, .. }] = fx[..] else {
        panic!()
    };
    assert!(send(&mut s, vec![press(KeyCode::Char('q'))]).is_empty());
    assert!(matches!(s.modal, Modal::ConfirmQuit));
    send(&mut s, vec![press(KeyCode::Char('n'))]);
    assert!(!s.quit);
    let fx = send(
        &mut s,
        vec![press(KeyCode::Char('q')), press(KeyCode::Char('y'))],
    );
    assert_eq!(fx, vec![Effect::Cancel { mid }, Effect::Quit]);
    assert!(s.quit);
    let mut s = fixture_state(vec![]);
    assert_eq!(
        send(&mut s, vec![press(KeyCode::Char('q'))]),
        vec![Effect::Quit]
    );
}

#[test]
fn navigation_phase_filter_and_diff_modes() {
    let mut s = fixture_state(tuner_v3());
    let before = s.selected_op();
    send(&mut s, vec![press(KeyCode::Char('P'))]);
    assert_eq!(s.phase, crate::suite::PhaseFilter::Prefill);
    assert_eq!(
        s.selected_op(),
        before,
        "rms_norm runs in prefill: stays selected"
    );
    send(
        &mut s,
        vec![press(KeyCode::Char('P')), press(KeyCode::Char('P'))],
    );
    assert_eq!(s.phase, crate::suite::PhaseFilter::All);
    send(&mut s, vec![press(KeyCode::Char('g'))]);
    assert_eq!(s.op_sel, 0);
    send(&mut s, vec![press(KeyCode::Tab)]);
    assert_eq!(s.focus, PaneId::Revisions);
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
    s.op_sel = i;
    s.rev_sel = 3;
    s.refresh();
    assert!(s.diff.title.contains("vs v1 (parent)"), "{}", s.diff.title);
    send(&mut s, vec![press(KeyCode::Char('d'))]);
    assert!(
        s.diff.title.contains("v3 vs v1 (incumbent)"),
        "{}",
        s.diff.title
    );
    send(&mut s, vec![press(KeyCode::Char('f'))]);
    assert!(s.diff.title.contains("full source"), "{}", s.diff.title);
    let fx = send(&mut s, vec![press(KeyCode::Char('a'))]);
    assert!(
        s.ui_log
            .last()
            .unwrap()
            .text
            .contains("agent: tuner on rms_norm"),
        "{:?}",
        s.ui_log.last()
    );
    assert!(matches!(fx.as_slice(), [Effect::StartAgent { op, .. }] if op == "rms_norm"));
}

#[test]
fn the_agent_starts_streams_takes_decisions_steering_dropout_and_stops() {
    let mut s = fixture_state(tuner_v3());
    // Without a GPU it refuses.
    s.worker = WorkerState::NoGpu("none".into());
    assert!(send(&mut s, vec![press(KeyCode::Char('a'))]).is_empty());
    assert!(s.ui_log.last().unwrap().text.contains("cannot start"));
    s.worker = WorkerState::Ready {
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
    assert!(s.agent.as_ref().is_some_and(|a| a.running));
    // Streaming text shows in the diff pane; a revision from the agent is selected.
    send(
        &mut s,
        vec![AppEvent::Agent(AgentMsg::Stream(
            "Hypothesis: wider loads".into(),
        ))],
    );
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
    send(&mut s, vec![AppEvent::Agent(AgentMsg::Record(ev))]);
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
        send(&mut s, vec![AppEvent::Agent(AgentMsg::Record(e))]);
    }
    send(
        &mut s,
        vec![AppEvent::Agent(AgentMsg::Record(
            SessionEvent::AgentState {
                state: "waiting".into(),
                reason: Some("v4: accept (y), reject (n) or steer (s)".into()),
                op: Some("rms_norm".into()),
                masked: vec![],
            },
        ))],
    );
    assert!(screen(&s, 200, 50).contains("tuner on rms_norm: waiting"));
    // y decides for the agent too.
    s.focus = PaneId::Revisions;
    let fx = send(&mut s, vec![press(KeyCode::Char('y'))]);
    assert_eq!(
        fx,
        vec![Effect::Agent(AgentCtl::Decided {
            rev: 4,
            decision: Decision::Accepted
        })]
    );
    // Steering goes to the session and to the agent.
    send(&mut s, vec![press(KeyCode::Char('s'))]);
    let mut evs = typed("try two rows per warp");
    evs.push(press(KeyCode::Enter));
    let fx = send(&mut s, evs);
    assert_eq!(
        fx,
        vec![Effect::Agent(AgentCtl::Steer(
            "try two rows per warp".into()
        ))]
    );
    assert!(matches!(last_event(&s), SessionEvent::Steer { .. }));
    assert_eq!(
        send(&mut s, vec![press(KeyCode::Char('x'))]),
        vec![Effect::Agent(AgentCtl::Dropout)]
    );
    // A dropout shows in the header and the log.
    send(
        &mut s,
        vec![AppEvent::Agent(AgentMsg::Record(
            SessionEvent::AgentState {
                state: "dropout".into(),
                reason: Some("asked by the engineer: 1 of 3 history entries masked (v3)".into()),
                op: Some("rms_norm".into()),
                masked: vec![3],
            },
        ))],
    );
    assert_eq!(s.model.agent_masked, vec![3]);
    assert!(screen(&s, 200, 50).contains("(masked)"));
    assert!(screen(&s, 200, 50).contains("dropout (asked by the engineer"));
    assert_eq!(
        send(&mut s, vec![press(KeyCode::Char('a'))]),
        vec![Effect::Agent(AgentCtl::Stop)]
    );
    send(
        &mut s,
        vec![AppEvent::Agent(AgentMsg::Finished(
            "stopped by the engineer".into(),
        ))],
    );
    assert!(!s.agent.as_ref().unwrap().running);
    assert!(
        s.ui_log
            .last()
            .unwrap()
            .text
            .contains("agent finished: stopped by the engineer")
    );
}

#[test]
fn replay_steps_seek_and_rebuild_from_events_alone() {
    let suite = Arc::new(fixture_suite());
    let recs = records(demo_events(&suite));
    let mut s = AppState::new(
        suite.clone(),
        Model::new(&suite),
        Theme::builtin("dark", true).unwrap(),
        None,
        std::env::temp_dir(),
    );
    s.start_replay("demo".into(), recs.clone(), vec![]);
    assert_eq!(s.replay.as_ref().unwrap().pos, recs.len());
    for (keys, pos) in [
        (vec![','], recs.len() - 1),
        (vec!['[', '['], recs.len() - 21),
        (vec!['.'], recs.len() - 20),
        (vec!['0'], 0),
        (vec!['$'], recs.len()),
    ] {
        send(
            &mut s,
            keys.into_iter().map(|c| press(KeyCode::Char(c))).collect(),
        );
        assert_eq!(s.replay.as_ref().unwrap().pos, pos);
        assert!(
            s.model == Model::from_records(&suite, &recs[..pos]),
            "state at {pos} differs from a rebuild"
        );
    }
    send(
        &mut s,
        vec![press(KeyCode::Char('0')), press(KeyCode::Char('r'))],
    );
    let pos = s.replay.as_ref().unwrap().pos;
    assert!(matches!(
        recs[pos - 1].event,
        SessionEvent::Revision { rev: 0, .. }
    ));
    // read-only: decisions are refused, play starts a timer
    let n = s.model.applied;
    send(&mut s, vec![press(KeyCode::Char('y'))]);
    assert_eq!(s.model.applied, n);
    let fx = send(&mut s, vec![press(KeyCode::Char(' '))]);
    assert!(matches!(fx[..], [Effect::Playback(Some(_))]));
    let before = s.replay.as_ref().unwrap().pos;
    send(&mut s, vec![AppEvent::Tick]);
    assert_eq!(s.replay.as_ref().unwrap().pos, before + 1);
    assert!(s.journal.is_empty(), "replay writes nothing");
}

#[test]
fn highlighting_colours_cuda_as_cpp() {
    let h = Highlighter::new("OneHalfDark", true).unwrap();
    let lines = h.highlight("__global__ void k(int* x) { x[0] = 1; }\n");
    let colours: std::collections::BTreeSet<String> = lines[0]
        .iter()
        .map(|(s, _)| format!("{:?}", s.fg))
        .collect();
    assert!(colours.len() >= 3, "{lines:?}");
    assert!(
        Highlighter::new("no such theme", true)
            .unwrap_err()
            .contains("OneHalfDark")
    );
}

#[test]
fn changed_words_are_emphasised() {
    let t = Theme::builtin("dark", true).unwrap();
    let old = "int a = 1;\nint b = 2;\n";
    let new = "int a = 1;\nint b = 3;\n";
    let hl = |c: &str| {
        Arc::new(
            c.lines()
                .map(|l| vec![(ratatui::style::Style::default(), l.to_string())])
                .collect::<Vec<_>>(),
        )
    };
    let v = super::highlight::build_diff(
        "x".into(),
        Some(old),
        new,
        Some(&hl(old)),
        &hl(new),
        false,
        &[],
        &t,
    );
    assert_eq!((v.added, v.removed), (1, 1));
    let plus = v
        .lines
        .iter()
        .find(|l| l.to_string().contains("+ int b = 3;"))
        .unwrap();
    let emph: Vec<&str> = plus
        .spans
        .iter()
        .filter(|s| s.style.bg == Some(t.added_emph_bg))
        .map(|s| s.content.as_ref())
        .collect();
    assert_eq!(emph, vec!["3;"]);
}

/// Frame timing: `cargo test --release --lib frame_timing -- --ignored --nocapture`.
#[test]
#[ignore]
fn frame_timing() {
    use crate::suite::{Suite, SuiteSource};
    let t0 = std::time::Instant::now();
    let suite = Arc::new(Suite::load(SuiteSource::Embedded).unwrap());
    let model = Model::new(&suite);
    let hw = suite.hardware("H200").ok().cloned();
    let s = AppState::new(
        suite.clone(),
        model,
        Theme::builtin("dark", true).unwrap(),
        hw,
        std::env::temp_dir(),
    );
    let first = render(&s, 200, 50);
    let first_ms = t0.elapsed().as_secs_f64() * 1e3;
    drop(first);
    // 1,000 revisions with every shape measured, spread over the operators
    let mut ev = Vec::new();
    let ops: Vec<&crate::suite::Problem> = suite.problems.iter().collect();
    let mut mid = 0;
    for i in 0..1000u32 {
        let p = ops[i as usize % ops.len()];
        let rev = i / ops.len() as u32 + 1;
        ev.push(revision(
            &p.name,
            rev,
            None,
            Author::Tuner,
            "sweep",
            &format!("// {i}\n__global__ void k() {{ int x = {i}; }}\n"),
        ));
        mid += 1;
        let shapes: Vec<(u32, f64)> = p
            .shapes
            .iter()
            .map(|s| (s.id, 0.3 + (s.id % 7) as f64 * 0.05))
            .collect();
        ev.extend(measured(&p.name, rev, mid, &shapes));
    }
    let model = Model::from_records(&suite, &records(ev));
    let mut s = AppState::new(
        suite.clone(),
        model,
        Theme::builtin("dark", true).unwrap(),
        suite.hardware("H200").ok().cloned(),
        std::env::temp_dir(),
    );
    s.highlighter = Some(Arc::new(Highlighter::new("OneHalfDark", true).unwrap()));
    s.refresh();
    let big = suite
        .problems
        .iter()
        .max_by_key(|p| p.shapes.len())
        .unwrap()
        .name
        .clone();
    let i = s.visible_ops().iter().position(|o| *o == big).unwrap();
    s.op_sel = i;
    s.refresh();
    let mut term = Terminal::new(TestBackend::new(200, 50)).unwrap();
    let mut times = Vec::new();
    for _ in 0..200 {
        let t = std::time::Instant::now();
        term.draw(|f| view::draw(f, &s)).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "frame timing at 200x50: {} shapes, {} revisions: first frame {first_ms:.1} ms (suite load + state + draw); frame median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        suite.shape_count(),
        s.model
            .ops
            .values()
            .map(|o| o.revisions.len())
            .sum::<usize>(),
        times[times.len() / 2],
        times[times.len() * 99 / 100],
        times[times.len() - 1]
    );
}

fn profile_fx(fx: &[Effect]) -> (String, u32, u32) {
    match fx {
        [Effect::Profile { op, rev, shape, .. }] => (op.clone(), *rev, *shape),
        _ => panic!("not one profile effect: {fx:?}"),
    }
}

#[test]
fn p_profiles_off_the_input_loop_and_shows_the_result() {
    let mut s = fixture_state(vec![]);
    s.ncu = Some(Ok("/opt/cuda/bin/ncu".into()));
    let largest = crate::profile::largest_shape(s.suite.problem("rms_norm").unwrap()).unwrap();
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
        s.phase,
        crate::suite::PhaseFilter::All,
        "p no longer filters"
    );
    let progress = &s.ui_log.last().unwrap().text;
    assert_eq!(
        progress,
        &format!(
            "profiling rms_norm v1 on shape #{largest} under Nsight Compute (takes a few seconds)…"
        )
    );
    assert!(screen(&s, 200, 50).contains("profiling rms_norm v1"));
    // One profile at a time.
    assert!(send(&mut s, vec![press(KeyCode::Char('p'))]).is_empty());
    assert!(s.ui_log.last().unwrap().text.contains("being profiled"));
    // The result: recorded, findings in the log, gauges in the shapes pane.
    let n = s.journal.len();
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
    assert!(s.profiling.is_none());
    assert_eq!(s.journal.len(), n + 1);
    assert!(matches!(
        last_event(&s),
        SessionEvent::Profile { rev: 1, .. }
    ));
    assert_eq!(
        s.model.ops["rms_norm"].rev(1).unwrap().profile.as_deref(),
        Some(&prof)
    );
    let log: Vec<&str> = s.model.log.iter().map(|l| l.text.as_str()).collect();
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
    s.focus = PaneId::Gauges;
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
    assert_eq!(s.shape_sel, Some(1));
    let second = s.shape_info["rms_norm"][1].id;
    let fx = send(&mut s, vec![press(KeyCode::Char('p'))]);
    assert_eq!(profile_fx(&fx), ("rms_norm".into(), 1, second));
    // Counters not permitted: one line, nothing else changes.
    let (n, logn, mlog) = (s.journal.len(), s.ui_log.len(), s.model.log.len());
    send(
        &mut s,
        vec![AppEvent::Profiled {
            op: "rms_norm".into(),
            rev: 1,
            result: Err("ncu is not permitted to read the GPU's performance counters on this machine (ERR_NVGPUCTRPERM); event-timing gauges still work".into()),
        }],
    );
    assert_eq!(s.journal.len(), n);
    assert_eq!(s.model.log.len(), mlog);
    assert_eq!(s.ui_log.len(), logn + 1);
    assert!(
        s.ui_log
            .last()
            .unwrap()
            .text
            .starts_with("cannot profile rms_norm v1: ncu is not permitted")
    );
    assert_eq!(
        s.model.ops["rms_norm"].rev(1).unwrap().profile.as_deref(),
        Some(&prof),
        "the earlier profile stays"
    );
    assert!(s.profiling.is_none());
    // Changing the operator forgets the shape.
    s.focus = PaneId::Operators;
    send(&mut s, vec![press(KeyCode::Char('g'))]);
    assert_eq!(s.shape_sel, None);
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
    let [Effect::Agent(AgentCtl::Profile(note))] = &fx[..] else {
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
            s.worker.clone(),
            Some(Err(
                "ncu (Nsight Compute) not found on PATH or in the CUDA installation: deep profiles are unavailable; event-timing gauges still work".to_string(),
            )),
            "cannot profile rms_norm v1: ncu (Nsight Compute) not found",
        ),
    ] {
        s.worker = worker;
        s.ncu = ncu;
        let (n, logn, mlog) = (s.journal.len(), s.ui_log.len(), s.model.log.len());
        let fx = send(&mut s, vec![press(KeyCode::Char('p'))]);
        assert!(fx.is_empty(), "{fx:?}");
        assert_eq!(s.ui_log.len(), logn + 1);
        assert!(s.ui_log.last().unwrap().text.starts_with(says), "{:?}", s.ui_log.last());
        assert_eq!((s.journal.len(), s.model.log.len()), (n, mlog));
        assert!(s.profiling.is_none());
    }
}

#[test]
fn snapshot_gauges_pane_with_a_profile() {
    let mut s = fixture_state(vec![SessionEvent::Profile {
        op: "rms_norm".into(),
        rev: 1,
        profile: Box::new(crate::profile::fixture("rms_norm", 1, 3)),
    }]);
    s.focus = PaneId::Gauges;
    let mut t = Terminal::new(TestBackend::new(70, 30)).unwrap();
    t.draw(|f| view::draw_gauges(f, f.area(), &s)).unwrap();
    let out = t.backend().to_string();
    assert!(out.contains("profile · #3 · rms_norm_kernel"), "{out}");
    assert!(out.contains("19.1%"), "{out}");
    assert!(out.contains("of 50% · 30 reg/thread"), "{out}");
    assert!(out.contains("DRAM B/Q  0.93"), "{out}");
    assert!(out.contains("roofline · H200"), "the roofline stays: {out}");
    insta::assert_snapshot!("gauges_pane_profile", out);
    // 80×24: the profile collapses to one line and the shapes stay visible.
    let small = screen(&s, 80, 24);
    assert!(
        small.contains("ncu #3 · DRAM 16% · SM 31% · occ 19/50%"),
        "{small}"
    );
    assert!(small.contains("#0"), "{small}");
    insta::assert_snapshot!("gauges_profile_80x24", small);
}

#[test]
fn without_a_gpu_the_recorded_sessions_are_offered() {
    let dir = std::env::temp_dir().join(format!("atrex-tui-picker-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("20250101-mine.jsonl"), "{}\n{}\n").unwrap();
    std::fs::write(dir.join("current.jsonl"), "{}\n{}\n").unwrap();
    std::fs::write(dir.join("started-only.jsonl"), "{}\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "x").unwrap();
    let files = super::recorded_sessions(&dir, Some("current.jsonl"));
    let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "20250101-mine.jsonl",
            "demo-hand-edits.jsonl",
            "demo-agent-tuner.jsonl"
        ]
    );
    assert_eq!(files[0].events, Some(2));
    assert!(files[1].path.is_none() && files[1].events.unwrap() > 100);
    // Hello fails: the picker opens.
    let mut s = fixture_state(vec![]);
    s.worker = WorkerState::Starting;
    s.recorded_sessions = files;
    send(
        &mut s,
        vec![AppEvent::Hello(Err("no CUDA driver (libcuda.so.1)".into()))],
    );
    assert!(matches!(s.modal, Modal::Sessions { sel: 0 }));
    let sc = screen(&s, 80, 24);
    assert!(
        sc.contains("no GPU: browse and replay only — open a recorded session?"),
        "{sc}"
    );
    assert!(
        sc.contains("demo-agent-tuner.jsonl") && sc.contains("events"),
        "{sc}"
    );
    insta::assert_snapshot!("session_picker_80x24", sc);
    // Keys go to the picker: j moves, Enter opens in replay.
    send(
        &mut s,
        vec![press(KeyCode::Char('j')), press(KeyCode::Char('j'))],
    );
    assert!(matches!(s.modal, Modal::Sessions { sel: 2 }));
    let fx = send(&mut s, vec![press(KeyCode::Enter)]);
    let [Effect::OpenReplay(f)] = &fx[..] else {
        panic!("{fx:?}")
    };
    assert_eq!(f.name, "demo-agent-tuner.jsonl");
    assert!(matches!(s.modal, Modal::None));
    // The runtime reads it (built in) and hands it back: replay mode, as `atrex-tui replay`.
    let text = crate::session::demos::demo(&f.name).unwrap();
    let loaded = crate::session::parse_text(&f.name, text).unwrap();
    let n = loaded.records.len();
    send(
        &mut s,
        vec![AppEvent::ReplayLoaded {
            name: f.name.clone(),
            result: Ok(loaded),
        }],
    );
    let r = s.replay.as_ref().expect("replay mode");
    assert_eq!((r.pos, r.records.len()), (n, n));
    assert!(screen(&s, 120, 30).contains("replay demo-agent-tuner.jsonl"));
    // Read-only: decisions are refused.
    let before = s.model.applied;
    send(&mut s, vec![press(KeyCode::Char('y'))]);
    assert_eq!(s.model.applied, before);
    // Esc dismisses; a GPU-less hello in replay does not offer again.
    let mut s = fixture_state(vec![]);
    s.recorded_sessions = super::recorded_sessions(&dir, None);
    send(&mut s, vec![AppEvent::Hello(Err("none".into()))]);
    assert!(matches!(s.modal, Modal::Sessions { .. }));
    let fx = send(&mut s, vec![press(KeyCode::Esc)]);
    assert!(fx.is_empty());
    assert!(matches!(s.modal, Modal::None));
    assert!(s.replay.is_none());
    // Nothing recorded: no picker.
    let mut s = fixture_state(vec![]);
    send(&mut s, vec![AppEvent::Hello(Err("none".into()))]);
    assert!(matches!(s.modal, Modal::None));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Replay opens on the operator the session is about (its latest revision's), not on the
/// first operator of the suite.
#[test]
fn replay_opens_on_the_operator_of_the_latest_revision() {
    let suite = Arc::new(fixture_suite());
    let mut ev = demo_events(&suite);
    // The demo's latest revision is silu_and_mul v0; add a later rms_norm revision.
    ev.push(revision(
        "rms_norm",
        3,
        Some(1),
        Author::Human,
        "edit",
        "// v3\n",
    ));
    for (events, op, rev) in [
        (demo_events(&suite), "silu_and_mul", 0u32),
        (ev, "rms_norm", 3),
    ] {
        let mut s = AppState::new(
            suite.clone(),
            Model::new(&suite),
            Theme::builtin("dark", true).unwrap(),
            None,
            std::env::temp_dir(),
        );
        s.start_replay("demo".into(), records(events), vec![]);
        assert_eq!(s.selected_op().as_deref(), Some(op));
        let o = &s.model.ops[op];
        assert_eq!(o.revisions[s.rev_sel].rev, rev);
    }
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
        s.model.ops["silu_and_mul"].status(),
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
        s.model.ops["silu_and_mul"].status(),
        crate::session::OpStatus::Tried
    );
    let text = screen(&s, 200, 50);
    assert!(text.contains("○ tried"), "{text}");
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
    s.agent = Some(AgentView {
        op: "rms_norm".into(),
        backend: "tuner".into(),
        running: true,
        stopping: false,
        stream: String::new(),
    });
    let state = |st: &str, reason: &str| {
        AppEvent::Agent(AgentMsg::Record(SessionEvent::AgentState {
            state: st.into(),
            reason: Some(reason.into()),
            op: Some("rms_norm".into()),
            masked: vec![],
        }))
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
    s.focus = PaneId::Revisions;
    s.select_rev_number(2);
    let fx = send(&mut s, vec![press(KeyCode::Char('y'))]);
    assert_eq!(
        fx,
        vec![Effect::Agent(AgentCtl::Decided {
            rev: 4,
            decision: Decision::Accepted
        })]
    );
    assert!(
        s.model.log.iter().chain(s.ui_log.iter()).any(|l| l
            .text
            .contains("accepting rms_norm v4: the revision the agent waits on")),
        "{:?}",
        s.ui_log
    );
}

#[test]
fn snapshot_main_120x40_and_160x45() {
    let s = fixture_state(vec![]);
    insta::assert_snapshot!("main_120x40", screen(&s, 120, 40));
    insta::assert_snapshot!("main_160x45", screen(&s, 160, 45));
}

#[test]
fn snapshot_help_80x24_wraps() {
    let mut s = fixture_state(vec![]);
    send(&mut s, vec![press(KeyCode::Char('?'))]);
    let out = screen(&s, 80, 24);
    assert!(out.contains("ten items down / up"), "{out}");
    insta::assert_snapshot!("help_80x24", out);
}

/// On the real suite: operator names are whole from 120 columns up, and the diff has room for
/// 80 columns of code from 160 up.
#[test]
fn names_whole_and_the_diff_wide_enough() {
    let suite = Arc::new(crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).unwrap());
    let longest = suite
        .problems
        .iter()
        .map(|p| p.name.clone())
        .max_by_key(|n| n.len())
        .unwrap();
    let mut s = AppState::new(
        suite.clone(),
        Model::new(&suite),
        Theme::builtin("dark", true).unwrap(),
        suite.hardware("H200").ok().cloned(),
        std::env::temp_dir(),
    );
    s.op_sel = s.visible_ops().iter().position(|o| *o == longest).unwrap();
    s.refresh();
    for (w, h) in [(120u16, 40u16), (160, 45), (200, 50), (240, 60)] {
        let text = screen(&s, w, h);
        assert!(text.contains(&longest), "{w}x{h}: `{longest}` cut:\n{text}");
        let (left, _) = super::view::left_width(&s, w);
        let gauges = if w >= 200 {
            (w - left - 92).clamp(44, 70)
        } else {
            0
        };
        let diff = w - left - gauges;
        if w >= 160 {
            assert!(diff >= 92, "{w}: diff {diff} wide");
        }
    }
}

/// One recorder numbers every writer: a TUI session (a hand edit measured), continued by
/// `measure` (its Recording) and then by the headless agent (its FileSink), holds each
/// revision and measurement number once, in order, with strictly increasing `seq`.
#[test]
fn one_recorder_numbers_a_tui_session_resumed_by_measure_and_by_the_agent() {
    use crate::agent::driver::Sink;
    use crate::session::{Recording, SessionWriter};
    let mut s = fixture_state(vec![]);
    s.rev_sel = 1;
    send(&mut s, vec![press(KeyCode::Char('e'))]);
    send(&mut s, typed("x"));
    send(&mut s, vec![press_ctrl('s')]);
    let tui_mid = match &s.journal[1].event {
        SessionEvent::MeasureStart { rev: 3, mid, .. } => *mid,
        e => panic!("{e:?}"),
    };
    // The TUI's file: what the session held, then what this run recorded (as the runtime
    // writes its journal).
    let dir = std::env::temp_dir().join(format!("atrex-one-recorder-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("session.jsonl");
    let _ = std::fs::remove_file(&f);
    let mut w = SessionWriter::create(&f).unwrap();
    for r in records(demo_events(&s.suite))
        .iter()
        .chain(s.journal.iter())
    {
        w.write(r).unwrap();
    }
    drop(w);
    // `measure --session`: continues the file.
    let (w, loaded) = SessionWriter::continue_file(&f).unwrap();
    let mut rec = Recording::new(Model::from_records(&s.suite, &loaded.records), Some(w));
    let p = s.suite.problem("rms_norm").unwrap().clone();
    let v4 = rec
        .revision(
            &p,
            Author::Human,
            Some(1),
            "from a file",
            "// v4\n",
            Some("file"),
        )
        .unwrap();
    let m4 = rec.recorder.ids().next_mid();
    rec.append(SessionEvent::MeasureStart {
        op: "rms_norm".into(),
        rev: v4,
        mid: m4,
        mode: "full".into(),
    })
    .unwrap();
    assert_eq!((v4, m4), (4, tui_mid + 1));
    drop(rec);
    // `agent --session`: continues it again through its sink.
    let (w, loaded) = SessionWriter::continue_file(&f).unwrap();
    let mut sink = crate::agent::file_sink::FileSink::new(
        Recording::new(Model::from_records(&s.suite, &loaded.records), Some(w)),
        false,
    );
    let (v5, m5) = (sink.alloc_rev("rms_norm"), sink.alloc_mid());
    assert_eq!((v5, m5), (5, tui_mid + 2));
    sink.record(revision(
        "rms_norm",
        v5,
        Some(4),
        Author::Tuner,
        "tuned",
        "// v5\n",
    ));
    assert!(sink.errors.is_empty(), "{:?}", sink.errors);
    drop(sink);
    // The file parses (seq strictly increasing) and holds each number once.
    let loaded = crate::session::load(&f).unwrap();
    let mut revs = Vec::new();
    let mut mids = Vec::new();
    for r in &loaded.records {
        match &r.event {
            SessionEvent::Revision { op, rev, .. } if op == "rms_norm" => revs.push(*rev),
            SessionEvent::MeasureStart { mid, .. } => mids.push(*mid),
            _ => {}
        }
    }
    let (mut r2, mut m2) = (revs.clone(), mids.clone());
    r2.dedup();
    m2.sort();
    m2.dedup();
    assert_eq!(r2, revs, "no revision number twice: {revs:?}");
    assert_eq!(m2.len(), mids.len(), "no measurement id twice: {mids:?}");
    assert_eq!(&revs[revs.len() - 3..], &[3, 4, 5]);
    std::fs::remove_dir_all(&dir).ok();
}

/// Streamed agent text, progress and log lines do not rebuild the highlighted diff; a new
/// selection does.
#[test]
fn streamed_text_does_not_rebuild_the_diff() {
    let mut s = fixture_state(vec![]);
    s.agent = Some(AgentView {
        op: "rms_norm".into(),
        backend: "openai".into(),
        running: true,
        stopping: false,
        stream: String::new(),
    });
    let before = s.diff_builds;
    for i in 0..200 {
        update(
            &mut s,
            AppEvent::Agent(AgentMsg::Stream(format!("token {i} "))),
        );
        update(
            &mut s,
            AppEvent::Log(crate::session::model::LogLevel::Info, "x".into()),
        );
    }
    assert_eq!(s.diff_builds, before, "no rebuild per chunk");
    assert!(s.agent.as_ref().unwrap().stream.contains("token 199"));
    send(&mut s, vec![press(KeyCode::Char('k'))]);
    send(&mut s, vec![press(KeyCode::Tab), press(KeyCode::Char('k'))]);
    assert!(s.diff_builds > before, "a new selection rebuilds");
}
