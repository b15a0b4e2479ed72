//! Rendering: a pure function of the state (`draw`). Every pane draws only what is visible.
//! This module lays the panes out and holds the helpers they share; each pane and modal draws
//! in its own file.

mod confirm;
mod diff;
mod editor;
mod footer;
mod header;
mod help;
mod layout;
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

use super::state::AppState;
use super::view_state::{Modal, PaneId};
use confirm::draw_confirm;
pub(crate) use diff::draw_diff;
use editor::draw_editor;
use footer::draw_footer;
pub use header::agent_label;
pub(crate) use header::{draw_header, header_height};
use help::draw_help;
pub use layout::{Areas, OpTable, areas, code_cols, diff_rows, left_width, log_size};
pub(crate) use log::draw_log;
pub(crate) use operators::draw_operators;
pub use operators::sparkline;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Block, BorderType, Borders, Paragraph};
use replay_bar::draw_replay_bar;
pub(crate) use revisions::draw_revisions;
use sessions::draw_sessions;
pub(crate) use shapes::draw_gauges;
use steer::draw_steer;

pub fn draw(f: &mut Frame, s: &AppState) {
    let t = &s.view.theme;
    let area = f.area();
    f.render_widget(
        Block::default().style(Style::default().bg(t.bg).fg(t.fg)),
        area,
    );
    if area.width < 20 || area.height < 8 {
        f.render_widget(Paragraph::new("atrex-tui: terminal too small"), area);
        return;
    }
    let a = areas(s, area);
    draw_header(f, a.header, s);
    draw_operators(f, a.operators, s, a.table);
    draw_revisions(f, a.revisions, s, a.table == OpTable::Compact);
    if a.diff_shown {
        draw_diff(f, a.diff, s);
    }
    if let Some(g) = a.gauges {
        draw_gauges(f, g, s);
    }
    if s.work.replay.is_some() {
        draw_replay_bar(f, a.replay, s);
    }
    draw_log(f, a.log, s);
    draw_footer(f, a.footer, s);
    match &s.view.modal {
        Modal::None | Modal::Search(_) => {}
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
        &s.view.theme,
        s.view.focus == id
            && matches!(
                s.view.modal,
                Modal::None | Modal::Help { .. } | Modal::Search(_)
            ),
        title,
    )
}

/// A search match: the current one (where `n` moved to) stronger than the others.
fn match_style(t: &super::theme::Theme, current: bool) -> Style {
    let st = Style::default().fg(t.bg).add_modifier(Modifier::BOLD);
    if current {
        st.bg(t.accent)
    } else {
        st.bg(t.warn)
    }
}

/// What a pane's title says of the search: `/query 2/5`, `/query 5 matches`, `/query no match`.
fn search_label(query: &str, current: Option<usize>, n: usize) -> String {
    match (n, current) {
        (0, _) => format!("/{query} no match"),
        (_, Some(i)) => format!("/{query} {}/{n}", i + 1),
        (1, None) => format!("/{query} 1 match"),
        _ => format!("/{query} {n} matches"),
    }
}

fn s_color(s: &AppState, v: f64) -> Color {
    if v >= 0.6 {
        s.view.theme.good
    } else if v >= 0.3 {
        s.view.theme.warn
    } else {
        s.view.theme.bad
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
