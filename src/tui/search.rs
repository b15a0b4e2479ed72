//! The search (`/`): what it holds, and its matches in each pane it searches — the operators'
//! names, the code pane's code (the text after the gutter, compile errors included) and the log.
//! Matching is `text::find`'s (smart case). One query serves every pane, as in vim: set in the
//! operators, `n` in the code finds it there.
//!
//! Invariants: a code match is a (line of the diff view, byte range of that line's code) and
//! the ranges of one line are sorted and apart; the current code match is dropped whenever the
//! diff view is rebuilt, so it never points into another revision's lines.

use super::highlight::DiffView;
use super::logview::LogRef;
use super::text;
use super::view_state::PaneId;
use std::ops::Range;

/// A search set with `/` (kept after Enter until Esc clears it).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Search {
    pub query: String,
    /// The code pane's current match: its line in the diff view and range in that line's code.
    pub code_hit: Option<(usize, Range<usize>)>,
    /// The log's current match.
    pub log_hit: Option<LogRef>,
}

impl Search {
    pub fn new(query: &str) -> Search {
        Search {
            query: query.to_string(),
            ..Default::default()
        }
    }
}

/// Where the view was when `/` was pressed: Esc goes back there, and each key typed searches
/// again from there.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    pub focus: PaneId,
    pub op_sel: usize,
    pub rev_sel: usize,
    pub shape_sel: Option<usize>,
    pub gauge_scroll: usize,
    pub diff_scroll: usize,
    pub diff_hscroll: usize,
    pub log_scroll: usize,
    /// The search set before (Esc keeps it).
    pub search: Option<Search>,
}

/// The prompt in the bottom line while a query is typed.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchPrompt {
    pub text: String,
    pub origin: Origin,
}

/// Every match of `query` in the code pane, in reading order.
pub fn code_matches(d: &DiffView, query: &str) -> Vec<(usize, Range<usize>)> {
    (0..d.lines.len())
        .flat_map(|i| {
            text::find(&d.code(i), query)
                .into_iter()
                .map(move |r| (i, r))
        })
        .collect()
}

/// The next (or previous) item of `hits` after `from` in a cyclic order of `len` items, or
/// `from` itself when `inclusive` and it is one. `hits` is sorted.
pub fn cyclic(hits: &[usize], from: usize, forward: bool, inclusive: bool) -> Option<usize> {
    if hits.is_empty() {
        return None;
    }
    if inclusive && hits.binary_search(&from).is_ok() {
        return Some(from);
    }
    if forward {
        hits.iter().find(|&&h| h > from).or(hits.first()).copied()
    } else {
        hits.iter()
            .rev()
            .find(|&&h| h < from)
            .or(hits.last())
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::cyclic;

    #[test]
    fn cyclic_wraps_both_ways_and_stays_when_inclusive() {
        let h = [2, 5, 9];
        assert_eq!(cyclic(&h, 5, true, false), Some(9));
        assert_eq!(cyclic(&h, 9, true, false), Some(2));
        assert_eq!(cyclic(&h, 2, false, false), Some(9));
        assert_eq!(cyclic(&h, 6, false, false), Some(5));
        assert_eq!(cyclic(&h, 5, true, true), Some(5));
        assert_eq!(cyclic(&h, 6, true, true), Some(9));
        assert_eq!(cyclic(&[], 0, true, true), None);
    }
}
