//! Keys: modal dialogs first, then the main view through the keymap's actions, and navigation.

use super::agent::toggle_agent;
use super::decide::decide_selected;
use super::editor::{editor_key, external_edit, open_editor};
use super::jobs::{measure_selected, profile_selected};
use super::panes::{open_selected, scroll_log, scroll_sideways};
use super::replay::{
    back_to_sessions, play_pause, replay_jump_revision, replay_seek, replay_speed, replay_step,
};
use super::standing::{remeasure_selected, remeasure_stale};
use super::{quit_now, search};
use crate::session::SessionEvent;
use crate::session::model::LogLevel;
use crate::tui::event::{AgentCtl, Effect};
use crate::tui::keymap::{Action, Ctx};
use crate::tui::state::AppState;
use crate::tui::view_state::{DiffMode, Modal, PANES, PaneId};
use crossterm::event::{KeyCode, KeyEvent};
use ratatui_textarea::TextArea;

pub(crate) fn on_key(state: &mut AppState, k: KeyEvent) -> Vec<Effect> {
    // Ctrl-Z suspends from every dialog but the built-in editor (where it undoes).
    if !matches!(state.view.modal, Modal::Editor(_))
        && crate::tui::keymap::action(&k, &Ctx::of(state)) == Some(Action::Suspend)
    {
        return vec![Effect::Suspend];
    }
    // modal first
    match &mut state.view.modal {
        Modal::Help { scroll } => {
            match k.code {
                KeyCode::Char('j') | KeyCode::Down => *scroll = scroll.saturating_add(1),
                KeyCode::Char('k') | KeyCode::Up => *scroll = scroll.saturating_sub(1),
                _ => state.view.modal = Modal::None,
            }
            return vec![];
        }
        Modal::ConfirmQuit => {
            return match k.code {
                KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => {
                    state.view.modal = Modal::None;
                    quit_now(state)
                }
                _ => {
                    state.view.modal = Modal::None;
                    vec![]
                }
            };
        }
        Modal::Steer(ta) => {
            match k.code {
                KeyCode::Esc => state.view.modal = Modal::None,
                KeyCode::Enter => {
                    let text = ta.lines().join(" ").trim().to_string();
                    state.view.modal = Modal::None;
                    if !text.is_empty() {
                        let op = state.selected_op();
                        state.work.record(SessionEvent::Steer {
                            op: op.clone(),
                            text: text.clone(),
                        });
                        // The selected operator's agent hears it.
                        if let Some(op) = op.filter(|o| state.work.running_agent(o).is_some()) {
                            return vec![Effect::Agent(op, AgentCtl::Steer(text))];
                        }
                    }
                }
                _ => {
                    ta.input(k);
                }
            }
            return vec![];
        }
        Modal::Editor(_) => return editor_key(state, k),
        Modal::Search(_) => return search::prompt_key(state, k),
        Modal::Sessions { sel } => {
            let n = state.work.recorded_sessions.len();
            match k.code {
                KeyCode::Char('j') | KeyCode::Down => *sel = (*sel + 1).min(n.saturating_sub(1)),
                KeyCode::Char('k') | KeyCode::Up => *sel = sel.saturating_sub(1),
                KeyCode::Enter => {
                    let f = state.work.recorded_sessions.get(*sel).cloned();
                    state.view.modal = Modal::None;
                    if let Some(f) = f {
                        state
                            .work
                            .log(LogLevel::Info, format!("opening {} in replay…", f.name));
                        return vec![Effect::OpenReplay(f)];
                    }
                }
                KeyCode::Esc | KeyCode::Char('q') => {
                    state.view.modal = Modal::None;
                    state.work.log(
                        LogLevel::Info,
                        "recorded sessions: atrex-tui replay FILE opens one later".into(),
                    );
                }
                _ => {}
            }
            return vec![];
        }
        Modal::None => {}
    }
    match crate::tui::keymap::action(&k, &Ctx::of(state)) {
        Some(a) => on_action(state, a),
        None => vec![],
    }
}

/// Refuses a change in replay (read-only), with a line in the log.
pub(crate) fn read_only(state: &mut AppState) -> bool {
    if state.work.replay.is_some() {
        state.work.log(
            LogLevel::Warn,
            "replay is read-only (use --resume FILE to continue the session)".into(),
        );
        true
    } else {
        false
    }
}

/// What a key of the main view does (the keymap says which key is which action).
pub(crate) fn on_action(state: &mut AppState, a: Action) -> Vec<Effect> {
    const PAGE: isize = 10;
    let live_only = matches!(
        a,
        Action::Agent
            | Action::Dropout
            | Action::Accept
            | Action::Reject
            | Action::Steer
            | Action::Edit
            | Action::ExternalEdit
    );
    if live_only && read_only(state) {
        return vec![];
    }
    match a {
        Action::Quit => {
            if state.work.measuring() {
                state.view.modal = Modal::ConfirmQuit;
                return vec![];
            }
            return quit_now(state);
        }
        Action::Help => state.view.modal = Modal::Help { scroll: 0 },
        Action::NextPane => {
            let i = PANES
                .iter()
                .position(|p| *p == state.view.focus)
                .unwrap_or(0);
            state.view.focus = PANES[(i + 1) % PANES.len()];
        }
        Action::PrevPane => {
            let i = PANES
                .iter()
                .position(|p| *p == state.view.focus)
                .unwrap_or(0);
            state.view.focus = PANES[(i + PANES.len() - 1) % PANES.len()];
        }
        Action::Phase => next_phase(state),
        Action::Profile => return profile_selected(state),
        Action::RemeasureSelected => return remeasure_selected(state),
        Action::RemeasureStale => return remeasure_stale(state),
        Action::DiffMode => {
            state.view.diff_mode = match state.view.diff_mode {
                DiffMode::Parent => DiffMode::Incumbent,
                DiffMode::Incumbent => DiffMode::Parent,
            };
            state.view.full_source = false;
        }
        Action::FullSource => state.view.full_source = !state.view.full_source,
        Action::Agent => return toggle_agent(state),
        Action::Dropout => return dropout(state),
        Action::Accept | Action::Reject => return decide_selected(state, a == Action::Accept),
        Action::Steer => {
            let mut ta = TextArea::default();
            ta.set_placeholder_text(
                "a hint for the agent's next iteration, e.g. \"use one warp per row\"",
            );
            state.view.modal = Modal::Steer(ta);
        }
        Action::Measure => return measure_selected(state),
        Action::Edit => open_editor(state),
        Action::ExternalEdit => return external_edit(state),
        Action::StepForward => return replay_step(state, 1),
        Action::StepBack => return replay_step(state, -1),
        Action::Forward10 => return replay_step(state, 10),
        Action::Back10 => return replay_step(state, -10),
        Action::Start => replay_seek(state, 0),
        Action::End => replay_seek(state, usize::MAX),
        Action::NextRevision => replay_jump_revision(state, true),
        Action::PrevRevision => replay_jump_revision(state, false),
        Action::PlayPause => return play_pause(state),
        Action::Faster | Action::Slower => return replay_speed(state, a == Action::Faster),
        Action::Down => navigate(state, 1),
        Action::Up => navigate(state, -1),
        Action::PageDown => navigate(state, PAGE),
        Action::PageUp => navigate(state, -PAGE),
        Action::First => navigate(state, isize::MIN / 2),
        Action::Last => navigate(state, isize::MAX / 2),
        Action::Suspend => return vec![Effect::Suspend],
        Action::ScrollLeft => scroll_sideways(state, -1),
        Action::ScrollRight => scroll_sideways(state, 1),
        Action::ColumnZero => state.view.diff_hscroll = 0,
        Action::Search => search::open_prompt(state),
        Action::SearchNext => search::search_again(state, search::Dir::Next),
        Action::SearchPrev => search::search_again(state, search::Dir::Prev),
        Action::ClearSearch => state.view.search = None,
        Action::Open => open_selected(state),
        Action::BackToSessions => return back_to_sessions(state),
        Action::EditorSave | Action::EditorUndo | Action::EditorRedo | Action::EditorClose => {}
    }
    vec![]
}

pub(crate) fn next_phase(state: &mut AppState) {
    let cur = state.selected_op();
    state.view.phase = state.view.phase.next();
    state.view.op_sel = 0;
    if let Some(c) = &cur {
        state.select_op_name(c);
    }
    if state.selected_op() != cur {
        state.view.shape_sel = None;
    }
    state.select_latest_rev();
}

pub(crate) fn dropout(state: &mut AppState) -> Vec<Effect> {
    match state
        .selected_op()
        .filter(|op| state.work.running_agent(op).is_some())
    {
        Some(op) => {
            state.work.log(
                LogLevel::Steer,
                format!(
                    "agent on {op}: dropout asked: the next context masks about half of the history"
                ),
            );
            vec![Effect::Agent(op, AgentCtl::Dropout)]
        }
        None => {
            state.work.log(
                LogLevel::Warn,
                "agent: none runs on this operator (a starts one)".into(),
            );
            vec![]
        }
    }
}

pub(crate) fn bump(v: usize, d: isize, len: usize) -> usize {
    let n = (v as isize).saturating_add(d);
    n.clamp(0, len.saturating_sub(1) as isize) as usize
}

pub(crate) fn navigate(state: &mut AppState, d: isize) {
    match state.view.focus {
        PaneId::Operators => {
            let n = state.visible_ops().len();
            select_op(state, bump(state.view.op_sel, d, n));
        }
        PaneId::Revisions => {
            let n = state
                .selected_op()
                .and_then(|o| state.work.model.ops.get(&o).map(|o| o.revisions.len()))
                .unwrap_or(0);
            state.view.rev_sel = bump(state.view.rev_sel, d, n);
        }
        PaneId::Diff => {
            state.view.diff_scroll = bump(state.view.diff_scroll, d, state.view.diff.lines.len())
        }
        PaneId::Gauges => {
            // j/k select a shape (the first press selects the first one); `p` profiles it.
            let n = state
                .selected_op()
                .and_then(|o| state.work.shape_info.get(&o).map(|v| v.len()))
                .unwrap_or(0);
            if n > 0 {
                let cur = state.view.shape_sel.map(|x| x as isize).unwrap_or(-1);
                let i = cur.saturating_add(d).clamp(0, n as isize - 1) as usize;
                state.view.shape_sel = Some(i);
                state.view.gauge_scroll = i;
            }
        }
        // the log scrolls from the bottom: j goes towards newer lines
        PaneId::Log => scroll_log(state, d),
    }
}

/// Selects the operator at `i` of the visible ones (its latest revision, no shape selected).
pub(crate) fn select_op(state: &mut AppState, i: usize) {
    if i != state.view.op_sel {
        state.view.op_sel = i;
        state.select_latest_rev();
        state.view.gauge_scroll = 0;
        state.view.shape_sel = None;
    }
}
