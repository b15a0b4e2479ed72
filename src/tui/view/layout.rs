//! Where each pane goes: a pure function of the state and the terminal's size. `draw` lays the
//! screen out with it, and `update` asks it how many rows and columns a pane shows (sideways
//! scroll limits, the log's wrapped rows, bringing a search match into view), so both agree.
//!
//! The rules: from 200 columns three columns (operators and revisions, code, shapes); under 200
//! the right column shows the code, or the shapes while they have the focus. The operators
//! column is as wide as the names need where there is room; from 160 columns the code pane
//! keeps 80 columns for the code itself, beside its borders and gutter, and the names are cut
//! before the code is. The operators table shows its status in words (and the revisions their
//! decisions) wherever the names fit whole beside them: with the built-in suite's longest name
//! (28 characters) from 160 columns, at 200 beside the shapes pane too (with a 4-wide history).

use super::header_height;
use crate::tui::highlight::gutter_cols;
use crate::tui::state::AppState;
use crate::tui::view_state::PaneId;
use ratatui::layout::{Constraint, Layout, Rect};

/// Columns of code the code pane keeps from 160 columns up.
pub const CODE_COLS: u16 = 80;

/// The operators table's status column in words: as wide as its longest, `◔ measuring`
/// (`○ untouched`, `▶ waits y/n`; an interrupted measurement is `◌ cut off`).
pub const STATUS_COLS: u16 = 11;

/// How much the operators table shows beside the names (the revisions pane spells its
/// decisions out unless it is compact).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpTable {
    /// A status symbol and a 4-wide history.
    Compact,
    /// The status in words and a 4-wide history.
    Words,
    /// The status in words and an 8-wide history.
    Full,
}

impl OpTable {
    /// Columns the history sparkline takes.
    pub fn history(self) -> u16 {
        match self {
            OpTable::Full => 8,
            OpTable::Compact | OpTable::Words => 4,
        }
    }

    /// Columns the status takes.
    pub fn status(self) -> u16 {
        match self {
            OpTable::Compact => 1,
            OpTable::Words | OpTable::Full => STATUS_COLS,
        }
    }
}

/// The panes' rectangles on a screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub header: Rect,
    pub operators: Rect,
    pub revisions: Rect,
    /// The code pane's place (under 200 columns shared with the shapes).
    pub diff: Rect,
    /// Whether the code pane is drawn (under 200 columns the shapes take its place while they
    /// have the focus).
    pub diff_shown: bool,
    pub gauges: Option<Rect>,
    pub replay: Rect,
    pub log: Rect,
    pub footer: Rect,
    /// What the operators table shows beside the names.
    pub table: OpTable,
}

pub fn areas(s: &AppState, area: Rect) -> Areas {
    let wide = area.width >= 200;
    let tall = area.height >= 30;
    let log_h = if tall { 8 } else { 4 };
    let replay_h = if s.work.replay.is_some() { 1 } else { 0 };
    let rows = Layout::vertical([
        Constraint::Length(header_height(s)),
        Constraint::Min(6),
        Constraint::Length(replay_h),
        Constraint::Length(log_h),
        Constraint::Length(1),
    ])
    .split(area);
    let body = rows[1];
    let (left_w, table) = left_width(s, area.width);
    let (left, diff, diff_shown, gauges) = if wide {
        let dmin = diff_min(s);
        let gauges_w = area.width.saturating_sub(left_w + dmin).clamp(44, 70);
        let cols = Layout::horizontal([
            Constraint::Length(left_w),
            Constraint::Min(dmin),
            Constraint::Length(gauges_w),
        ])
        .split(body);
        let left = Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)])
            .split(cols[0]);
        (left, cols[1], true, Some(cols[2]))
    } else {
        let cols =
            Layout::horizontal([Constraint::Length(left_w), Constraint::Min(20)]).split(body);
        let left = Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)])
            .split(cols[0]);
        let shapes = s.view.focus == PaneId::Gauges;
        (left, cols[1], !shapes, shapes.then_some(cols[1]))
    };
    Areas {
        header: rows[0],
        operators: left[0],
        revisions: left[1],
        diff,
        diff_shown,
        gauges,
        replay: rows[2],
        log: rows[3],
        footer: rows[4],
        table,
    }
}

/// The code pane's width for 80 columns of code: its borders, its gutter (line numbers of at
/// least four digits, so that the layout does not move between operators: the shipped
/// incumbents reach 1,152 lines) and the code.
pub fn diff_min(s: &AppState) -> u16 {
    2 + gutter_cols(4).max(s.view.diff.gutter) as u16 + CODE_COLS
}

/// The operator column's width for this terminal, and what its table shows beside the names:
/// the status in words with the full history, in words with a short one, or compact. Names
/// are never cut where the terminal has room for them and, from 160 columns, for 80 columns of
/// code beside them (and from 200 the shapes pane's 44).
pub fn left_width(s: &AppState, width: u16) -> (u16, OpTable) {
    let name = s
        .work
        .suite
        .problems
        .iter()
        .map(|p| p.name.chars().count())
        .max()
        .unwrap_or(12)
        .max(12) as u16;
    // name, weight 6, S_op 6, status, history, 4 gaps, 2 borders
    let cols = |t: OpTable| name + 18 + t.status() + t.history();
    // three columns (≥ 200) keep at least 44 for the gauges
    let gauges = if width >= 200 { 44 } else { 0 };
    let dmin = diff_min(s);
    let compact = cols(OpTable::Compact);
    if let Some(t) = [OpTable::Full, OpTable::Words]
        .into_iter()
        .find(|t| width >= cols(*t) + dmin + gauges)
    {
        (cols(t), t)
    } else if width >= 160 {
        // the code keeps its 80 columns: the names are cut first
        (
            compact.min(width.saturating_sub(dmin + gauges)),
            OpTable::Compact,
        )
    } else if width >= compact + 60 + gauges {
        (compact, OpTable::Compact)
    } else {
        (36, OpTable::Compact)
    }
}

fn on_screen(s: &AppState) -> Areas {
    areas(s, Rect::new(0, 0, s.view.screen.0, s.view.screen.1))
}

/// Columns of code the code pane shows on the screen (after its borders and gutter).
pub fn code_cols(s: &AppState) -> usize {
    (on_screen(s).diff.width.saturating_sub(2) as usize).saturating_sub(s.view.diff.gutter)
}

/// Rows the code pane shows on the screen.
pub fn diff_rows(s: &AppState) -> usize {
    on_screen(s).diff.height.saturating_sub(2) as usize
}

/// The log pane's text area on the screen: (columns, rows).
pub fn log_size(s: &AppState) -> (usize, usize) {
    let r = on_screen(s).log;
    (
        r.width.saturating_sub(2) as usize,
        r.height.saturating_sub(2) as usize,
    )
}
