//! The steer modal: a one-line prompt above the log, to send a hint for the selected operator.

use super::block;
use crate::tui::state::AppState;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Clear;
use ratatui_textarea::TextArea;

pub(super) fn draw_steer(f: &mut Frame, area: Rect, s: &AppState, ta: &TextArea<'static>) {
    let t = &s.view.theme;
    let w = area.width.saturating_sub(8).min(100);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + area.height.saturating_sub(8),
        width: w,
        height: 3,
    };
    f.render_widget(Clear, r);
    let mut ta = ta.clone();
    ta.set_block(block(
        t,
        true,
        &format!(
            "steer {} · Enter send · Esc cancel",
            s.selected_op().unwrap_or_default()
        ),
    ));
    ta.set_style(Style::default().bg(t.bg).fg(t.fg));
    f.render_widget(&ta, r);
}
