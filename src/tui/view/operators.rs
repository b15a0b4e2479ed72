//! The operators pane: a table of each operator's weight, S_op (the session's incumbent as
//! measured here, else the standing's record; a stale one dimmed with `~`), status (`▶ agent`
//! where an agent is at work; a symbol only, or in words where the layout has room) and
//! history sparkline. A search's matches in the names are marked.

use super::layout::OpTable;
use super::{match_style, pane_block, s_color, search_label, window};
use crate::session::model::OpStatus;
use crate::standing::Layer;
use crate::tui::state::AppState;
use crate::tui::text;
use crate::tui::view_state::PaneId;
use crate::tui::workbench::Figure;

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
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

pub(crate) fn draw_operators(f: &mut Frame, r: Rect, s: &AppState, table: OpTable) {
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
            let weight = weights.get(name).copied().unwrap_or(0.0);
            op_row(s, i, name, weight, table)
        })
        .collect();
    let widths = [
        Constraint::Fill(1),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(table.status()),
        Constraint::Length(table.history()),
    ];
    let header = Row::new(vec![
        "operator",
        "weight",
        "S_op",
        if table == OpTable::Compact {
            ""
        } else {
            "status"
        },
        if table == OpTable::Full {
            "history"
        } else {
            "hist"
        },
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

/// An operator's row: its name (a search's matches marked), weight, S_op, status and history.
fn op_row<'a>(s: &AppState, i: usize, name: &str, weight: f64, table: OpTable) -> Row<'a> {
    let t = &s.view.theme;
    let figure = s.work.figure(name);
    let (sym, label, sc) = status(s, name, figure);
    let hist = s
        .work
        .model
        .ops
        .get(name)
        .map(|o| o.history())
        .unwrap_or_default();
    let query = s
        .view
        .search
        .as_ref()
        .map(|q| q.query.as_str())
        .unwrap_or("");
    let hits = text::find(name, query);
    let cells = vec![
        Line::from(text::patch(
            vec![Span::raw(name.to_string())],
            &hits,
            match_style(t, i == s.view.op_sel),
        )),
        Line::from(Span::styled(
            format!("{:>5.1}%", weight * 100.0),
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
            match table {
                OpTable::Compact => sym.to_string(),
                OpTable::Words | OpTable::Full => format!("{sym} {label}"),
            },
            Style::default().fg(sc),
        )),
        Line::from(Span::styled(
            sparkline(&hist, table.history() as usize),
            Style::default().fg(t.info),
        )),
    ];
    let row = Row::new(cells);
    if i == s.view.op_sel {
        row.style(
            Style::default()
                .bg(t.selection_bg)
                .add_modifier(Modifier::BOLD),
        )
    } else {
        row
    }
}

/// An operator's status: its symbol, its word and their colour. An agent at work on it shows
/// first (several run at once); one this session has not touched shows where its figure comes
/// from. The words fit the status column (`STATUS_COLS`): an interrupted measurement is
/// `cut off`.
fn status(s: &AppState, name: &str, figure: Figure) -> (&'static str, &'static str, Color) {
    let t = &s.view.theme;
    let status = s
        .work
        .model
        .ops
        .get(name)
        .map(|o| o.status())
        .unwrap_or(OpStatus::Untouched);
    let label = match (status, figure) {
        (OpStatus::Untouched, Figure::Standing(_, Layer::Shipped)) => "shipped",
        (OpStatus::Untouched, Figure::Standing(_, Layer::Workspace)) => "standing",
        (OpStatus::Untouched, Figure::Stale(_)) => "stale",
        (OpStatus::Interrupted, _) => "cut off",
        _ => status.label(),
    };
    let agent = s.work.running_agent(name).map(|_| {
        match s.work.model.agents.get(name).map(|r| r.state.as_str()) {
            Some("waiting") => "waits y/n",
            _ => "agent",
        }
    });
    let (sym, colour) = match (status, figure) {
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
    (sym, agent.unwrap_or(label), colour)
}
