//! The quit confirmation modal, while measurements are running.

use super::{block, centered};
use crate::tui::state::AppState;

use ratatui::Frame;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

pub(super) fn draw_confirm(f: &mut Frame, area: Rect, s: &AppState) {
    let t = &s.view.theme;
    let r = centered(area, 52, 5);
    f.render_widget(Clear, r);
    let n = s.work.jobs.len();
    f.render_widget(
        Paragraph::new(vec![
            Line::from(format!(
                "{n} measurement{} running.",
                if n == 1 { " is" } else { "s are" }
            )),
            Line::from(Span::styled(
                "Quit and cancel? y / n",
                Style::default().fg(t.warn).add_modifier(Modifier::BOLD),
            )),
        ])
        .alignment(Alignment::Center)
        .block(block(t, true, "quit")),
        r,
    );
}
