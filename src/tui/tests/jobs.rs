//! Measurement jobs streamed into the state, and one recorder numbering every session writer.

use super::{fixture_state, screen, send, typed};
use crate::contract::protocol::{Event, Verdict};
use crate::contract::runner::JobEvent;
use crate::session::fixtures::{demo_events, records, revision, shape_result};
use crate::session::{Author, Model, RevVerdict, SessionEvent};
use crate::tui::event::{AppEvent, Effect, press, press_ctrl};
use crossterm::event::KeyCode;

#[test]
fn measure_streams_results_into_the_state() {
    let mut s = fixture_state(vec![]);
    s.view.rev_sel = 0;
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
        s.work.model.ops["rms_norm"].status(),
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
        s.work.model.ops["rms_norm"].rev(0).unwrap().verdict(),
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
        s.work.model.ops["rms_norm"].rev(0).unwrap().verdict(),
        RevVerdict::Failed("timeout".into())
    );
}

/// One recorder numbers every writer: a TUI session (a hand edit measured), continued by
/// `measure` (its Recording) and then by the headless agent (its FileSink), holds each
/// revision and measurement number once, in order, with strictly increasing `seq`.
#[test]
fn one_recorder_numbers_a_tui_session_resumed_by_measure_and_by_the_agent() {
    use crate::agent::driver::Sink;
    use crate::session::{Recording, SessionWriter};
    let mut s = fixture_state(vec![]);
    s.view.rev_sel = 1;
    send(&mut s, vec![press(KeyCode::Char('e'))]);
    send(&mut s, typed("x"));
    send(&mut s, vec![press_ctrl('s')]);
    let tui_mid = match &s.work.journal[1].event {
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
    for r in records(demo_events(&s.work.suite))
        .iter()
        .chain(s.work.journal.iter())
    {
        w.write(r).unwrap();
    }
    drop(w);
    // `measure --session`: continues the file.
    let (w, loaded) = SessionWriter::continue_file(&f).unwrap();
    let mut rec = Recording::new(Model::from_records(&s.work.suite, &loaded.records), Some(w));
    let p = s.work.suite.problem("rms_norm").unwrap().clone();
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
        Recording::new(Model::from_records(&s.work.suite, &loaded.records), Some(w)),
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
