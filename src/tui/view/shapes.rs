//! The shapes pane (gauges): one S bar per shape with time against SOL, above the profile and
//! the roofline. The figures are the selected revision's measurement in this session, else —
//! for a revision whose very source the standing measured — the standing's, marked as such in
//! the title ("standing S 0.446") and on the pane's first line ("standing, measured 2026-12-02
//! on NVIDIA H200").

use super::profile::{draw_profile, profile_line};
use super::roofline::draw_roofline;
use super::{fmt_ms, pane_block, s_color, window};
use crate::contract::protocol::{Diagnostic, ShapeResult, Verdict};
use crate::standing::ShapeMeasured;
use crate::suite::roofline::Bottleneck;
use crate::tui::state::AppState;
use crate::tui::text;
use crate::tui::view_state::PaneId;
use crate::tui::workbench::ShapeInfo;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use std::collections::BTreeMap;

/// One shape's figures as the pane and the roofline show them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ShapeFigure {
    pub pass: bool,
    /// The verdict's name (`pass`, `incorrect`, …).
    pub verdict: String,
    pub s: Option<f64>,
    /// T: the median time, ms.
    pub t_ms: Option<f64>,
    pub sol_ms: f64,
    pub max_abs: Option<f64>,
    pub strict_ok: bool,
}

impl ShapeFigure {
    fn of_result(x: &ShapeResult) -> ShapeFigure {
        ShapeFigure {
            pass: x.verdict == Verdict::Pass,
            verdict: x.verdict.name().to_string(),
            s: x.s,
            t_ms: x.timing.as_ref().map(|t| t.median_ms),
            sol_ms: x.sol_ms,
            max_abs: Some(x.checks.iter().map(|c| c.max_abs).fold(0.0, f64::max)),
            strict_ok: x.strict_ok,
        }
    }

    fn of_record(x: &ShapeMeasured) -> ShapeFigure {
        ShapeFigure {
            pass: x.verdict == Verdict::Pass.name(),
            verdict: x.verdict.clone(),
            s: x.s,
            t_ms: x.t_ms,
            sol_ms: x.sol_ms,
            max_abs: x.max_abs,
            strict_ok: x.strict_ok,
        }
    }
}

/// What the shapes pane and the roofline show of a revision.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Shown {
    /// Per shape id.
    pub figures: BTreeMap<u32, ShapeFigure>,
    /// Where the figures are the standing's: the title's short mark ("standing S 0.446") and
    /// the pane's first line (the run that measured them, or why they are not shown).
    pub standing: Option<(String, String)>,
}

/// What the shapes pane shows of the selected revision of `op`: its measurement in this
/// session, else the standing's of its very source — only where the record stands (else the
/// note says why not).
pub(crate) fn shown_figures(s: &AppState, op: &str) -> Shown {
    let Some(rv) = s.selected_rev() else {
        return Shown::default();
    };
    match s.work.standing_measurement(op, rv) {
        Some(e) if e.fresh() => {
            let m = &e.record.measurement;
            Shown {
                figures: m
                    .shapes
                    .iter()
                    .map(|x| (x.shape, ShapeFigure::of_record(x)))
                    .collect(),
                standing: Some((
                    format!("standing S {:.3}", m.s_op),
                    format!(
                        "standing, measured {} on {}",
                        m.day(),
                        e.record.fingerprint.gpu
                    ),
                )),
            }
        }
        Some(e) => Shown {
            figures: BTreeMap::new(),
            standing: Some((
                "standing: stale".into(),
                format!("the standing's record is stale: {}", e.stale_label()),
            )),
        },
        None => Shown {
            figures: rv
                .measurement
                .results
                .iter()
                .map(|(id, x)| (*id, ShapeFigure::of_result(x)))
                .collect(),
            standing: None,
        },
    }
}

pub(crate) fn draw_gauges(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.view.theme;
    let op = s.selected_op().unwrap_or_default();
    let infos = s
        .work
        .shape_info
        .get(&op)
        .map(|v| v.as_slice())
        .unwrap_or(&[]);
    let rv = s.selected_rev();
    let Shown { figures, standing } = shown_figures(s, &op);
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
    let title = match (rv, &standing) {
        (Some(rv), Some((mark, _))) => format!("shapes · {op} v{} · {mark}", rv.rev),
        (Some(rv), None) => format!("shapes · {op} v{} · {}", rv.rev, rv.verdict().label()),
        (None, _) => format!("shapes · {op}"),
    };
    let inner_w = parts[0].width.saturating_sub(2) as usize;
    let bar_w = if inner_w >= 60 { 12 } else { 6 };
    let mut h = parts[0].height.saturating_sub(2) as usize;
    let mut lines = Vec::with_capacity(h);
    if let (Some(p), false) = (prof, prof_block) {
        lines.push(profile_line(s, p, inner_w));
        h = h.saturating_sub(1);
    }
    if let Some((_, note)) = &standing {
        // Where room is short the GPU's vendor goes first, then the note wraps.
        let note = if text::cols(note) > inner_w {
            note.replace("NVIDIA ", "")
        } else {
            note.clone()
        };
        for row in text::wrap(&note, inner_w, 0) {
            lines.push(Line::from(Span::styled(
                note[row].to_string(),
                Style::default().fg(t.info),
            )));
            h = h.saturating_sub(1);
        }
    }
    let start = match s.view.shape_sel {
        Some(i) => window(i, h, infos.len()),
        None => s.view.gauge_scroll.min(infos.len().saturating_sub(1)),
    };
    for (i, si) in infos.iter().enumerate().skip(start).take(h) {
        let res = figures.get(&si.id);
        let selected = s.view.shape_sel == Some(i);
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
    res: Option<&ShapeFigure>,
    selected: bool,
    bar_w: usize,
    inner_w: usize,
) -> Line<'static> {
    let t = &s.view.theme;
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
            let ok = x.pass;
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
                    format!(" {:<5}", x.verdict)
                },
                Style::default().fg(c).add_modifier(Modifier::BOLD),
            ));
            let tm = x.t_ms.unwrap_or(0.0);
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
        let err = res.and_then(|x| x.max_abs);
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
