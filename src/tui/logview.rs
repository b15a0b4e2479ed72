//! The log as the log pane shows it: the session's lines and the UI's merged by time (each list
//! is in time order; at equal times the session's line comes first), each wrapped into rows of
//! the pane's width, the newest at the bottom. Update and view both count rows here, so a
//! scroll position (rows from the bottom) means the same to both.

use super::state::AppState;
use super::text;
use crate::session::model::LogLine;

/// Continuation rows of a wrapped line start this many columns in.
pub const INDENT: usize = 2;

/// A line of the log: the session's (`model.log`) or the UI's (`ui_log`), by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogRef {
    Session(usize),
    Ui(usize),
}

/// The log's lines, newest first.
pub fn newest_first(s: &AppState) -> impl Iterator<Item = (LogRef, &LogLine)> + '_ {
    let (a, b) = (&s.work.model.log, &s.work.ui_log);
    let (mut i, mut j) = (a.len(), b.len());
    std::iter::from_fn(move || {
        // the later of the two tails; at a tie the UI's line is the later one
        let take_ui = match (i.checked_sub(1), j.checked_sub(1)) {
            (None, None) => return None,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (Some(x), Some(y)) => b[y].t >= a[x].t,
        };
        if take_ui {
            j -= 1;
            Some((LogRef::Ui(j), &b[j]))
        } else {
            i -= 1;
            Some((LogRef::Session(i), &a[i]))
        }
    })
}

/// The rows a line takes in a pane `width` columns wide.
pub fn rows(line: &LogLine, width: usize) -> usize {
    text::wrap(&line.text, width, INDENT).len()
}

/// All the rows of the log.
pub fn total_rows(s: &AppState, width: usize) -> usize {
    newest_first(s).map(|(_, l)| rows(l, width)).sum()
}

/// The largest scroll (rows from the bottom) that still fills a pane of `height` rows.
pub fn max_scroll(s: &AppState, width: usize, height: usize) -> usize {
    total_rows(s, width).saturating_sub(height)
}

/// The rows below line `at` (its newer lines), or None when the log has no such line.
pub fn rows_below(s: &AppState, at: LogRef, width: usize) -> Option<usize> {
    let mut n = 0;
    for (r, l) in newest_first(s) {
        if r == at {
            return Some(n);
        }
        n += rows(l, width);
    }
    None
}

/// The line at the bottom of a view scrolled `scroll` rows up (None: an empty log).
pub fn bottom_line(s: &AppState, scroll: usize, width: usize) -> Option<LogRef> {
    let mut n = 0;
    let mut last = None;
    for (r, l) in newest_first(s) {
        n += rows(l, width);
        last = Some(r);
        if n > scroll {
            return last;
        }
    }
    last
}
