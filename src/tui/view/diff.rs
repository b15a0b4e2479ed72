//! The diff pane: the selected revision's diff or full source, or the agent's iteration as it
//! happens (its tool calls, with the budgets spent, and the reply being streamed). The code
//! scrolls sideways past the gutter, which stays; `‹` in the gutter and `›` on the right border
//! mark a line cut on that side. A search's matches are marked, the current one stronger.

use super::{match_style, pane_block, search_label};
use crate::tui::search::code_matches;
use crate::tui::state::AppState;
use crate::tui::text;
use crate::tui::view_state::{DiffMode, PaneId};
use crate::tui::workbench::AgentView;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub(crate) fn draw_diff(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.view.theme;
    // The agent's iteration on the selected operator (its tool calls and the reply being
    // streamed) replaces the diff while it runs.
    if let Some(a) = s
        .selected_op()
        .and_then(|op| s.work.running_agent(&op))
        .filter(|a| !a.stream.is_empty() || !a.tools.is_empty())
    {
        draw_agent(f, r, s, a);
        return;
    }
    let d = &s.view.diff;
    let mode = match (s.view.full_source, s.view.diff_mode) {
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
    let start = s.view.diff_scroll.min(d.lines.len().saturating_sub(1));
    let code_w = (r.width.saturating_sub(2) as usize).saturating_sub(d.gutter);
    let hs = s.view.diff_hscroll;
    let search = s.view.search.as_ref().filter(|q| !q.query.is_empty());
    let mut cut_right = Vec::new();
    let mut lines: Vec<Line> = Vec::with_capacity(h);
    for (row, i) in (start..d.lines.len()).take(h).enumerate() {
        let (mut gutter, mut code) = d.split(i);
        let plain = text::plain(&code);
        if let Some(q) = search {
            let hits = text::find(&plain, &q.query);
            let cur: Vec<_> = hits
                .iter()
                .filter(|m| q.code_hit.as_ref() == Some(&(i, (*m).clone())))
                .cloned()
                .collect();
            code = text::patch(code, &hits, match_style(t, false));
            code = text::patch(code, &cur, match_style(t, true));
        }
        let width = text::cols(&plain);
        if hs > 0 && width > 0 {
            // the gutter's last column (a space) says the line goes on to the left
            if let Some(last) = gutter.last_mut()
                && last.content.ends_with(' ')
            {
                let mut c = last.content.to_string();
                c.pop();
                last.content = c.into();
                gutter.push(Span::styled("‹", Style::default().fg(t.accent)));
            }
        }
        if width > hs + code_w {
            cut_right.push(row);
        }
        gutter.extend(text::window_cols(&code, hs, code_w));
        lines.push(Line::from(gutter).style(d.lines[i].style));
    }
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
    // where the view is: the search, the line, the column
    let mut at = Vec::new();
    if let Some(q) = search.filter(|_| s.view.focus == PaneId::Diff) {
        let all = code_matches(d, &q.query);
        let cur = q
            .code_hit
            .as_ref()
            .and_then(|h| all.iter().position(|m| m == h));
        at.push(search_label(&q.query, cur, all.len()));
    }
    if d.lines.len() > h {
        at.push(format!("{}/{}", start + 1, d.lines.len()));
    }
    if hs > 0 {
        at.push(format!("col {}", hs + 1));
    }
    if !at.is_empty() {
        b = b.title_bottom(
            Line::from(Span::styled(
                format!(" {} ", at.join(" · ")),
                Style::default().fg(t.dim),
            ))
            .right_aligned(),
        );
    }
    f.render_widget(Paragraph::new(lines).block(b), r);
    // `›` on the right border: the line goes on past the pane
    let x = r.right().saturating_sub(1);
    for row in cut_right {
        let y = r.y + 1 + row as u16;
        if y + 1 < r.bottom() {
            f.buffer_mut()[(x, y)]
                .set_symbol("›")
                .set_style(Style::default().fg(t.accent));
        }
    }
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
    let t = &s.view.theme;
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
    if let Some(b) = s.work.agent_cfg.as_ref().ok().map(|c| c.budget.tools)
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
