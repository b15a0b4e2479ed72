//! The operators pane: a table of each operator's weight, best S, status and history sparkline.

use super::{pane_block, s_color, window};
use crate::session::model::OpStatus;
use crate::tui::app::{AppState, PaneId};
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
    let t = &s.theme;
    let ops = s.visible_ops();
    let weights = s.suite.weights(s.phase);
    let h = r.height.saturating_sub(3) as usize;
    let start = window(s.op_sel, h, ops.len());
    let rows: Vec<Row> = ops
        .iter()
        .enumerate()
        .skip(start)
        .take(h)
        .map(|(i, name)| {
            let o = s.model.ops.get(name);
            let best = o.and_then(|o| o.best_s());
            let status = o.map(|o| o.status()).unwrap_or(OpStatus::Untouched);
            let (sym, sc) = match status {
                OpStatus::Untouched => ("·", t.dim),
                OpStatus::Measured => ("○", t.dim),
                OpStatus::Tried => ("○", t.dim),
                OpStatus::Pending => ("◆", t.info),
                OpStatus::Measuring => ("◔", t.warn),
                OpStatus::Improved => ("▲", t.good),
                OpStatus::Failing => ("✗", t.bad),
            };
            let hist = o.map(|o| o.history()).unwrap_or_default();
            let mut cells = vec![
                Span::raw(name.clone()),
                Span::styled(
                    format!(
                        "{:>5.1}%",
                        weights.get(name).copied().unwrap_or(0.0) * 100.0
                    ),
                    Style::default().fg(t.dim),
                ),
                match best {
                    Some(b) => Span::styled(format!("{b:.3}"), Style::default().fg(s_color(s, b))),
                    None => Span::styled("  —  ", Style::default().fg(t.dim)),
                },
                Span::styled(
                    if narrow {
                        sym.to_string()
                    } else {
                        format!("{sym} {}", status.label())
                    },
                    Style::default().fg(sc),
                ),
            ];
            cells.push(Span::styled(
                sparkline(&hist, if narrow { 4 } else { 8 }),
                Style::default().fg(t.info),
            ));
            let mut row = Row::new(cells);
            if i == s.op_sel {
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
            Constraint::Length(5),
            Constraint::Length(1),
            Constraint::Length(4),
        ]
    } else {
        vec![
            Constraint::Fill(1),
            Constraint::Length(6),
            Constraint::Length(5),
            Constraint::Length(11),
            Constraint::Length(8),
        ]
    };
    let header = Row::new(vec![
        "operator",
        "weight",
        "best",
        if narrow { "" } else { "status" },
        if narrow { "hist" } else { "history" },
    ])
    .style(Style::default().fg(t.dim));
    let title = format!("operators · {} [P]", s.phase.name());
    f.render_widget(
        Table::new(rows, widths)
            .header(header)
            .column_spacing(1)
            .block(pane_block(s, PaneId::Operators, &title)),
        r,
    );
}
