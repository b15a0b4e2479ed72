//! TUI unit tests: the fixture state and the helpers every test file shares (render, send
//! keys, the last recorded event); one submodule per concern.

use crate::contract::protocol::{Event, Verdict};
use crate::contract::runner::JobEvent;
use crate::session::fixtures::{
    demo_events, fixture_suite, measured, records, revision, shape_result,
};
use crate::session::{Author, Model, SessionEvent};
use crate::tui::event::{AppEvent, Effect, press};
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use crate::tui::update::update;
use crate::tui::view_state::Modal;
use crate::tui::workbench::WorkerState;
use crate::tui::{keymap, view};
use crossterm::event::KeyCode;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::sync::Arc;

mod agent;
mod diff;
mod editor;
mod figures;
mod jobs;
mod keys;
mod panes;
mod pool;
mod profile;
mod replay;
mod snapshots;
mod standing;
mod timing;

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
    s.work.worker = WorkerState::Ready {
        gpu: "NVIDIA H200".into(),
        sm_clock_mhz: 1980,
    };
    let i = s
        .visible_ops()
        .iter()
        .position(|o| o == "rms_norm")
        .unwrap();
    s.view.op_sel = i;
    s.view.rev_sel = 1;
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
    &s.work.journal.last().expect("an event was recorded").event
}
