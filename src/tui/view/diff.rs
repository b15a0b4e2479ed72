//! The diff pane: the selected revision's diff or full source, or the agent's iteration as it
//! happens (its tool calls, with the budgets spent, and the reply being streamed).

use super::pane_block;
use crate::tui::app::{AgentView, AppState, DiffMode, PaneId};
use ratatui::prelude::*;
use ratatui::widgets::Paragraph;

pub(crate) fn draw_diff(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.theme;
    // The agent's iteration on the selected operator (its tool calls and the reply being
    // streamed) replaces the diff while it runs.
    if let Some(a) = s
        .selected_op()
        .and_then(|op| s.running_agent(&op))
        .filter(|a| !a.stream.is_empty() || !a.tools.is_empty())
    {
        draw_agent(f, r, s, a);
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

/// A token count in a few characters: 950, 1.1k, 250k.
fn thousands(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        1000..10_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{}k", n / 1000),
    }
}

/// The agent pane: the iteration's tool calls (at most half the height, the latest), then the
/// tail of the reply being streamed; the title shows the budgets spent.
fn draw_agent(f: &mut Frame, r: Rect, s: &AppState, a: &AgentView) {
    let t = &s.theme;
    let h = r.height.saturating_sub(2) as usize;
    let mut lines: Vec<Line> = Vec::new();
    let room = if a.stream.is_empty() { h } else { h / 2 };
    for l in a.tools.iter().skip(a.tools.len().saturating_sub(room)) {
        let (mark, colour) = match l.ok {
            None => ("▸ ", t.dim),
            Some(true) => ("✓ ", t.fg),
            Some(false) => ("✗ ", t.bad),
        };
        lines.push(Line::from(vec![
            Span::styled(mark, Style::default().fg(colour)),
            Span::styled(l.text.clone(), Style::default().fg(colour)),
        ]));
    }
    let all: Vec<&str> = a.stream.lines().collect();
    let left = h.saturating_sub(lines.len());
    lines.extend(
        all.iter()
            .skip(all.len().saturating_sub(left))
            .map(|l| Line::from(Span::styled(l.to_string(), Style::default().fg(t.dim)))),
    );
    let mut title = format!("agent · {}", a.backend);
    if let Some(b) = s.agent_cfg.as_ref().ok().map(|c| c.budget.tools)
        && !a.tools.is_empty()
    {
        title.push_str(&format!(
            " · calls {}/{} · GPU {:.0}/{:.0} s · tokens {}/{}",
            a.spent.calls,
            b.max_calls,
            a.spent.gpu_s,
            b.max_gpu_s,
            thousands(a.spent.tokens),
            thousands(b.max_tokens)
        ));
    }
    if !a.stream.is_empty() {
        title.push_str(" (streaming)");
    }
    f.render_widget(
        Paragraph::new(lines).block(pane_block(s, PaneId::Diff, &title)),
        r,
    );
}
