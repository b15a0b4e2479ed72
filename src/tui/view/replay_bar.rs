//! The replay bar: play state, speed, position in the recorded events and a progress bar.

use crate::tui::state::AppState;
use crate::tui::workbench::SPEEDS;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub(super) fn draw_replay_bar(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.view.theme;
    let Some(rp) = &s.work.replay else { return };
    let kind = rp
        .pos
        .checked_sub(1)
        .and_then(|i| rp.records.get(i))
        .map(|x| x.kind())
        .unwrap_or("start");
    let t0 = rp.records.get(0).map(|x| x.t()).unwrap_or(0.0);
    let tcur = rp
        .pos
        .checked_sub(1)
        .and_then(|i| rp.records.get(i))
        .map(|x| x.t())
        .unwrap_or(t0);
    let el = (tcur - t0).max(0.0) as u64;
    let label = format!(
        " {} replay {}× │ event {}/{} · {} · +{:02}:{:02}:{:02} ",
        if rp.playing { "▶" } else { "⏸" },
        SPEEDS[rp.speed],
        rp.pos,
        rp.records.len(),
        kind,
        el / 3600,
        (el / 60) % 60,
        el % 60
    );
    let w = r.width as usize;
    let bar_w = w.saturating_sub(label.chars().count() + 2);
    let filled = if rp.records.is_empty() {
        bar_w
    } else {
        bar_w * rp.pos / rp.records.len()
    };
    let spans = vec![
        Span::styled(
            label,
            Style::default().fg(t.accent).add_modifier(Modifier::BOLD),
        ),
        Span::styled("━".repeat(filled), Style::default().fg(t.accent)),
        Span::styled("─".repeat(bar_w - filled), Style::default().fg(t.border)),
    ];
    f.render_widget(Paragraph::new(Line::from(spans)), r);
}
