//! The log pane: the session log and the UI log merged by time, the newest at the bottom, each
//! line wrapped to the pane (continuation rows indented); it follows the end unless scrolled up
//! (`log_scroll` rows from the bottom). A search's matches are marked.

use super::{match_style, pane_block, search_label};
use crate::session::model::LogLevel;
use crate::tui::logview::{INDENT, newest_first};
use crate::tui::state::AppState;
use crate::tui::text;
use crate::tui::view_state::PaneId;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub(crate) fn draw_log(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.view.theme;
    let w = r.width.saturating_sub(2) as usize;
    let h = r.height.saturating_sub(2) as usize;
    let need = h + s.view.log_scroll;
    let query = s
        .view
        .search
        .as_ref()
        .map(|q| q.query.as_str())
        .unwrap_or("");
    let current = s.view.search.as_ref().and_then(|q| q.log_hit);
    // rows from the bottom up, until the view is full
    let mut rows: Vec<Line> = Vec::with_capacity(need);
    for (at, l) in newest_first(s) {
        if rows.len() >= need {
            break;
        }
        let c = match l.level {
            LogLevel::Info => t.fg,
            LogLevel::Good => t.good,
            LogLevel::Warn => t.warn,
            LogLevel::Error => t.bad,
            LogLevel::Steer => t.steer,
        };
        let hits = text::find(&l.text, query);
        let hit_style = match_style(t, current == Some(at));
        let parts = text::wrap(&l.text, w, INDENT);
        for (i, part) in parts.iter().enumerate().rev() {
            // the matches within this row, in its own offsets
            let local: Vec<_> = hits
                .iter()
                .filter(|m| m.start < part.end && m.end > part.start)
                .map(|m| m.start.max(part.start) - part.start..m.end.min(part.end) - part.start)
                .collect();
            let body = vec![Span::styled(
                l.text[part.clone()].to_string(),
                Style::default().fg(c),
            )];
            let mut spans = if i > 0 {
                vec![Span::raw(" ".repeat(INDENT))]
            } else {
                vec![]
            };
            spans.extend(text::patch(body, &local, hit_style));
            rows.push(Line::from(spans));
        }
    }
    let end = rows.len().min(need);
    let lines: Vec<Line> = rows[s.view.log_scroll.min(end)..end]
        .iter()
        .rev()
        .cloned()
        .collect();
    let mut title = if s.view.log_scroll > 0 {
        format!("log · {} rows up (G follows)", s.view.log_scroll)
    } else {
        "log".into()
    };
    if s.view.focus == PaneId::Log
        && let Some(q) = s.view.search.as_ref().filter(|q| !q.query.is_empty())
    {
        let found: Vec<_> = newest_first(s)
            .filter(|(_, l)| text::matches(&l.text, &q.query))
            .map(|(at, _)| at)
            .collect();
        let cur = q.log_hit.and_then(|h| found.iter().position(|x| *x == h));
        title.push_str(&format!(" · {}", search_label(&q.query, cur, found.len())));
    }
    f.render_widget(
        Paragraph::new(lines).block(pane_block(s, PaneId::Log, &title)),
        r,
    );
}
