//! The built-in and the external editor: saved revisions, measured, with compile errors shown.

use super::{fixture_state, last_event, screen, send, typed};
use crate::contract::protocol::{Diagnostic, Event, Verdict};
use crate::contract::runner::JobEvent;
use crate::session::fixtures::fixture_suite;
use crate::session::{Author, Model, RevVerdict, SessionEvent};
use crate::tui::event::{AppEvent, Effect, press, press_ctrl};
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use crate::tui::view_state::Modal;
use crate::tui::workbench::WorkerState;
use crossterm::event::KeyCode;
use std::sync::Arc;

#[test]
fn built_in_edit_saves_a_human_revision_measures_it_and_shows_compile_errors() {
    let mut s = fixture_state(vec![]);
    s.view.rev_sel = 1;
    send(&mut s, vec![press(KeyCode::Char('e'))]);
    assert!(matches!(s.view.modal, Modal::Editor(_)));
    send(&mut s, vec![press_ctrl('s')]);
    assert!(s.work.journal.is_empty(), "unchanged text is not saved");
    send(&mut s, vec![press(KeyCode::Char('g'))]); // the editor takes keys as text
    send(&mut s, typed("oops "));
    let fx = send(&mut s, vec![press_ctrl('s')]);
    let src = match &s.work.journal[0].event {
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
    let mid = match &s.work.journal[1].event {
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
            source: src,
            full: false
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
                    diagnostics: vec![
                        // A note on the whole kernel (ptxas) comes before the error.
                        Diagnostic {
                            line: 0,
                            severity: "warning".into(),
                            msg: "ptxas: Registers are spilled to local memory".into(),
                        },
                        Diagnostic {
                            line: 1,
                            severity: "error".into(),
                            msg: "identifier \"goops\" is undefined".into(),
                        },
                    ],
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
    assert!(s.work.jobs.is_empty());
    assert_eq!(
        s.work.model.ops["rms_norm"].rev(3).unwrap().verdict(),
        RevVerdict::CompileError
    );
    let out = screen(&s, 120, 40);
    assert!(
        out.contains("line 1: error: identifier \"goops\" is undefined"),
        "{out}"
    );
    assert!(
        out.contains("kernel: warning: ptxas: Registers are spilled"),
        "{out}"
    );
    // closing the editor shows the diagnostic inline in the diff
    send(&mut s, vec![press(KeyCode::Esc)]);
    assert!(matches!(s.view.modal, Modal::None));
    assert!(
        s.view
            .diff
            .lines
            .iter()
            .any(|l| l.to_string().contains("▲ error (line 1)"))
    );
    assert!(
        s.view
            .diff
            .lines
            .iter()
            .any(|l| l.to_string().contains("▲ warning (kernel): ptxas"))
    );
    // The session's line names the error, not the note before it.
    let out = screen(&s, 120, 40);
    assert!(
        out.contains("v3: compile error at line 1: identifier"),
        "{out}"
    );
}

#[test]
fn edit_without_a_gpu_records_but_does_not_measure() {
    let mut s = fixture_state(vec![]);
    s.work.worker = WorkerState::NoGpu("no driver".into());
    send(
        &mut s,
        vec![
            press(KeyCode::Char('e')),
            press(KeyCode::Char('x')),
            press_ctrl('s'),
        ],
    );
    assert_eq!(s.work.journal.len(), 1);
    assert!(matches!(last_event(&s), SessionEvent::Revision { .. }));
    assert!(s.work.ui_log.last().unwrap().text.contains("no GPU"));
    let fx = send(&mut s, vec![press(KeyCode::Esc), press(KeyCode::Char('m'))]);
    assert!(fx.is_empty());
}

#[test]
fn external_edit_records_and_measures_every_save() {
    let mut s = fixture_state(vec![]);
    s.view.rev_sel = 1;
    let fx = send(&mut s, vec![press(KeyCode::Char('E'))]);
    let path = match &fx[..] {
        [Effect::ExternalEdit { op, path, content }] => {
            assert_eq!(op, "rms_norm");
            assert!(path.ends_with("rms_norm/v1.cu"), "{path:?}");
            assert_eq!(
                content,
                &s.work.model.ops["rms_norm"].rev(1).unwrap().source
            );
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
        matches!(&s.work.journal[0].event, SessionEvent::Revision { rev: 3, parent: Some(1), via: Some(v), .. } if v == "external")
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
    assert_eq!(s.work.model.ops["rms_norm"].rev(4).unwrap().parent, Some(3));
}

/// A new session's operator starts from the standing's incumbent (an unrecorded v0); editing it
/// in $EDITOR records v0 with its source just before v1, so the file shows v1 one line from
/// the kernel it came from. What the editor left is recorded when it exits (a save the file
/// watcher had not reported yet), once.
#[test]
fn an_edit_of_the_starting_kernel_records_the_starting_kernel_first() {
    let suite = Arc::new(fixture_suite());
    let start = "// the standing's rms_norm\nint k;\n";
    let mut model = Model::new(&suite);
    model.start_from("rms_norm", start, "the standing's incumbent (test)");
    let hw = suite.hardware("H200").ok().cloned();
    let mut s = AppState::new(
        suite,
        model,
        Theme::builtin("dark", true).unwrap(),
        hw,
        std::env::temp_dir().join("atrex-tui-test-kernels"),
    );
    s.work.worker = WorkerState::Ready {
        gpu: "NVIDIA H200".into(),
        sm_clock_mhz: 1980,
    };
    s.select_op_name("rms_norm");
    s.view.rev_sel = 0;
    s.refresh();
    let fx = send(&mut s, vec![press(KeyCode::Char('E'))]);
    let [Effect::ExternalEdit { path, content, .. }] = &fx[..] else {
        panic!("{fx:?}")
    };
    assert_eq!(content, start);
    assert!(
        s.work.journal.is_empty(),
        "opening the editor records nothing"
    );
    let edited = format!("{start}// one more line\n");
    let fx = send(
        &mut s,
        vec![AppEvent::EditorExited {
            path: path.clone(),
            status: "exit status: 0".into(),
            content: Ok(edited.clone()),
        }],
    );
    assert!(
        matches!(&fx[..], [Effect::Measure { rev: 1, .. }]),
        "{fx:?}"
    );
    let kinds: Vec<String> = s
        .work
        .journal
        .iter()
        .map(|r| match &r.event {
            SessionEvent::Revision {
                rev,
                parent,
                author,
                source,
                ..
            } => format!(
                "v{rev} from {parent:?} by {} ({} bytes)",
                author.label(),
                source.len()
            ),
            e => e.kind().to_string(),
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            format!("v0 from None by incumbent ({} bytes)", start.len()),
            format!("v1 from Some(0) by human ({} bytes)", edited.len()),
            "measure_start".to_string(),
        ]
    );
    let out = screen(&s, 120, 40);
    assert!(
        out.contains("rms_norm v1 vs v0 (parent) [d] +1 −0"),
        "{out}"
    );
    // The watcher's report of the same save comes after: nothing more is recorded.
    let n = s.work.journal.len();
    let fx = send(
        &mut s,
        vec![AppEvent::FileChanged {
            path: path.clone(),
            content: Ok(edited),
        }],
    );
    assert!(fx.is_empty() && s.work.journal.len() == n);
    // Nor when the editor exits on what was recorded already.
    let fx = send(
        &mut s,
        vec![AppEvent::EditorExited {
            path: path.clone(),
            status: "exit status: 0".into(),
            content: Ok(format!("{start}// one more line\n")),
        }],
    );
    assert!(fx.is_empty() && s.work.journal.len() == n, "{fx:?}");
}
