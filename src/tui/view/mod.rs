//! Rendering: a pure function of the state (`draw`). Every pane draws only what is visible.
//! This module lays the panes out and holds the helpers they share; each pane and modal draws
//! in its own file.

mod confirm;
mod diff;
mod editor;
mod footer;
mod header;
mod help;
mod log;
mod operators;
mod profile;
mod replay_bar;
mod revisions;
mod roofline;
mod sessions;
mod shapes;
#[cfg(test)]
pub(crate) use shapes::shown_figures;
mod steer;

use super::app::{AppState, Modal, PaneId};
use confirm::draw_confirm;
pub(crate) use diff::draw_diff;
use editor::draw_editor;
use footer::draw_footer;
pub use header::agent_label;
pub(crate) use header::{draw_header, header_height};
use help::draw_help;
pub(crate) use log::draw_log;
pub(crate) use operators::draw_operators;
pub use operators::sparkline;
use ratatui::prelude::*;
use ratatui::widgets::{Block, BorderType, Borders, Paragraph};
use replay_bar::draw_replay_bar;
pub(crate) use revisions::draw_revisions;
use sessions::draw_sessions;
pub(crate) use shapes::draw_gauges;
use steer::draw_steer;

pub fn draw(f: &mut Frame, s: &AppState) {
    let t = &s.theme;
    let area = f.area();
    f.render_widget(
        Block::default().style(Style::default().bg(t.bg).fg(t.fg)),
        area,
    );
    if area.width < 20 || area.height < 8 {
        f.render_widget(Paragraph::new("atrex-tui: terminal too small"), area);
        return;
    }
    let wide = area.width >= 200;
    let tall = area.height >= 30;
    let log_h = if tall { 8 } else { 4 };
    let replay_h = if s.replay.is_some() { 1 } else { 0 };
    let rows = Layout::vertical([
        Constraint::Length(header_height(s)),
        Constraint::Min(6),
        Constraint::Length(replay_h),
        Constraint::Length(log_h),
        Constraint::Length(1),
    ])
    .split(area);
    draw_header(f, rows[0], s);
    let body = rows[1];
    let (left_w, full_table) = left_width(s, area.width);
    if wide {
        // Operators sized to their names; the diff keeps room for 80 columns of code.
        let gauges_w = area.width.saturating_sub(left_w + DIFF_MIN).clamp(44, 70);
        let cols = Layout::horizontal([
            Constraint::Length(left_w),
            Constraint::Min(DIFF_MIN),
            Constraint::Length(gauges_w),
        ])
        .split(body);
        let left = Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)])
            .split(cols[0]);
        draw_operators(f, left[0], s, !full_table);
        draw_revisions(f, left[1], s, !full_table);
        draw_diff(f, cols[1], s);
        draw_gauges(f, cols[2], s);
    } else {
        let cols =
            Layout::horizontal([Constraint::Length(left_w), Constraint::Min(20)]).split(body);
        let left = Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)])
            .split(cols[0]);
        draw_operators(f, left[0], s, !full_table);
        draw_revisions(f, left[1], s, !full_table);
        if s.focus == PaneId::Gauges {
            draw_gauges(f, cols[1], s);
        } else {
            draw_diff(f, cols[1], s);
        }
    }
    if s.replay.is_some() {
        draw_replay_bar(f, rows[2], s);
    }
    draw_log(f, rows[3], s);
    draw_footer(f, rows[4], s);
    match &s.modal {
        Modal::None => {}
        Modal::Help { scroll } => draw_help(f, area, s, *scroll),
        Modal::ConfirmQuit => draw_confirm(f, area, s),
        Modal::Steer(ta) => draw_steer(f, area, s, ta),
        Modal::Sessions { sel } => draw_sessions(f, area, s, *sel),
        Modal::Editor(_) => draw_editor(
            f,
            Rect {
                y: area.y + header_height(s),
                height: area.height.saturating_sub(header_height(s) + 1),
                ..area
            },
            s,
        ),
    }
}

fn block<'a>(t: &super::theme::Theme, focused: bool, title: &str) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(Style::default().fg(if focused { t.border_focus } else { t.border }))
        .title(Span::styled(
            format!(" {title} "),
            Style::default()
                .fg(if focused { t.accent } else { t.dim })
                .add_modifier(Modifier::BOLD),
        ))
        .style(Style::default().bg(t.bg).fg(t.fg))
}

fn pane_block<'a>(s: &AppState, id: PaneId, title: &str) -> Block<'a> {
    block(
        &s.theme,
        s.focus == id && matches!(s.modal, Modal::None | Modal::Help { .. }),
        title,
    )
}

fn s_color(s: &AppState, v: f64) -> Color {
    if v >= 0.6 {
        s.theme.good
    } else if v >= 0.3 {
        s.theme.warn
    } else {
        s.theme.bad
    }
}

pub fn fmt_ms(ms: f64) -> String {
    if !ms.is_finite() || ms <= 0.0 {
        "-".into()
    } else if ms < 1e-3 {
        format!("{:.0}ns", ms * 1e6)
    } else if ms < 1.0 {
        format!("{:.1}µs", ms * 1e3)
    } else if ms < 1000.0 {
        format!("{ms:.2}ms")
    } else {
        format!("{:.2}s", ms / 1e3)
    }
}

/// The first visible row so that `sel` is in a window of `h` rows.
fn window(sel: usize, h: usize, len: usize) -> usize {
    if h == 0 || len <= h {
        0
    } else {
        sel.saturating_sub(h / 2).min(len - h)
    }
}

/// The diff pane's width for 80 columns of code (gutter and borders included).
const DIFF_MIN: u16 = 92;

/// The operator column's width for this terminal, and whether its table has the full columns
/// (status words, an 8-wide history) or the compact ones. Names are never cut where the
/// terminal has room for them.
pub(crate) fn left_width(s: &AppState, width: u16) -> (u16, bool) {
    let name = s
        .suite
        .problems
        .iter()
        .map(|p| p.name.chars().count())
        .max()
        .unwrap_or(12)
        .max(12) as u16;
    // compact: name, weight 6, S_op 6, status 1, history 4, 4 gaps, 2 borders
    let compact = name + 23;
    // full: name, weight 6, S_op 6, status 13 ("◌ interrupted"), history 8, 4 gaps, 2 borders
    let full = name + 39;
    // three columns (≥ 200) keep at least 44 for the gauges
    let gauges = if width >= 200 { 44 } else { 0 };
    if width >= full + DIFF_MIN + gauges {
        (full, true)
    } else if width >= compact + 60 + gauges {
        (compact, false)
    } else {
        (36, false)
    }
}

fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}
