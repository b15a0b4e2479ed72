//! The help modal: the key table by section, descriptions wrapped to the width.

use super::{block, centered};
use crate::tui::keymap::help_rows;
use crate::tui::state::AppState;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

/// Words of `text` in lines of at most `w` characters.
fn wrap_words(text: &str, w: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        let n = cur.chars().count();
        if n > 0 && n + 1 + word.chars().count() > w {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(cur);
    }
    out
}

pub(super) fn draw_help(f: &mut Frame, area: Rect, s: &AppState, scroll: u16) {
    let t = &s.view.theme;
    let w = area.width.min(100);
    // key column: 2 + 30 + 1; the description wraps in what is left
    let desc_w = (w.saturating_sub(2) as usize).saturating_sub(33).max(16);
    let mut lines = Vec::new();
    let mut last = "";
    for (sec, k, what) in help_rows() {
        if sec != last {
            lines.push(Line::from(Span::styled(
                sec.to_string(),
                Style::default().fg(t.accent).add_modifier(Modifier::BOLD),
            )));
            last = sec;
        }
        for (i, part) in wrap_words(what, desc_w).into_iter().enumerate() {
            let key = if i == 0 { k } else { "" };
            lines.push(Line::from(vec![
                Span::styled(
                    format!("  {key:<30} "),
                    Style::default().fg(t.fg).add_modifier(Modifier::BOLD),
                ),
                Span::styled(part, Style::default().fg(t.dim)),
            ]));
        }
    }
    let r = centered(area, w, lines.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).scroll((scroll, 0)).block(block(
            t,
            true,
            "keys · Esc closes · j/k scroll",
        )),
        r,
    );
}
