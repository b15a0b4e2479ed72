//! Replay: stepping and seeking, the recorded-session picker, the operator it opens on.

use super::{fixture_state, screen, send};
use crate::session::fixtures::{demo_events, fixture_suite, records, revision};
use crate::session::{Author, Model, SessionEvent};
use crate::tui::event::{AppEvent, Effect, press};
use crate::tui::keymap;
use crate::tui::startup::recorded_sessions;
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use crate::tui::view_state::Modal;
use crate::tui::workbench::WorkerState;
use crossterm::event::KeyCode;
use std::sync::Arc;

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
    assert_eq!(s.work.replay.as_ref().unwrap().pos, recs.len());
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
        assert_eq!(s.work.replay.as_ref().unwrap().pos, pos);
        assert!(
            s.work.model == Model::from_records(&suite, &recs[..pos]),
            "state at {pos} differs from a rebuild"
        );
    }
    send(
        &mut s,
        vec![press(KeyCode::Char('0')), press(KeyCode::Char('r'))],
    );
    let pos = s.work.replay.as_ref().unwrap().pos;
    assert!(matches!(
        recs[pos - 1].event,
        SessionEvent::Revision { rev: 0, .. }
    ));
    // read-only: decisions are refused, play starts a timer
    let n = s.work.model.applied;
    send(&mut s, vec![press(KeyCode::Char('y'))]);
    assert_eq!(s.work.model.applied, n);
    let fx = send(&mut s, vec![press(KeyCode::Char(' '))]);
    assert!(matches!(fx[..], [Effect::Playback(Some(_))]));
    let before = s.work.replay.as_ref().unwrap().pos;
    send(&mut s, vec![AppEvent::Tick]);
    assert_eq!(s.work.replay.as_ref().unwrap().pos, before + 1);
    assert!(s.work.journal.is_empty(), "replay writes nothing");
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
    let files = recorded_sessions(&dir, Some("current.jsonl"));
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
    s.work.worker = WorkerState::Starting;
    s.work.recorded_sessions = files;
    send(
        &mut s,
        vec![AppEvent::Hello(Err("no CUDA driver (libcuda.so.1)".into()))],
    );
    assert!(matches!(s.view.modal, Modal::Sessions { sel: 0 }));
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
    assert!(matches!(s.view.modal, Modal::Sessions { sel: 2 }));
    let fx = send(&mut s, vec![press(KeyCode::Enter)]);
    let [Effect::OpenReplay(f)] = &fx[..] else {
        panic!("{fx:?}")
    };
    assert_eq!(f.name, "demo-agent-tuner.jsonl");
    assert!(matches!(s.view.modal, Modal::None));
    // The runtime reads it (built in) and hands it back: replay mode, as `atrex-tui replay`.
    let text = crate::session::demos::demo(&f.name).unwrap();
    let mut loaded = crate::session::parse_text(&f.name, text).unwrap();
    let n = loaded.records.len();
    let records = std::mem::take(&mut loaded.records);
    send(
        &mut s,
        vec![AppEvent::ReplayLoaded {
            name: f.name.clone(),
            result: Ok((records.into(), loaded)),
        }],
    );
    let r = s.work.replay.as_ref().expect("replay mode");
    assert_eq!((r.pos, r.records.len()), (n, n));
    assert!(screen(&s, 120, 30).contains("replay demo-agent-tuner.jsonl"));
    // Read-only: decisions are refused.
    let before = s.work.model.applied;
    send(&mut s, vec![press(KeyCode::Char('y'))]);
    assert_eq!(s.work.model.applied, before);
    // Esc dismisses; a GPU-less hello in replay does not offer again.
    let mut s = fixture_state(vec![]);
    s.work.recorded_sessions = recorded_sessions(&dir, None);
    send(&mut s, vec![AppEvent::Hello(Err("none".into()))]);
    assert!(matches!(s.view.modal, Modal::Sessions { .. }));
    let fx = send(&mut s, vec![press(KeyCode::Esc)]);
    assert!(fx.is_empty());
    assert!(matches!(s.view.modal, Modal::None));
    assert!(s.work.replay.is_none());
    // Nothing recorded: no picker.
    let mut s = fixture_state(vec![]);
    send(&mut s, vec![AppEvent::Hello(Err("none".into()))]);
    assert!(matches!(s.view.modal, Modal::None));
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
        let o = &s.work.model.ops[op];
        assert_eq!(o.revisions[s.view.rev_sel].rev, rev);
    }
}

/// Carries out the `ReadResults` effects among `fx` as the runtime does (and what they ask
/// next); returns how many were read.
fn read_asked(s: &mut AppState, fx: Vec<Effect>) -> usize {
    let mut n = 0;
    let mut fx = fx;
    while let Some(Effect::ReadResults {
        file,
        op,
        rev,
        mid,
        briefs,
    }) = fx
        .iter()
        .find(|e| matches!(e, Effect::ReadResults { .. }))
        .cloned()
    {
        n += 1;
        let result = crate::session::timeline::read_results(&file, &op, rev, mid, &briefs);
        fx = send(
            s,
            vec![AppEvent::ResultsRead {
                op,
                rev,
                mid,
                result,
            }],
        );
    }
    n
}

#[test]
fn a_large_replay_reads_the_results_it_shows_and_shows_what_a_whole_one_does() {
    use crate::suite::{Suite, SuiteSource};
    let suite = Arc::new(Suite::load(SuiteSource::Embedded).unwrap());
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions/demo-agent-tuner.jsonl");
    let whole = crate::session::load(&path).unwrap();
    // every shape result left in the file, as for a file of LAZY_FROM bytes or more
    let (lazy, _) = crate::session::timeline::load(&path, 0).unwrap();
    let state = || {
        AppState::new(
            suite.clone(),
            Model::new(&suite),
            Theme::builtin("dark", true).unwrap(),
            suite.hardware("H200").ok().cloned(),
            std::env::temp_dir(),
        )
    };
    let mut a = state();
    a.start_replay("demo".into(), whole.records.clone(), vec![]);
    assert!(
        a.results_wanted().is_none(),
        "a whole replay holds its results"
    );
    let mut b = state();
    b.start_replay("demo".into(), lazy, vec![]);
    // The revision shown lacks its results until they are read; they are asked for once.
    let Some(asked) = b.results_wanted() else {
        panic!("the revision shown has briefs")
    };
    assert!(b.results_wanted().is_none());
    assert_ne!(screen(&a, 200, 50), screen(&b, 200, 50));
    assert_eq!(read_asked(&mut b, vec![asked]), 1);
    for (w, h) in [(80, 24), (120, 40), (160, 45), (200, 50)] {
        assert_eq!(screen(&a, w, h), screen(&b, w, h), "{w}x{h}");
    }
    // Stepping back, playing forward, jumping: each shows what the whole replay shows.
    let keys_of =
        |keys: &str| -> Vec<AppEvent> { keys.chars().map(|c| press(KeyCode::Char(c))).collect() };
    for keys in [
        ",", ",,,,,", "[[", "R", "R", "r", "0", "]]]", ".", "jj", "kk", "$",
    ] {
        send(&mut a, keys_of(keys));
        let fx = send(&mut b, keys_of(keys));
        read_asked(&mut b, fx);
        assert_eq!(screen(&a, 160, 45), screen(&b, 160, 45), "after {keys}");
    }
    // Only the revision shown holds whole results.
    let held: usize = b
        .work
        .model
        .ops
        .values()
        .flat_map(|o| &o.revisions)
        .filter(|r| r.measurement.results.values().next().is_some())
        .count();
    assert!(held <= 1, "{held} revisions hold whole results");
}

/// `q` in a replay opened from the session picker goes back to the picker, the live view as it
/// was; `q` there dismisses it, and `q` at the top level quits. A replay opened on the command
/// line quits with `q`.
#[test]
fn q_in_a_replay_from_the_picker_goes_back_to_the_picker() {
    let mut s = fixture_state(vec![]);
    s.work.worker = WorkerState::Starting;
    s.work.recorded_sessions = recorded_sessions(&std::env::temp_dir().join("none"), None);
    send(&mut s, vec![AppEvent::Hello(Err("none".into()))]);
    assert!(matches!(s.view.modal, Modal::Sessions { sel: 0 }));
    let live = s.work.model.clone();
    let (op, rev) = (s.selected_op(), s.view.rev_sel);
    send(&mut s, vec![press(KeyCode::Char('j'))]);
    let fx = send(&mut s, vec![press(KeyCode::Enter)]);
    let [Effect::OpenReplay(f)] = &fx[..] else {
        panic!("{fx:?}")
    };
    let text = crate::session::demos::demo(&f.name).unwrap();
    let mut loaded = crate::session::parse_text(&f.name, text).unwrap();
    let recs = std::mem::take(&mut loaded.records);
    send(
        &mut s,
        vec![AppEvent::ReplayLoaded {
            name: f.name.clone(),
            result: Ok((recs.into(), loaded)),
        }],
    );
    assert!(s.work.replay.as_ref().is_some_and(|r| r.back.is_some()));
    assert_ne!(s.work.model, live);
    // the key bar says where q goes
    let bar = keymap::key_bar(&s);
    assert!(
        bar.contains(&("q", "sessions")) && !bar.contains(&("q", "quit")),
        "{bar:?}"
    );
    // playing, then q: playback stops, the picker is back on the session replayed
    let fx = send(&mut s, vec![press(KeyCode::Char(' '))]);
    assert!(matches!(fx[..], [Effect::Playback(Some(_))]));
    let fx = send(&mut s, vec![press(KeyCode::Char('q'))]);
    assert_eq!(fx, vec![Effect::Playback(None)]);
    assert!(!s.work.quit && s.work.replay.is_none());
    assert!(matches!(s.view.modal, Modal::Sessions { sel: 1 }));
    assert_eq!(s.work.model, live);
    assert_eq!((s.selected_op(), s.view.rev_sel), (op, rev));
    assert!(screen(&s, 80, 24).contains("open a recorded session?"));
    // q in the picker dismisses it; q at the top level quits
    assert!(send(&mut s, vec![press(KeyCode::Char('q'))]).is_empty());
    assert!(matches!(s.view.modal, Modal::None));
    assert_eq!(keymap::key_bar(&s).last(), Some(&("q", "quit")));
    assert_eq!(
        send(&mut s, vec![press(KeyCode::Char('q'))]),
        vec![Effect::Quit]
    );
    // `atrex-tui replay FILE`: q quits
    let mut s = fixture_state(vec![]);
    let suite = s.work.suite.clone();
    s.start_replay("demo.jsonl".into(), records(demo_events(&suite)), vec![]);
    assert_eq!(
        send(&mut s, vec![press(KeyCode::Char('q'))]),
        vec![Effect::Quit]
    );
}
