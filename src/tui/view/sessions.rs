//! The recorded-sessions modal (no GPU): the sessions to open in replay.

use super::{block, centered, window};
use crate::tui::state::AppState;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

/// No GPU: the recorded sessions, to open one in replay.
pub(super) fn draw_sessions(f: &mut Frame, area: Rect, s: &AppState, sel: usize) {
    let t = &s.view.theme;
    let files = &s.work.recorded_sessions;
    let w = area.width.saturating_sub(4).min(76);
    let h = (files.len() as u16 + 5).min(area.height.saturating_sub(2));
    let r = centered(area, w, h);
    f.render_widget(Clear, r);
    let rows = h.saturating_sub(5) as usize;
    let start = window(sel, rows, files.len());
    let mut lines = vec![Line::from(Span::styled(
        "no GPU: browse and replay only — open a recorded session?",
        Style::default().fg(t.warn).add_modifier(Modifier::BOLD),
    ))];
    lines.push(Line::from(""));
    let name_w = (w as usize).saturating_sub(2 + 33).max(12);
    for (i, x) in files.iter().enumerate().skip(start).take(rows) {
        let size = if x.bytes >= 1 << 20 {
            format!("{:.1} MiB", x.bytes as f64 / (1u64 << 20) as f64)
        } else {
            format!("{} KiB", x.bytes.div_ceil(1024))
        };
        let name: String = x.name.chars().take(name_w).collect();
        let mut style = Style::default().fg(t.fg);
        if i == sel {
            style = style.bg(t.selection_bg).add_modifier(Modifier::BOLD);
        }
        lines.push(Line::from(vec![
            Span::styled(format!("{} ", if i == sel { "▶" } else { " " }), style),
            Span::styled(format!("{name:<name_w$}"), style),
            Span::styled(format!(" {size:>9}"), style.fg(t.dim)),
            Span::styled(
                format!(
                    " {:>11}",
                    x.events.map(|n| format!("{n} events")).unwrap_or_default()
                ),
                style.fg(t.dim),
            ),
            Span::styled(
                if x.path.is_none() { " built-in" } else { "" },
                style.fg(t.info),
            ),
        ]));
    }
    lines.push(Line::from(Span::styled(
        "Enter replays (read-only) · j/k choose · Esc dismisses",
        Style::default().fg(t.dim),
    )));
    f.render_widget(
        Paragraph::new(lines).block(block(t, true, "recorded sessions")),
        r,
    );
}
