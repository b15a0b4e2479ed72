//! How the panes scroll: the code sideways (`H` / `L` half a pane, `0` back to column 0, never
//! past the widest line), the log by wrapped rows, kept where the user scrolled it while new
//! lines arrive (it follows the end only when at the bottom), and the screen size the view
//! lays the panes out for.

use super::keys::bump;
use crate::tui::logview;
use crate::tui::state::AppState;
use crate::tui::view::{code_cols, log_size};
use crate::tui::view_state::PaneId;

/// The log's length before an event, to keep a scrolled-up view in place after it.
pub(crate) type LogMark = (usize, usize);

pub(crate) fn log_mark(state: &AppState) -> LogMark {
    (state.work.model.log.len(), state.work.ui_log.len())
}

/// After an event: a log scrolled up stays on the lines it showed (the rows of the lines just
/// added are added to its distance from the bottom); at the bottom it follows the end.
pub(crate) fn keep_log_view(state: &mut AppState, before: LogMark) {
    let (a, b) = before;
    let now = log_mark(state);
    if state.view.log_scroll == 0 || now == before {
        return;
    }
    let (w, h) = log_size(state);
    if now.0 >= a && now.1 >= b {
        // lines appended: the rows they take go below the view
        let added: usize = state.work.model.log[a..]
            .iter()
            .chain(&state.work.ui_log[b..])
            .map(|l| logview::rows(l, w))
            .sum();
        state.view.log_scroll += added;
    } else {
        // a log rebuilt (replay going back) or trimmed may be shorter
        state.view.log_scroll = state.view.log_scroll.min(logview::max_scroll(state, w, h));
    }
}

/// Scrolls the code pane sideways by half its width (`dir` −1 left, +1 right).
pub(crate) fn scroll_sideways(state: &mut AppState, dir: isize) {
    let w = code_cols(state);
    let step = (w / 2).max(4);
    let max = state.view.diff.max_cols.saturating_sub(w);
    state.view.diff_hscroll = if dir < 0 {
        state.view.diff_hscroll.saturating_sub(step)
    } else {
        (state.view.diff_hscroll + step).min(max)
    };
}

/// The log scrolled by `d` rows (positive: towards newer lines), never past its first line.
pub(crate) fn scroll_log(state: &mut AppState, d: isize) {
    let (w, h) = log_size(state);
    let max = logview::max_scroll(state, w, h);
    state.view.log_scroll = bump(state.view.log_scroll, -d, max + 1);
}

pub(crate) fn on_resize(state: &mut AppState, w: u16, h: u16) {
    state.view.screen = (w, h);
    let max = state.view.diff.max_cols.saturating_sub(code_cols(state));
    state.view.diff_hscroll = state.view.diff_hscroll.min(max);
    if state.view.log_scroll > 0 {
        let (w, h) = log_size(state);
        state.view.log_scroll = state.view.log_scroll.min(logview::max_scroll(state, w, h));
    }
}

/// Enter: on an operator, to its revisions; on a revision, to its code.
pub(crate) fn open_selected(state: &mut AppState) {
    state.view.focus = match state.view.focus {
        PaneId::Operators => PaneId::Revisions,
        PaneId::Revisions => PaneId::Diff,
        other => other,
    };
}
