//! The footer: the key bar of the commands available now.

use crate::tui::app::AppState;
use crate::tui::keymap::key_bar;
use ratatui::prelude::*;
use ratatui::widgets::Paragraph;

pub(super) fn draw_footer(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.theme;
    let mut spans = vec![Span::raw(" ")];
    for (k, what) in key_bar(s) {
        spans.push(Span::styled(
            k,
            Style::default().fg(t.accent).add_modifier(Modifier::BOLD),
        ));
        spans.push(Span::styled(
            format!(" {what}  "),
            Style::default().fg(t.dim),
        ));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), r);
}
