//! The footer: the key bar of the commands available now, or the search prompt (`/query▏`)
//! followed by the prompt's keys while a search is typed.

use crate::tui::keymap::key_bar_within;
use crate::tui::state::AppState;
use crate::tui::text;
use crate::tui::view_state::Modal;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub(super) fn draw_footer(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.view.theme;
    let mut spans = vec![Span::raw(" ")];
    if let Modal::Search(p) = &s.view.modal {
        spans.push(Span::styled(
            "/",
            Style::default().fg(t.accent).add_modifier(Modifier::BOLD),
        ));
        spans.push(Span::styled(p.text.clone(), Style::default().fg(t.fg)));
        // the cursor
        spans.push(Span::styled(" ", Style::default().bg(t.fg)));
        spans.push(Span::raw("   "));
    }
    let used: usize = spans.iter().map(|x| text::cols(&x.content)).sum();
    for (k, what) in key_bar_within(s, (r.width as usize).saturating_sub(used)) {
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
