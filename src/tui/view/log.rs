//! The log pane: the session log and the UI log merged by time.

use super::pane_block;
use crate::session::model::LogLevel;
use crate::tui::app::{AppState, PaneId};
use ratatui::prelude::*;
use ratatui::widgets::Paragraph;

pub(crate) fn draw_log(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.theme;
    let h = r.height.saturating_sub(2) as usize;
    let need = h + s.log_scroll;
    // merge the tails of the session log and the UI log by time
    let a = &s.model.log[s.model.log.len().saturating_sub(need)..];
    let b = &s.ui_log[s.ui_log.len().saturating_sub(need)..];
    let mut all: Vec<&crate::session::model::LogLine> = a.iter().chain(b.iter()).collect();
    all.sort_by(|x, y| x.t.total_cmp(&y.t));
    let end = all.len().saturating_sub(s.log_scroll);
    let lines: Vec<Line> = all[end.saturating_sub(h)..end]
        .iter()
        .map(|l| {
            let c = match l.level {
                LogLevel::Info => t.fg,
                LogLevel::Good => t.good,
                LogLevel::Warn => t.warn,
                LogLevel::Error => t.bad,
                LogLevel::Steer => t.steer,
            };
            Line::from(Span::styled(l.text.clone(), Style::default().fg(c)))
        })
        .collect();
    let title = if s.log_scroll > 0 {
        format!("log · {} lines up (G follows)", s.log_scroll)
    } else {
        "log".into()
    };
    f.render_widget(
        Paragraph::new(lines).block(pane_block(s, PaneId::Log, &title)),
        r,
    );
}
