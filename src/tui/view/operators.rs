//! The operators pane: a table of each operator's weight, S_op (the session's incumbent as
//! measured here, else the standing's record; a stale one dimmed with `~`), status (`▶ agent`
//! where an agent is at work) and history sparkline. A search's matches in the names are marked.

use super::{match_style, pane_block, s_color, search_label, window};
use crate::session::model::OpStatus;
use crate::standing::Layer;
use crate::tui::state::AppState;
use crate::tui::text;
use crate::tui::view_state::PaneId;
use crate::tui::workbench::Figure;
use ratatui::prelude::*;
use ratatui::widgets::{Row, Table};

const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

pub fn sparkline(values: &[f64], width: usize) -> String {
    let v: Vec<f64> = values.iter().rev().take(width).rev().copied().collect();
    let max = v.iter().copied().fold(0.0f64, f64::max);
    if v.is_empty() || max <= 0.0 {
        return String::new();
    }
    v.iter()
        .map(|x| SPARK[((x / max) * 7.0).round().clamp(0.0, 7.0) as usize])
        .collect()
}

pub(crate) fn draw_operators(f: &mut Frame, r: Rect, s: &AppState, narrow: bool) {
    let t = &s.view.theme;
    let ops = s.visible_ops();
    let weights = s.work.suite.weights(s.view.phase);
    let h = r.height.saturating_sub(3) as usize;
    let start = window(s.view.op_sel, h, ops.len());
    let rows: Vec<Row> = ops
        .iter()
        .enumerate()
        .skip(start)
        .take(h)
        .map(|(i, name)| {
            let o = s.work.model.ops.get(name);
            let figure = s.work.figure(name);
            let status = o.map(|o| o.status()).unwrap_or(OpStatus::Untouched);
            // An operator this session has not touched shows where its figure comes from.
            let label = match (status, figure) {
                (OpStatus::Untouched, Figure::Standing(_, Layer::Shipped)) => "shipped",
                (OpStatus::Untouched, Figure::Standing(_, Layer::Workspace)) => "standing",
                (OpStatus::Untouched, Figure::Stale(_)) => "stale",
                _ => status.label(),
            };
            // An agent at work on the operator shows first (several run at once).
            let agent = s.work.running_agent(name).map(|_| {
                match s.work.model.agents.get(name).map(|r| r.state.as_str()) {
                    Some("waiting") => "waits y/n",
                    _ => "agent",
                }
            });
            let label = agent.unwrap_or(label);
            let (sym, sc) = match (status, figure) {
                _ if agent.is_some() => ("▶", t.accent),
                (OpStatus::Untouched, Figure::Standing(..)) => ("○", t.dim),
                (OpStatus::Untouched, Figure::Stale(_)) => ("~", t.warn),
                (OpStatus::Untouched, _) => ("·", t.dim),
                (OpStatus::Measured, _) => ("○", t.dim),
                (OpStatus::Tried, _) => ("○", t.dim),
                (OpStatus::Pending, _) => ("◆", t.info),
                (OpStatus::Measuring, _) => ("◔", t.warn),
                (OpStatus::Interrupted, _) => ("◌", t.warn),
                (OpStatus::Improved, _) => ("▲", t.good),
                (OpStatus::Failing, _) => ("✗", t.bad),
            };
            let hist = o.map(|o| o.history()).unwrap_or_default();
            let query = s
                .view
                .search
                .as_ref()
                .map(|q| q.query.as_str())
                .unwrap_or("");
            let hits = text::find(name, query);
            let mut cells = vec![
                Line::from(text::patch(
                    vec![Span::raw(name.clone())],
                    &hits,
                    match_style(t, i == s.view.op_sel),
                )),
                Line::from(Span::styled(
                    format!(
                        "{:>5.1}%",
                        weights.get(name).copied().unwrap_or(0.0) * 100.0
                    ),
                    Style::default().fg(t.dim),
                )),
                Line::from(match figure {
                    Figure::Live(b) | Figure::Standing(b, _) => {
                        Span::styled(format!("{b:.3}"), Style::default().fg(s_color(s, b)))
                    }
                    // Stale: what it was, dimmed and marked; it counts 0.
                    Figure::Stale(b) => Span::styled(
                        format!("{b:.3}~"),
                        Style::default().fg(t.dim).add_modifier(Modifier::DIM),
                    ),
                    Figure::None => Span::styled("  —  ", Style::default().fg(t.dim)),
                }),
                Line::from(Span::styled(
                    if narrow {
                        sym.to_string()
                    } else {
                        format!("{sym} {label}")
                    },
                    Style::default().fg(sc),
                )),
            ];
            cells.push(Line::from(Span::styled(
                sparkline(&hist, if narrow { 4 } else { 8 }),
                Style::default().fg(t.info),
            )));
            let mut row = Row::new(cells);
            if i == s.view.op_sel {
                row = row.style(
                    Style::default()
                        .bg(t.selection_bg)
                        .add_modifier(Modifier::BOLD),
                );
            }
            row
        })
        .collect();
    let widths: Vec<Constraint> = if narrow {
        vec![
            Constraint::Fill(1),
            Constraint::Length(6),
            Constraint::Length(6),
            Constraint::Length(1),
            Constraint::Length(4),
        ]
    } else {
        vec![
            Constraint::Fill(1),
            Constraint::Length(6),
            Constraint::Length(6),
            Constraint::Length(13),
            Constraint::Length(8),
        ]
    };
    let header = Row::new(vec![
        "operator",
        "weight",
        "S_op",
        if narrow { "" } else { "status" },
        if narrow { "hist" } else { "history" },
    ])
    .style(Style::default().fg(t.dim));
    let mut title = format!("operators · {} [P]", s.view.phase.name());
    if s.view.focus == PaneId::Operators
        && let Some(q) = s.view.search.as_ref().filter(|q| !q.query.is_empty())
    {
        let found: Vec<usize> = ops
            .iter()
            .enumerate()
            .filter(|(_, n)| text::matches(n, &q.query))
            .map(|(i, _)| i)
            .collect();
        let cur = found.iter().position(|i| *i == s.view.op_sel);
        title.push_str(&format!(" · {}", search_label(&q.query, cur, found.len())));
    }
    f.render_widget(
        Table::new(rows, widths)
            .header(header)
            .column_spacing(1)
            .block(pane_block(s, PaneId::Operators, &title)),
        r,
    );
}
