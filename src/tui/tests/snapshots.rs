//! insta snapshots of the screens, panes and overlays at the supported sizes, and layout at
//! real-suite widths.

use super::{fixture_state, render, screen, send};
use crate::session::fixtures::{demo_events, fixture_suite, records};
use crate::session::{Model, SessionEvent};
use crate::tui::event::press;
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use crate::tui::view;
use crate::tui::view_state::PaneId;
use crate::tui::workbench::WorkerState;
use crossterm::event::KeyCode;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::sync::Arc;

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
    // tall enough for every row: each one's keys and the start of what it does are on screen
    let out = screen(&s, 100, 60);
    for (_, k, what) in super::keymap::help_rows() {
        let start: String = what.chars().take(16).collect();
        assert!(
            out.lines().any(|l| l.contains(k) && l.contains(&start)),
            "help lacks {k}: {what}"
        );
    }
    insta::assert_snapshot!("help_100x60", out);
}

#[test]
fn snapshot_diff_pane_with_a_compile_error() {
    let mut s = fixture_state(vec![]);
    s.view.rev_sel = 2; // v2: compile error, diff against v1
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
    s.work.worker = WorkerState::NoGpu("none".into());
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
    s.view.theme = Theme::builtin("light", false).unwrap();
    let t = render(&s, 80, 24);
    let cell = &t.backend().buffer()[(0, 0)];
    assert!(
        matches!(cell.bg, ratatui::style::Color::Indexed(_)),
        "{cell:?}"
    );
}

#[test]
fn snapshot_gauges_pane_with_a_profile() {
    let mut s = fixture_state(vec![SessionEvent::Profile {
        op: "rms_norm".into(),
        rev: 1,
        profile: Box::new(crate::profile::fixture("rms_norm", 1, 3)),
    }]);
    s.view.focus = PaneId::Gauges;
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

/// On the real suite: operator names are whole from 120 columns up, and the code pane has
/// room for 80 columns of code beside its borders and gutter from 160 up (the code on screen
/// is measured in `panes::the_code_keeps_80_columns_from_160_up`).
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
    s.view.op_sel = s.visible_ops().iter().position(|o| *o == longest).unwrap();
    s.refresh();
    for (w, h) in [(120u16, 40u16), (160, 45), (200, 50), (240, 60)] {
        let text = screen(&s, w, h);
        assert!(text.contains(&longest), "{w}x{h}: `{longest}` cut:\n{text}");
        let a = view::areas(&s, ratatui::layout::Rect::new(0, 0, w, h));
        if w >= 160 {
            // borders, a gutter of four-digit line numbers, 80 columns
            assert!(
                a.diff.width >= 2 + 12 + 80,
                "{w}: diff {} wide",
                a.diff.width
            );
        }
    }
}
