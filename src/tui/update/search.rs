//! The search: the prompt `/` opens in the bottom line (each key typed searches again from where
//! the view was, Enter keeps the search, Esc or Ctrl-C goes back to where the view was, a
//! Backspace on an empty prompt too), `n` / `N` and Esc (clear).
//!
//! Where a match lands, per pane: the operators select the next operator whose name matches;
//! the code pane scrolls the match's line into view (a third from the top) and sideways until
//! the match shows; the log, newest first (`n` goes to older lines), scrolls the line to the
//! middle of the pane.

use super::keys::select_op;

use crate::session::model::LogLevel;
use crate::tui::event::Effect;
use crate::tui::logview::{self, newest_first};
use crate::tui::search::{Origin, Search, SearchPrompt, code_matches, cyclic};
use crate::tui::state::AppState;
use crate::tui::text;
use crate::tui::view::{code_cols, diff_rows, log_size};
use crate::tui::view_state::{Modal, PaneId};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Which match a search goes to: the first from where the view is, the next, the previous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Here,
    Next,
    Prev,
}

pub(crate) fn open_prompt(state: &mut AppState) {
    let origin = Origin {
        focus: state.view.focus,
        op_sel: state.view.op_sel,
        rev_sel: state.view.rev_sel,
        shape_sel: state.view.shape_sel,
        gauge_scroll: state.view.gauge_scroll,
        diff_scroll: state.view.diff_scroll,
        diff_hscroll: state.view.diff_hscroll,
        log_scroll: state.view.log_scroll,
        search: state.view.search.clone(),
    };
    state.view.modal = Modal::Search(Box::new(SearchPrompt {
        text: String::new(),
        origin,
    }));
}

/// Puts the view back where it was when `/` was pressed (the search too).
fn restore(state: &mut AppState, o: &Origin) {
    state.view.focus = o.focus;
    state.view.op_sel = o.op_sel;
    state.view.rev_sel = o.rev_sel;
    state.view.shape_sel = o.shape_sel;
    state.view.gauge_scroll = o.gauge_scroll;
    // the code view of the selection before its scroll positions
    state.refresh();
    state.view.diff_scroll = o.diff_scroll;
    state.view.diff_hscroll = o.diff_hscroll;
    state.view.log_scroll = o.log_scroll;
    state.view.search = o.search.clone();
}

pub(crate) fn prompt_key(state: &mut AppState, k: KeyEvent) -> Vec<Effect> {
    let Modal::Search(p) = &mut state.view.modal else {
        return vec![];
    };
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    match k.code {
        KeyCode::Esc => cancel(state),
        KeyCode::Char('c') if ctrl => cancel(state),
        KeyCode::Enter => {
            let text = p.text.clone();
            if text.is_empty() {
                cancel(state);
                return vec![];
            }
            state.view.modal = Modal::None;
            if !any_match(state) {
                no_match(state, &text);
            }
        }
        KeyCode::Backspace if p.text.is_empty() => cancel(state),
        KeyCode::Backspace => {
            p.text.pop();
            retype(state);
        }
        KeyCode::Char(c) if !ctrl => {
            p.text.push(c);
            retype(state);
        }
        _ => {}
    }
    vec![]
}

fn cancel(state: &mut AppState) {
    if let Modal::Search(p) = std::mem::replace(&mut state.view.modal, Modal::None) {
        restore(state, &p.origin);
    }
}

/// The prompt's text changed: search again from where the view was.
fn retype(state: &mut AppState) {
    let Modal::Search(p) = &state.view.modal else {
        return;
    };
    let (origin, text) = (p.origin.clone(), p.text.clone());
    restore(state, &origin);
    if !text.is_empty() {
        state.view.search = Some(Search::new(&text));
        jump(state, Dir::Here);
    }
}

fn no_match(state: &mut AppState, query: &str) {
    let what = match state.view.focus {
        PaneId::Operators => "the operators' names",
        PaneId::Diff => "the code",
        _ => "the log",
    };
    state.work.log(
        LogLevel::Warn,
        format!("search: no match for `{query}` in {what}"),
    );
}

/// Whether the search matches anything in the focused pane.
fn any_match(state: &AppState) -> bool {
    let Some(q) = &state.view.search else {
        return false;
    };
    match state.view.focus {
        PaneId::Operators => state
            .visible_ops()
            .iter()
            .any(|n| text::matches(n, &q.query)),
        PaneId::Diff => !code_matches(&state.view.diff, &q.query).is_empty(),
        PaneId::Log => newest_first(state).any(|(_, l)| text::matches(&l.text, &q.query)),
        _ => false,
    }
}

/// `n` / `N`: the next or previous match in the focused pane (a line in the log when none).
pub(crate) fn search_again(state: &mut AppState, dir: Dir) {
    if !jump(state, dir)
        && let Some(q) = state.view.search.as_ref().map(|q| q.query.clone())
    {
        no_match(state, &q);
    }
}

/// Moves to a match in the focused pane; false when there is none.
pub(crate) fn jump(state: &mut AppState, dir: Dir) -> bool {
    let Some(q) = state.view.search.as_ref().map(|q| q.query.clone()) else {
        return false;
    };
    match state.view.focus {
        PaneId::Operators => jump_operator(state, &q, dir),
        PaneId::Diff => jump_code(state, &q, dir),
        PaneId::Log => jump_log(state, &q, dir),
        _ => false,
    }
}

fn jump_operator(state: &mut AppState, q: &str, dir: Dir) -> bool {
    let hits: Vec<usize> = state
        .visible_ops()
        .iter()
        .enumerate()
        .filter(|(_, n)| text::matches(n, q))
        .map(|(i, _)| i)
        .collect();
    let Some(i) = cyclic(&hits, state.view.op_sel, dir != Dir::Prev, dir == Dir::Here) else {
        return false;
    };
    select_op(state, i);
    true
}

fn jump_code(state: &mut AppState, q: &str, dir: Dir) -> bool {
    let all = code_matches(&state.view.diff, q);
    let n = all.len();
    if n == 0 {
        return false;
    }
    let top = state.view.diff_scroll;
    let cur = state
        .view
        .search
        .as_ref()
        .and_then(|s| s.code_hit.as_ref())
        .and_then(|h| all.iter().position(|m| m == h));
    let i = match (cur, dir) {
        (Some(p), Dir::Here) => p,
        (Some(p), Dir::Next) => (p + 1) % n,
        (Some(p), Dir::Prev) => (p + n - 1) % n,
        // from the top of the view
        (None, Dir::Here | Dir::Next) => all.iter().position(|(l, _)| *l >= top).unwrap_or(0),
        (None, Dir::Prev) => all.iter().rposition(|(l, _)| *l < top).unwrap_or(n - 1),
    };
    let (line, range) = all[i].clone();
    // into view: the line a third from the top, the match within the columns shown
    let rows = diff_rows(state).max(1);
    if line < state.view.diff_scroll || line >= state.view.diff_scroll + rows {
        state.view.diff_scroll = line.saturating_sub(rows / 3);
    }
    let code = state.view.diff.code(line);
    let (a, b) = (
        text::cols(&code[..range.start]),
        text::cols(&code[..range.end]),
    );
    let w = code_cols(state).max(1);
    let hs = state.view.diff_hscroll;
    if a < hs || b > hs + w {
        let mut new = if b <= w { 0 } else { a.saturating_sub(w / 2) };
        if b > new + w {
            new = a;
        }
        state.view.diff_hscroll = new.min(state.view.diff.max_cols.saturating_sub(w));
    }
    if let Some(s) = &mut state.view.search {
        s.code_hit = Some((line, range));
    }
    true
}

fn jump_log(state: &mut AppState, q: &str, dir: Dir) -> bool {
    let (w, h) = log_size(state);
    let all: Vec<(logview::LogRef, bool)> = newest_first(state)
        .map(|(r, l)| (r, text::matches(&l.text, q)))
        .collect();
    let hits: Vec<usize> = (0..all.len()).filter(|i| all[*i].1).collect();
    let cur = state
        .view
        .search
        .as_ref()
        .and_then(|s| s.log_hit)
        .and_then(|h| all.iter().position(|(r, _)| *r == h));
    // newest first: n goes to older lines (forward in this order), N to newer
    let (from, inclusive) = match cur {
        Some(p) => (p, dir == Dir::Here),
        None => {
            let bottom = logview::bottom_line(state, state.view.log_scroll, w);
            let p = bottom
                .and_then(|b| all.iter().position(|(r, _)| *r == b))
                .unwrap_or(0);
            (p, dir != Dir::Prev)
        }
    };
    let Some(i) = cyclic(&hits, from, dir != Dir::Prev, inclusive) else {
        return false;
    };
    let at = all[i].0;
    let below = logview::rows_below(state, at, w).unwrap_or(0);
    let rows = newest_first(state)
        .find(|(r, _)| *r == at)
        .map(|(_, l)| logview::rows(l, w))
        .unwrap_or(1);
    if below < state.view.log_scroll || below + rows > state.view.log_scroll + h {
        state.view.log_scroll = (below + rows / 2)
            .saturating_sub(h / 2)
            .min(logview::max_scroll(state, w, h));
    }
    if let Some(s) = &mut state.view.search {
        s.log_hit = Some(at);
    }
    true
}
