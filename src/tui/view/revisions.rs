//! The revisions pane: the selected operator's revisions with their origin (baseline,
//! standing, hand edit, file, tuner, the agent's model), verdict (the standing's measurement
//! of a revision's very source where the session has none, marked `std`), decision and
//! rationale.

use super::{pane_block, s_color, window};
use crate::session::{Decision, RevVerdict};
use crate::tui::state::AppState;
use crate::tui::view_state::PaneId;

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Row, Table};

pub(crate) fn draw_revisions(f: &mut Frame, r: Rect, s: &AppState, narrow: bool) {
    let t = &s.view.theme;
    let op = s.selected_op().unwrap_or_default();
    let o = s.work.model.ops.get(&op);
    let revs = o.map(|o| o.revisions.as_slice()).unwrap_or(&[]);
    let h = r.height.saturating_sub(2) as usize;
    let start = window(s.view.rev_sel, h, revs.len());
    let mut rows: Vec<Row> = Vec::with_capacity(h);
    for (i, rv) in revs.iter().enumerate().skip(start).take(h) {
        let inc = o.and_then(|o| o.incumbent) == Some(rv.rev);
        let v = rv.verdict();
        let vc = match &v {
            RevVerdict::Score(x) => s_color(s, *x),
            RevVerdict::Measuring | RevVerdict::Interrupted => t.warn,
            RevVerdict::Unmeasured => t.dim,
            _ => t.bad,
        };
        // A revision not measured in this session whose very source the standing measured
        // shows the standing's figure.
        let standing = s.work.standing_measurement(&op, rv).map(|e| {
            let m = e.record.measurement.s_op;
            match e.fresh() {
                true => format!("S {m:.3} std"),
                false => format!("S {m:.3}~ std"),
            }
        });
        let (dec, dc) = match (rv.decision, inc) {
            (Some(Decision::Accepted), _) => (if narrow { "acc" } else { "accepted" }, t.good),
            (Some(Decision::Rejected), _) => (if narrow { "rej" } else { "rejected" }, t.bad),
            // Where the session started: the incumbent until another is accepted.
            (None, false) if rv.author.is_start() => (if narrow { "st" } else { "start" }, t.dim),
            (None, true) => (if narrow { "inc" } else { "incumbent" }, t.dim),
            (None, false) => (if narrow { "…" } else { "pending" }, t.warn),
        };
        let mut cells = vec![
            Span::styled(if inc { "★" } else { " " }, Style::default().fg(t.accent)),
            Span::raw(format!("v{}", rv.rev)),
            Span::styled(rv.origin(), Style::default().fg(t.info)),
            match standing {
                Some(label) => Span::styled(label, Style::default().fg(t.dim)),
                None => Span::styled(
                    if narrow {
                        v.label().replace("compile error", "compile✗")
                    } else {
                        v.label()
                    },
                    Style::default().fg(vc),
                ),
            },
            Span::styled(dec, Style::default().fg(dc)),
        ];
        if !narrow {
            let mut text = match &rv.category {
                Some(c) => format!("[{c}] {}", rv.rationale),
                None => rv.rationale.clone(),
            };
            // Hidden from the agent's context by its latest dropout.
            if s.work
                .model
                .agents
                .get(op.as_str())
                .is_some_and(|a| a.masked.contains(&rv.rev))
            {
                text = format!("(masked) {text}");
            }
            cells.push(Span::styled(text, Style::default().fg(t.dim)));
        }
        let mut row = Row::new(cells);
        if i == s.view.rev_sel {
            row = row.style(
                Style::default()
                    .bg(t.selection_bg)
                    .add_modifier(Modifier::BOLD),
            );
        }
        rows.push(row);
    }
    if revs.is_empty() {
        rows.push(Row::new(vec![Span::styled(
            "no baseline.cu yet: e writes v1",
            Style::default().fg(t.dim),
        )]));
    }
    let widths: Vec<Constraint> = if narrow {
        vec![
            Constraint::Length(1),
            Constraint::Length(4),
            Constraint::Length(9),
            Constraint::Fill(1),
            Constraint::Length(4),
        ]
    } else {
        vec![
            Constraint::Length(1),
            Constraint::Length(5),
            Constraint::Length(10),
            Constraint::Length(13),
            Constraint::Length(9),
            Constraint::Fill(1),
        ]
    };
    let widths = if revs.is_empty() {
        vec![Constraint::Fill(1)]
    } else {
        widths
    };
    let title = format!("revisions · {op}");
    f.render_widget(
        Table::new(rows, widths)
            .column_spacing(1)
            .block(pane_block(s, PaneId::Revisions, &title)),
        r,
    );
}
