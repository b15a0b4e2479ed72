//! The shapes pane (gauges): one S bar per shape with time against SOL, above the profile and
//! the roofline.

use super::profile::{draw_profile, profile_line};
use super::roofline::draw_roofline;
use super::{fmt_ms, pane_block, s_color, window};
use crate::engine::protocol::{Diagnostic, ShapeResult};
use crate::suite::roofline::Bottleneck;
use crate::tui::app::{AppState, PaneId, ShapeInfo};
use ratatui::prelude::*;
use ratatui::widgets::Paragraph;

pub(crate) fn draw_gauges(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.theme;
    let op = s.selected_op().unwrap_or_default();
    let infos = s.shape_info.get(&op).map(|v| v.as_slice()).unwrap_or(&[]);
    let rv = s.selected_rev();
    let results = rv.map(|r| &r.measurement.results);
    let chart_h = if r.height >= 24 {
        r.height / 2
    } else if r.height >= 14 {
        r.height.saturating_sub(9)
    } else {
        0
    };
    // A deep profile of the revision: its own block when there is room, else one line.
    let prof = rv.and_then(|r| r.profile.as_deref());
    let prof_block = prof.is_some() && r.height >= 24;
    let prof_h = match prof {
        Some(p) if prof_block => {
            let per_line = if r.width.saturating_sub(2) >= 64 {
                2
            } else {
                1
            };
            let stalls = p.main_kernel().map(|k| k.stalls.len().min(4)).unwrap_or(0);
            (4 + stalls.div_ceil(per_line).max(1) + 2) as u16
        }
        _ => 0,
    };
    let chart_h = if prof_block {
        chart_h.min(r.height.saturating_sub(prof_h + 5))
    } else {
        chart_h
    };
    let parts = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(prof_h),
        Constraint::Length(chart_h),
    ])
    .split(r);
    let title = match rv {
        Some(rv) => format!("shapes · {op} v{} · {}", rv.rev, rv.verdict().label()),
        None => format!("shapes · {op}"),
    };
    let inner_w = parts[0].width.saturating_sub(2) as usize;
    let bar_w = if inner_w >= 60 { 12 } else { 6 };
    let mut h = parts[0].height.saturating_sub(2) as usize;
    let mut lines = Vec::with_capacity(h);
    if let (Some(p), false) = (prof, prof_block) {
        lines.push(profile_line(s, p, inner_w));
        h = h.saturating_sub(1);
    }
    let start = match s.shape_sel {
        Some(i) => window(i, h, infos.len()),
        None => s.gauge_scroll.min(infos.len().saturating_sub(1)),
    };
    for (i, si) in infos.iter().enumerate().skip(start).take(h) {
        let res = results.and_then(|m| m.get(&si.id));
        let selected = s.shape_sel == Some(i);
        lines.push(shape_line(s, si, res, selected, bar_w, inner_w));
    }
    if infos.is_empty() {
        lines.push(Line::from(Span::styled(
            "no shapes",
            Style::default().fg(t.dim),
        )));
    }
    if let Some(m) = rv.map(|r| &r.measurement)
        && m.compiled == Some(false)
    {
        let d = Diagnostic::headline(&m.diagnostics);
        lines.insert(
            0,
            Line::from(Span::styled(
                match d {
                    Some(d) => format!("compile error at {}: {}", d.place(), d.msg),
                    None => "compile error".into(),
                },
                Style::default().fg(t.bad),
            )),
        );
    }
    f.render_widget(
        Paragraph::new(lines).block(pane_block(s, PaneId::Gauges, &title)),
        parts[0],
    );
    if let (Some(p), true) = (prof, prof_block) {
        draw_profile(f, parts[1], s, p);
    }
    if chart_h >= 5 {
        draw_roofline(f, parts[2], s, &op);
    }
}

/// One shape's row: its id, the S bar, time against SOL, then the bottleneck and the largest
/// error where they fit.
fn shape_line(
    s: &AppState,
    si: &ShapeInfo,
    res: Option<&ShapeResult>,
    selected: bool,
    bar_w: usize,
    inner_w: usize,
) -> Line<'static> {
    let t = &s.theme;
    let mut spans = vec![Span::styled(
        format!("#{:<3}", si.id),
        if selected {
            Style::default()
                .fg(t.accent)
                .bg(t.selection_bg)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default().fg(t.dim)
        },
    )];
    match res {
        Some(x) => {
            let sv = x.s.unwrap_or(0.0);
            let ok = x.verdict == crate::engine::protocol::Verdict::Pass;
            let c = if ok { s_color(s, sv) } else { t.bad };
            let filled = ((sv.clamp(0.0, 1.0)) * bar_w as f64).round() as usize;
            spans.push(Span::styled("█".repeat(filled), Style::default().fg(c)));
            spans.push(Span::styled(
                "░".repeat(bar_w - filled),
                Style::default().fg(t.border),
            ));
            spans.push(Span::styled(
                if ok {
                    format!(" {sv:.3}")
                } else {
                    format!(" {:<5}", x.verdict.name())
                },
                Style::default().fg(c).add_modifier(Modifier::BOLD),
            ));
            let tm = x.timing.as_ref().map(|t| t.median_ms).unwrap_or(0.0);
            spans.push(Span::raw(format!(" T {:>8}", fmt_ms(tm))));
            spans.push(Span::styled(
                format!(" SOL {:>8}", fmt_ms(x.sol_ms)),
                Style::default().fg(t.dim),
            ));
        }
        None => {
            spans.push(Span::styled(
                "·".repeat(bar_w),
                Style::default().fg(t.border),
            ));
            spans.push(Span::styled("   —  ", Style::default().fg(t.dim)));
            spans.push(Span::styled(
                format!(" T {:>8}", "-"),
                Style::default().fg(t.dim),
            ));
            spans.push(Span::styled(
                format!(" SOL {:>8}", fmt_ms(si.sol_ms)),
                Style::default().fg(t.dim),
            ));
        }
    }
    if inner_w >= 56 {
        let bn = match si.bottleneck {
            Some(Bottleneck::Memory) => "mem",
            Some(Bottleneck::Compute) => "cmp",
            Some(Bottleneck::Balanced) => "bal",
            None => "-",
        };
        spans.push(Span::styled(format!(" {bn}"), Style::default().fg(t.info)));
    }
    if inner_w >= 66 {
        let err = res.map(|x| x.checks.iter().map(|c| c.max_abs).fold(0.0, f64::max));
        spans.push(Span::styled(
            match err {
                Some(e) => format!(" err {e:.1e}"),
                None => String::new(),
            },
            Style::default().fg(if res.map(|x| !x.strict_ok).unwrap_or(false) {
                t.bad
            } else {
                t.dim
            }),
        ));
    }
    Line::from(spans)
}
