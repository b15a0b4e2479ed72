//! The roofline chart: the hardware's ceilings with each shape's SOL and measured points (the
//! shapes pane's figures: this session's measurement, else the standing's).

use super::block;
use crate::tui::state::AppState;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::Span;
use ratatui::widgets::Paragraph;
use ratatui::widgets::canvas::{Canvas, Line as CLine, Points};

pub(super) fn draw_roofline(f: &mut Frame, r: Rect, s: &AppState, op: &str) {
    let t = &s.view.theme;
    let Some(hw) = s.work.hw.as_ref() else {
        f.render_widget(
            Paragraph::new("no hardware profile").block(block(t, false, "roofline")),
            r,
        );
        return;
    };
    let infos = s
        .work
        .shape_info
        .get(op)
        .map(|v| v.as_slice())
        .unwrap_or(&[]);
    // The selected revision's figures: this session's, else the standing's of its source.
    let figures = super::shapes::shown_figures(s, op).figures;
    let peak_max = hw.peak_flops.values().copied().fold(1.0f64, f64::max);
    let (xmin, xmax) = (-2.0f64, 4.0f64);
    let ymax = peak_max.log10() + 0.3;
    let ymin = ymax - 6.0;
    let bw = hw.hbm_bytes_per_s;
    let mut ceilings: Vec<(String, f64)> =
        hw.peak_flops.iter().map(|(d, p)| (d.clone(), *p)).collect();
    ceilings.sort_by(|a, b| b.1.total_cmp(&a.1));
    ceilings.dedup_by(|a, b| (a.1 / b.1 - 1.0).abs() < 0.02);
    let mut measured = Vec::new();
    let mut sol_pts = Vec::new();
    for si in infos {
        if si.flops <= 0.0 || si.bytes <= 0.0 {
            continue;
        }
        let x = (si.flops / si.bytes).log10().clamp(xmin, xmax);
        if si.sol_ms > 0.0 {
            sol_pts.push((x, (si.flops / (si.sol_ms / 1e3)).log10().clamp(ymin, ymax)));
        }
        if let Some(tm) = figures.get(&si.id).and_then(|x| x.t_ms)
            && tm > 0.0
        {
            measured.push((x, (si.flops / (tm / 1e3)).log10().clamp(ymin, ymax)));
        }
    }
    let title = format!("roofline · {} · FLOP/s vs FLOP/B (log-log)", hw.key);
    let canvas = Canvas::default()
        .block(block(t, false, &title))
        .marker(Marker::Braille)
        .background_color(t.bg)
        .x_bounds([xmin, xmax])
        .y_bounds([ymin, ymax])
        .paint(move |ctx| {
            for (i, (d, p)) in ceilings.iter().enumerate() {
                let ridge = (p / bw).log10();
                let y = p.log10();
                let c = if i == 0 { t.accent } else { t.dim };
                ctx.draw(&CLine {
                    x1: ridge.max(xmin),
                    y1: y,
                    x2: xmax,
                    y2: y,
                    color: c,
                });
                if i < 3 {
                    ctx.print(
                        xmax - 0.9,
                        y,
                        Span::styled(d.clone(), Style::default().fg(c)),
                    );
                }
            }
            let ridge = (ceilings.first().map(|c| c.1).unwrap_or(peak_max) / bw).log10();
            let x0 = xmin.max(ymin - bw.log10());
            ctx.draw(&CLine {
                x1: x0,
                y1: bw.log10() + x0,
                x2: ridge,
                y2: bw.log10() + ridge,
                color: t.accent,
            });
            ctx.print(
                xmin + 0.1,
                (bw.log10() + xmin + 0.6).min(ymax - 0.3),
                Span::styled(
                    format!("{:.1} TB/s", bw / 1e12),
                    Style::default().fg(t.accent),
                ),
            );
            ctx.layer();
            ctx.draw(&Points {
                coords: &sol_pts,
                color: t.dim,
            });
            ctx.draw(&Points {
                coords: &measured,
                color: t.good,
            });
        });
    f.render_widget(canvas, r);
}
