//! The diff pane: the selected revision's diff or full source, or the agent's streaming reply.

use super::pane_block;
use crate::tui::app::{AppState, DiffMode, PaneId};
use ratatui::prelude::*;
use ratatui::widgets::Paragraph;

pub(crate) fn draw_diff(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.theme;
    // A streaming LLM reply for the selected operator replaces the diff while it arrives.
    if let Some(a) = s.agent.as_ref().filter(|a| {
        a.running && !a.stream.is_empty() && s.selected_op().as_deref() == Some(a.op.as_str())
    }) {
        let h = r.height.saturating_sub(2) as usize;
        let all: Vec<&str> = a.stream.lines().collect();
        let lines: Vec<Line> = all
            .iter()
            .skip(all.len().saturating_sub(h))
            .map(|l| Line::from(Span::styled(l.to_string(), Style::default().fg(t.dim))))
            .collect();
        let title = format!("agent reply · {} (streaming)", a.backend);
        f.render_widget(
            Paragraph::new(lines).block(pane_block(s, PaneId::Diff, &title)),
            r,
        );
        return;
    }
    let d = &s.diff;
    let mode = match (s.full_source, s.diff_mode) {
        (true, _) => "[f]",
        (false, DiffMode::Parent) => "[d] +{a} −{r}",
        (false, DiffMode::Incumbent) => "[d] +{a} −{r}",
    };
    let title = format!(
        "{} {}",
        d.title,
        mode.replace("{a}", &d.added.to_string())
            .replace("{r}", &d.removed.to_string())
    );
    let h = r.height.saturating_sub(2) as usize;
    let start = s.diff_scroll.min(d.lines.len().saturating_sub(1));
    let lines: Vec<Line> = d.lines.iter().skip(start).take(h).cloned().collect();
    let mut b = pane_block(s, PaneId::Diff, &title);
    // Agent revisions: the knowledge given, tokens and request id.
    if let Some(rv) = s.selected_rev() {
        let mut parts = Vec::new();
        if !rv.knowledge.is_empty() {
            parts.push(format!("knowledge: {}", rv.knowledge.join(", ")));
        }
        if let Some((i, o)) = rv.tokens.filter(|(i, o)| i + o > 0) {
            parts.push(format!("tokens {i}+{o}"));
        }
        if let Some(id) = &rv.request_id {
            parts.push(format!("req {id}"));
        }
        if !parts.is_empty() {
            b = b.title_bottom(Line::from(Span::styled(
                format!(" {} ", parts.join(" · ")),
                Style::default().fg(t.dim),
            )));
        }
    }
    if d.lines.len() > h {
        b = b.title_bottom(
            Line::from(Span::styled(
                format!(" {}/{} ", start + 1, d.lines.len()),
                Style::default().fg(t.dim),
            ))
            .right_aligned(),
        );
    }
    f.render_widget(Paragraph::new(lines).block(b), r);
}
