//! The deep profile (ncu) of a revision: throughput and occupancy bars, warp stalls and DRAM
//! bytes over Q, or all of it in one line.

use super::{block, fmt_ms};
use crate::tui::state::AppState;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

fn pct(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.0}%")).unwrap_or_else(|| "-".into())
}

/// A percentage as a bar of `w` cells.
fn pct_bar(s: &AppState, v: Option<f64>, w: usize) -> Vec<Span<'static>> {
    let t = &s.view.theme;
    let x = v.unwrap_or(0.0).clamp(0.0, 100.0);
    let filled = ((x / 100.0) * w as f64).round() as usize;
    let c = if x >= 60.0 {
        t.good
    } else if x >= 30.0 {
        t.warn
    } else {
        t.bad
    };
    vec![
        Span::styled("█".repeat(filled), Style::default().fg(c)),
        Span::styled("░".repeat(w - filled), Style::default().fg(t.border)),
        Span::styled(
            format!(
                " {:>5}",
                v.map(|x| format!("{x:.1}%")).unwrap_or("-".into())
            ),
            Style::default().fg(c).add_modifier(Modifier::BOLD),
        ),
    ]
}

/// The profile in one line (small terminals): as many figures as fit.
pub(super) fn profile_line(s: &AppState, p: &crate::profile::Profile, w: usize) -> Line<'static> {
    let t = &s.view.theme;
    let k = p.main_kernel();
    let mut parts = vec![
        format!("ncu #{}", p.shape),
        format!("DRAM {}", pct(k.and_then(|k| k.dram_throughput_pct))),
        format!("SM {}", pct(k.and_then(|k| k.sm_throughput_pct))),
        format!(
            "occ {}/{}",
            pct(k.and_then(|k| k.achieved_occupancy_pct)).trim_end_matches('%'),
            pct(k.and_then(|k| k.theoretical_occupancy_pct))
        ),
    ];
    if let Some(r) = k.and_then(|k| k.registers_per_thread) {
        parts.push(format!("{r:.0} reg"));
    }
    if let Some(q) = p.redundant_traffic_ratio {
        parts.push(format!("B/Q {q:.2}"));
    }
    if let Some((r, _)) = k.and_then(|k| k.stalls.first()) {
        parts.push(r.clone());
    }
    let mut txt = String::new();
    for (i, x) in parts.iter().enumerate() {
        let sep = if i == 0 { "" } else { " · " };
        if txt.chars().count() + sep.len() + x.chars().count() > w {
            break;
        }
        txt.push_str(sep);
        txt.push_str(x);
    }
    Line::from(Span::styled(txt, Style::default().fg(t.info)))
}

/// The profile's gauges: DRAM / SM throughput and occupancy bars, registers, the top warp
/// stalls and DRAM bytes over Q.
pub(super) fn draw_profile(f: &mut Frame, r: Rect, s: &AppState, p: &crate::profile::Profile) {
    let t = &s.view.theme;
    let k = p.main_kernel();
    let inner_w = r.width.saturating_sub(2) as usize;
    let bar_w = if inner_w >= 60 { 20 } else { 10 };
    let label = |x: &str| Span::styled(format!("{x:<10}"), Style::default().fg(t.dim));
    let mut lines = Vec::new();
    let mut l = vec![label("DRAM")];
    l.extend(pct_bar(s, k.and_then(|k| k.dram_throughput_pct), bar_w));
    lines.push(Line::from(l));
    let mut l = vec![label("SM")];
    l.extend(pct_bar(s, k.and_then(|k| k.sm_throughput_pct), bar_w));
    lines.push(Line::from(l));
    let mut l = vec![label("occupancy")];
    l.extend(pct_bar(s, k.and_then(|k| k.achieved_occupancy_pct), bar_w));
    l.push(Span::styled(
        format!(
            " of {} · {} reg/thread",
            pct(k.and_then(|k| k.theoretical_occupancy_pct)),
            k.and_then(|k| k.registers_per_thread)
                .map(|r| format!("{r:.0}"))
                .unwrap_or_else(|| "?".into())
        ),
        Style::default().fg(t.dim),
    ));
    lines.push(Line::from(l));
    // Warp stalls: cycles per issued instruction, relative to the largest.
    let stalls: Vec<(String, f64)> = k
        .map(|k| k.stalls.iter().take(4).cloned().collect())
        .unwrap_or_default();
    let max = stalls.first().map(|x| x.1).unwrap_or(0.0).max(1e-9);
    // Two per line where they fit (names up to 17 characters), else one.
    let per_line = if inner_w >= 64 { 2 } else { 1 };
    let name_w = ((inner_w.saturating_sub(10)) / per_line)
        .saturating_sub(12)
        .clamp(8, 17);
    for (pi, chunk) in stalls.chunks(per_line).enumerate() {
        let mut l = vec![label(if pi == 0 { "stalls" } else { "" })];
        for (name, v) in chunk {
            let n = ((v / max) * 4.0).round().clamp(0.0, 4.0) as usize;
            let name: String = name.chars().take(name_w).collect();
            l.push(Span::styled(
                format!("{:<4}", "▇".repeat(n)),
                Style::default().fg(t.warn),
            ));
            l.push(Span::raw(format!(" {name:<name_w$} {v:>4.1}  ")));
        }
        lines.push(Line::from(l));
    }
    if stalls.is_empty() {
        lines.push(Line::from(vec![
            label("stalls"),
            Span::styled("-", Style::default().fg(t.dim)),
        ]));
    }
    let mut l = vec![label("DRAM B/Q")];
    match p.redundant_traffic_ratio {
        Some(q) => l.push(Span::styled(
            format!("{q:.2}"),
            Style::default()
                .fg(if q > 1.25 { t.bad } else { t.good })
                .add_modifier(Modifier::BOLD),
        )),
        None => l.push(Span::styled("-", Style::default().fg(t.dim))),
    }
    l.push(Span::styled(
        format!(
            " · {} finding{}",
            p.findings.len(),
            if p.findings.len() == 1 { "" } else { "s" }
        ),
        Style::default().fg(t.dim),
    ));
    lines.push(Line::from(l));
    let title = format!(
        "profile · #{} · {}{} · {}",
        p.shape,
        k.map(|k| k.name.as_str()).unwrap_or("-"),
        if p.kernels.len() > 1 {
            format!(" +{}", p.kernels.len() - 1)
        } else {
            String::new()
        },
        fmt_ms(k.and_then(|k| k.duration_ns).unwrap_or(0.0) / 1e6)
    );
    f.render_widget(Paragraph::new(lines).block(block(t, false, &title)), r);
}
