//! The editor modal: the kernel source in a text area, with the saved revision's status.

use super::{block, s_color};
use crate::session::RevVerdict;
use crate::tui::state::AppState;
use crate::tui::view_state::Modal;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

pub(super) fn draw_editor(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.view.theme;
    let Modal::Editor(ed) = &s.view.modal else {
        return;
    };
    f.render_widget(Clear, r);
    let saved = ed
        .saved
        .and_then(|rev| s.work.model.ops.get(&ed.op).and_then(|o| o.rev(rev)));
    let mut status: Vec<Line> = Vec::new();
    if ed.confirm_discard {
        status.push(Line::from(Span::styled(
            "unsaved changes: Esc again discards them, Ctrl-S saves",
            Style::default().fg(t.warn).add_modifier(Modifier::BOLD),
        )));
    }
    if let Some(sv) = saved {
        let v = sv.verdict();
        let c = match v {
            RevVerdict::Score(x) => s_color(s, x),
            RevVerdict::Measuring | RevVerdict::Unmeasured | RevVerdict::Interrupted => t.warn,
            _ => t.bad,
        };
        status.push(Line::from(Span::styled(
            format!("v{}: {}", sv.rev, v.label()),
            Style::default().fg(c),
        )));
        for d in sv.measurement.diagnostics.iter().take(4) {
            status.push(Line::from(Span::styled(
                format!("  {d}"),
                Style::default().fg(if d.severity == "warning" {
                    t.warn
                } else {
                    t.bad
                }),
            )));
        }
    }
    let sh = (status.len() as u16).min(6);
    let parts = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(if sh > 0 { sh + 2 } else { 0 }),
    ])
    .split(r);
    let ratatui_textarea::DataCursor(row, col) = ed.textarea.cursor();
    let mut ta = ed.textarea.clone();
    ta.set_block(block(
        t,
        true,
        &format!(
            "edit {} (from {}) · {}:{} · Ctrl-S save + measure · Esc close",
            ed.op,
            ed.base
                .map(|b| format!("v{b}"))
                .unwrap_or_else(|| "nothing".into()),
            row + 1,
            col + 1
        ),
    ));
    ta.set_style(Style::default().bg(t.bg).fg(t.fg));
    f.render_widget(&ta, parts[0]);
    if sh > 0 {
        f.render_widget(
            Paragraph::new(status)
                .wrap(Wrap { trim: false })
                .block(block(t, false, "status")),
            parts[1],
        );
    }
}
