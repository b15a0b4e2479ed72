//! Rendering: a pure function of the state (`draw`). Every pane draws only what is visible.

use super::app::{AppState, DiffMode, HELP, Modal, PaneId, SPEEDS, WorkerState, commands};
use crate::session::model::{LogLevel, OpStatus};
use crate::session::{Decision, RevVerdict};
use crate::suite::PhaseFilter;
use crate::suite::roofline::Bottleneck;
use ratatui::prelude::*;
use ratatui::symbols::Marker;
use ratatui::widgets::canvas::{Canvas, Line as CLine, Points};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Row, Table, Wrap};

pub fn draw(f: &mut Frame, s: &AppState) {
    let t = &s.theme;
    let area = f.area();
    f.render_widget(
        Block::default().style(Style::default().bg(t.bg).fg(t.fg)),
        area,
    );
    if area.width < 20 || area.height < 8 {
        f.render_widget(Paragraph::new("atrex-tui: terminal too small"), area);
        return;
    }
    let wide = area.width >= 200;
    let tall = area.height >= 30;
    let log_h = if tall { 8 } else { 4 };
    let replay_h = if s.replay.is_some() { 1 } else { 0 };
    let rows = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(6),
        Constraint::Length(replay_h),
        Constraint::Length(log_h),
        Constraint::Length(1),
    ])
    .split(area);
    draw_header(f, rows[0], s);
    let body = rows[1];
    let (left_w, full_table) = left_width(s, area.width);
    if wide {
        // Operators sized to their names; the diff keeps room for 80 columns of code.
        let gauges_w = area.width.saturating_sub(left_w + DIFF_MIN).clamp(44, 70);
        let cols = Layout::horizontal([
            Constraint::Length(left_w),
            Constraint::Min(DIFF_MIN),
            Constraint::Length(gauges_w),
        ])
        .split(body);
        let left = Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)])
            .split(cols[0]);
        draw_operators(f, left[0], s, !full_table);
        draw_revisions(f, left[1], s, !full_table);
        draw_diff(f, cols[1], s);
        draw_gauges(f, cols[2], s);
    } else {
        let cols =
            Layout::horizontal([Constraint::Length(left_w), Constraint::Min(20)]).split(body);
        let left = Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)])
            .split(cols[0]);
        draw_operators(f, left[0], s, !full_table);
        draw_revisions(f, left[1], s, !full_table);
        if s.focus == PaneId::Gauges {
            draw_gauges(f, cols[1], s);
        } else {
            draw_diff(f, cols[1], s);
        }
    }
    if s.replay.is_some() {
        draw_replay_bar(f, rows[2], s);
    }
    draw_log(f, rows[3], s);
    draw_footer(f, rows[4], s);
    match &s.modal {
        Modal::None => {}
        Modal::Help { scroll } => draw_help(f, area, s, *scroll),
        Modal::ConfirmQuit => draw_confirm(f, area, s),
        Modal::Steer(ta) => {
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
        Modal::Sessions { sel } => draw_sessions(f, area, s, *sel),
        Modal::Editor(_) => draw_editor(
            f,
            Rect {
                y: area.y + 2,
                height: area.height - 3,
                ..area
            },
            s,
        ),
    }
}

fn block<'a>(t: &super::theme::Theme, focused: bool, title: &str) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(Style::default().fg(if focused { t.border_focus } else { t.border }))
        .title(Span::styled(
            format!(" {title} "),
            Style::default()
                .fg(if focused { t.accent } else { t.dim })
                .add_modifier(Modifier::BOLD),
        ))
        .style(Style::default().bg(t.bg).fg(t.fg))
}

fn pane_block<'a>(s: &AppState, id: PaneId, title: &str) -> Block<'a> {
    block(
        &s.theme,
        s.focus == id && matches!(s.modal, Modal::None | Modal::Help { .. }),
        title,
    )
}

fn s_color(s: &AppState, v: f64) -> Color {
    if v >= 0.6 {
        s.theme.good
    } else if v >= 0.3 {
        s.theme.warn
    } else {
        s.theme.bad
    }
}

pub fn fmt_ms(ms: f64) -> String {
    if !ms.is_finite() || ms <= 0.0 {
        "-".into()
    } else if ms < 1e-3 {
        format!("{:.0}ns", ms * 1e6)
    } else if ms < 1.0 {
        format!("{:.1}µs", ms * 1e3)
    } else if ms < 1000.0 {
        format!("{ms:.2}ms")
    } else {
        format!("{:.2}s", ms / 1e3)
    }
}

pub(crate) fn draw_header(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.theme;
    let agg = |p| s.model.s_agg(&s.suite, p);
    let hs = Style::default().bg(t.header_bg).fg(t.header_fg);
    let narrow = r.width < 120;
    let mut l1 = vec![];
    if !narrow {
        l1.push(Span::styled(
            " atrex-tui ",
            hs.add_modifier(Modifier::BOLD).fg(t.accent),
        ));
        l1.push(Span::styled("│", hs));
    }
    l1.push(Span::styled(" S_agg ", hs));
    l1.push(Span::styled(
        format!("{:.3}", agg(PhaseFilter::All)),
        hs.add_modifier(Modifier::BOLD),
    ));
    if narrow {
        l1.push(Span::styled(
            format!(
                " · pre {:.3} · dec {:.3} ",
                agg(PhaseFilter::Prefill),
                agg(PhaseFilter::Decode)
            ),
            hs,
        ));
    } else {
        l1.push(Span::styled(
            format!(
                " · prefill {:.3} · decode {:.3} ",
                agg(PhaseFilter::Prefill),
                agg(PhaseFilter::Decode)
            ),
            hs,
        ));
    }
    l1.push(Span::styled("│ ", hs));
    match &s.worker {
        WorkerState::Ready { gpu, sm_clock_mhz } => {
            let gpu = if narrow {
                gpu.trim_start_matches("NVIDIA ").to_string()
            } else {
                gpu.clone()
            };
            l1.push(Span::styled(
                if narrow {
                    format!("{gpu} {sm_clock_mhz} MHz ")
                } else {
                    format!("{gpu} · SM {sm_clock_mhz} MHz · worker ")
                },
                hs,
            ));
            let (txt, c) = if s.measuring() {
                ("busy", t.warn)
            } else {
                ("ready", t.good)
            };
            l1.push(Span::styled(txt, hs.fg(c)));
            if s.restarts > 0 {
                l1.push(Span::styled(
                    format!(" ({} restarts)", s.restarts),
                    hs.fg(t.warn),
                ));
            }
        }
        WorkerState::Starting => l1.push(Span::styled("worker starting…", hs.fg(t.dim))),
        WorkerState::NoGpu(_) => l1.push(Span::styled(
            "no GPU: browse and replay only",
            hs.fg(t.warn),
        )),
    }
    let agent = agent_label(s);
    if !narrow {
        l1.push(Span::styled(" │ agent: ", hs));
        l1.push(Span::styled(agent.clone(), hs.fg(t.dim)));
    }
    let mut l2 = vec![];
    let sub = Style::default().bg(t.bg).fg(t.dim);
    if let Some(j) = s.jobs.values().next() {
        l2.push(Span::styled(
            format!(
                " ◔ measuring {} v{}: {}{} ({}/{}) ",
                j.op,
                j.rev,
                j.stage,
                j.shape.map(|x| format!(" shape {x}")).unwrap_or_default(),
                j.done.min(j.total),
                j.total
            ),
            Style::default().bg(t.bg).fg(t.warn),
        ));
        if s.jobs.len() > 1 {
            l2.push(Span::styled(format!("+{} queued ", s.jobs.len() - 1), sub));
        }
        l2.push(Span::styled("│ ", sub));
    }
    if narrow {
        l2.push(Span::styled(format!(" agent: {agent} ·"), sub));
    }
    l2.push(Span::styled(
        format!(
            " phase {} · {} operators · {} shapes · T_SOL on {}",
            s.phase.name(),
            s.visible_ops().len(),
            s.suite.shape_count(),
            s.hw.as_ref().map(|h| h.key.as_str()).unwrap_or("-")
        ),
        sub,
    ));
    match (&s.replay, &s.session_name) {
        (Some(r), _) => l2.push(Span::styled(format!(" · replay {}", r.file), sub)),
        (None, Some(n)) => l2.push(Span::styled(format!(" · session {n}"), sub)),
        (None, None) => l2.push(Span::styled(" · not recording", sub)),
    }
    f.render_widget(
        Paragraph::new(vec![Line::from(l1).style(hs), Line::from(l2)]),
        r,
    );
}

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

/// The first visible row so that `sel` is in a window of `h` rows.
fn window(sel: usize, h: usize, len: usize) -> usize {
    if h == 0 || len <= h {
        0
    } else {
        sel.saturating_sub(h / 2).min(len - h)
    }
}

/// The diff pane's width for 80 columns of code (gutter and borders included).
const DIFF_MIN: u16 = 92;

/// The operator column's width for this terminal, and whether its table has the full columns
/// (status words, an 8-wide history) or the compact ones. Names are never cut where the
/// terminal has room for them.
pub(crate) fn left_width(s: &AppState, width: u16) -> (u16, bool) {
    let name = s
        .suite
        .problems
        .iter()
        .map(|p| p.name.chars().count())
        .max()
        .unwrap_or(12)
        .max(12) as u16;
    // compact: name, weight 6, best 5, status 1, history 4, 4 gaps, 2 borders
    let compact = name + 22;
    // full: name, weight 6, best 5, status 11, history 8, 4 gaps, 2 borders
    let full = name + 36;
    // three columns (≥ 200) keep at least 44 for the gauges
    let gauges = if width >= 200 { 44 } else { 0 };
    if width >= full + DIFF_MIN + gauges {
        (full, true)
    } else if width >= compact + 60 + gauges {
        (compact, false)
    } else {
        (36, false)
    }
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

pub(crate) fn draw_revisions(f: &mut Frame, r: Rect, s: &AppState, narrow: bool) {
    let t = &s.theme;
    let op = s.selected_op().unwrap_or_default();
    let o = s.model.ops.get(&op);
    let revs = o.map(|o| o.revisions.as_slice()).unwrap_or(&[]);
    let h = r.height.saturating_sub(2) as usize;
    let start = window(s.rev_sel, h, revs.len());
    let mut rows: Vec<Row> = Vec::with_capacity(h);
    for (i, rv) in revs.iter().enumerate().skip(start).take(h) {
        let inc = o.and_then(|o| o.incumbent) == Some(rv.rev);
        let v = rv.verdict();
        let vc = match &v {
            RevVerdict::Score(x) => s_color(s, *x),
            RevVerdict::Measuring => t.warn,
            RevVerdict::Unmeasured => t.dim,
            _ => t.bad,
        };
        let (dec, dc) = match (rv.decision, inc) {
            (Some(Decision::Accepted), _) => (if narrow { "acc" } else { "accepted" }, t.good),
            (Some(Decision::Rejected), _) => (if narrow { "rej" } else { "rejected" }, t.bad),
            (None, _) if rv.author == crate::session::Author::Baseline => {
                (if narrow { "base" } else { "baseline" }, t.dim)
            }
            (None, true) => (if narrow { "inc" } else { "incumbent" }, t.dim),
            (None, false) => (if narrow { "…" } else { "pending" }, t.warn),
        };
        let mut cells = vec![
            Span::styled(if inc { "★" } else { " " }, Style::default().fg(t.accent)),
            Span::raw(format!("v{}", rv.rev)),
            Span::styled(rv.author.label(), Style::default().fg(t.info)),
            Span::styled(
                if narrow {
                    v.label().replace("compile error", "compile✗")
                } else {
                    v.label()
                },
                Style::default().fg(vc),
            ),
            Span::styled(dec, Style::default().fg(dc)),
        ];
        if !narrow {
            let mut text = match &rv.category {
                Some(c) => format!("[{c}] {}", rv.rationale),
                None => rv.rationale.clone(),
            };
            // Hidden from the agent's context by its latest dropout.
            if s.model.agent_op.as_deref() == Some(op.as_str())
                && s.model.agent_masked.contains(&rv.rev)
            {
                text = format!("(masked) {text}");
            }
            cells.push(Span::styled(text, Style::default().fg(t.dim)));
        }
        let mut row = Row::new(cells);
        if i == s.rev_sel {
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
            Constraint::Length(8),
            Constraint::Fill(1),
            Constraint::Length(4),
        ]
    } else {
        vec![
            Constraint::Length(1),
            Constraint::Length(5),
            Constraint::Length(10),
            Constraint::Length(13),
            Constraint::Length(8),
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

/// The header's agent label: backend, operator, state and the latest reason.
pub fn agent_label(s: &AppState) -> String {
    let short = |r: &str| -> String {
        let mut x: String = r.chars().take(60).collect();
        if r.chars().count() > 60 {
            x.push('…');
        }
        x
    };
    let st = s.model.agent_state.clone();
    let reason = s.model.agent_reason.as_deref().map(short);
    let with_reason = |st: &str| match (&reason, st) {
        (Some(r), "stopped" | "dropout" | "stall" | "failed" | "waiting" | "running") => {
            format!("{st} ({r})")
        }
        _ => st.to_string(),
    };
    match (&s.agent, st) {
        (Some(a), st) => {
            let st = st.unwrap_or_else(|| "starting".into());
            let mut out = format!("{} on {}: {}", a.backend, a.op, with_reason(&st));
            if a.stopping {
                out.push_str(" · stopping");
            }
            out
        }
        (None, Some(st)) => with_reason(&st),
        (None, None) => match &s.agent_cfg {
            Ok(c) => match &c.endpoint {
                Some(e) => format!("idle (a starts {} · {})", c.backend.name(), e.model),
                None => format!("idle (a starts the {})", c.backend.name()),
            },
            Err(_) => "idle (agent unavailable: see the log)".into(),
        },
    }
}

pub(crate) fn draw_diff(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.theme;
    // A streaming LLM reply for the selected operator replaces the diff while it arrives.
    if let Some(a) = s.agent.as_ref().filter(|a| {
        a.running && !a.stream.is_empty() && s.selected_op().as_deref() == Some(a.op.as_str())
    }) {
        let h = r.height.saturating_sub(2) as usize;
        let all: Vec<&str> = a.stream.lines().collect();
        let lines: Vec<Line> = all
            .iter()
            .skip(all.len().saturating_sub(h))
            .map(|l| Line::from(Span::styled(l.to_string(), Style::default().fg(t.dim))))
            .collect();
        let title = format!("agent reply · {} (streaming)", a.backend);
        f.render_widget(
            Paragraph::new(lines).block(pane_block(s, PaneId::Diff, &title)),
            r,
        );
        return;
    }
    let d = &s.diff;
    let mode = match (s.full_source, s.diff_mode) {
        (true, _) => "[f]",
        (false, DiffMode::Parent) => "[d] +{a} −{r}",
        (false, DiffMode::Incumbent) => "[d] +{a} −{r}",
    };
    let title = format!(
        "{} {}",
        d.title,
        mode.replace("{a}", &d.added.to_string())
            .replace("{r}", &d.removed.to_string())
    );
    let h = r.height.saturating_sub(2) as usize;
    let start = s.diff_scroll.min(d.lines.len().saturating_sub(1));
    let lines: Vec<Line> = d.lines.iter().skip(start).take(h).cloned().collect();
    let mut b = pane_block(s, PaneId::Diff, &title);
    // Agent revisions: the knowledge given, tokens and request id.
    if let Some(rv) = s.selected_rev() {
        let mut parts = Vec::new();
        if !rv.knowledge.is_empty() {
            parts.push(format!("knowledge: {}", rv.knowledge.join(", ")));
        }
        if let Some((i, o)) = rv.tokens.filter(|(i, o)| i + o > 0) {
            parts.push(format!("tokens {i}+{o}"));
        }
        if let Some(id) = &rv.request_id {
            parts.push(format!("req {id}"));
        }
        if !parts.is_empty() {
            b = b.title_bottom(Line::from(Span::styled(
                format!(" {} ", parts.join(" · ")),
                Style::default().fg(t.dim),
            )));
        }
    }
    if d.lines.len() > h {
        b = b.title_bottom(
            Line::from(Span::styled(
                format!(" {}/{} ", start + 1, d.lines.len()),
                Style::default().fg(t.dim),
            ))
            .right_aligned(),
        );
    }
    f.render_widget(Paragraph::new(lines).block(b), r);
}

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
        lines.push(Line::from(spans));
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
        let d = m.diagnostics.first();
        lines.insert(
            0,
            Line::from(Span::styled(
                match d {
                    Some(d) => format!("compile error at line {}: {}", d.line, d.msg),
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

fn pct(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.0}%")).unwrap_or_else(|| "-".into())
}

/// A percentage as a bar of `w` cells.
fn pct_bar(s: &AppState, v: Option<f64>, w: usize) -> Vec<Span<'static>> {
    let t = &s.theme;
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
fn profile_line(s: &AppState, p: &crate::profile::Profile, w: usize) -> Line<'static> {
    let t = &s.theme;
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
fn draw_profile(f: &mut Frame, r: Rect, s: &AppState, p: &crate::profile::Profile) {
    let t = &s.theme;
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

fn draw_roofline(f: &mut Frame, r: Rect, s: &AppState, op: &str) {
    let t = &s.theme;
    let Some(hw) = s.hw.as_ref() else {
        f.render_widget(
            Paragraph::new("no hardware profile").block(block(t, false, "roofline")),
            r,
        );
        return;
    };
    let infos = s.shape_info.get(op).map(|v| v.as_slice()).unwrap_or(&[]);
    let results = s.selected_rev().map(|r| &r.measurement.results);
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
        if let Some(tm) = results
            .and_then(|m| m.get(&si.id))
            .and_then(|x| x.timing.as_ref())
            .map(|t| t.median_ms)
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

pub(crate) fn draw_log(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.theme;
    let h = r.height.saturating_sub(2) as usize;
    let need = h + s.log_scroll;
    // merge the tails of the session log and the UI log by time
    let a = &s.model.log[s.model.log.len().saturating_sub(need)..];
    let b = &s.ui_log[s.ui_log.len().saturating_sub(need)..];
    let mut all: Vec<&crate::session::model::LogLine> = a.iter().chain(b.iter()).collect();
    all.sort_by(|x, y| x.t.total_cmp(&y.t));
    let end = all.len().saturating_sub(s.log_scroll);
    let lines: Vec<Line> = all[end.saturating_sub(h)..end]
        .iter()
        .map(|l| {
            let c = match l.level {
                LogLevel::Info => t.fg,
                LogLevel::Good => t.good,
                LogLevel::Warn => t.warn,
                LogLevel::Error => t.bad,
                LogLevel::Steer => t.steer,
            };
            Line::from(Span::styled(l.text.clone(), Style::default().fg(c)))
        })
        .collect();
    let title = if s.log_scroll > 0 {
        format!("log · {} lines up (G follows)", s.log_scroll)
    } else {
        "log".into()
    };
    f.render_widget(
        Paragraph::new(lines).block(pane_block(s, PaneId::Log, &title)),
        r,
    );
}

fn draw_footer(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.theme;
    let mut spans = vec![Span::raw(" ")];
    for (k, what) in commands(s) {
        spans.push(Span::styled(
            k,
            Style::default().fg(t.accent).add_modifier(Modifier::BOLD),
        ));
        spans.push(Span::styled(
            format!(" {what}  "),
            Style::default().fg(t.dim),
        ));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), r);
}

fn draw_replay_bar(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.theme;
    let Some(rp) = &s.replay else { return };
    let kind = rp
        .pos
        .checked_sub(1)
        .and_then(|i| rp.records.get(i))
        .map(|x| x.event.kind())
        .unwrap_or("start");
    let t0 = rp.records.first().map(|x| x.t).unwrap_or(0.0);
    let tcur = rp
        .pos
        .checked_sub(1)
        .and_then(|i| rp.records.get(i))
        .map(|x| x.t)
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

fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

/// Words of `text` in lines of at most `w` characters.
fn wrap_words(text: &str, w: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        let n = cur.chars().count();
        if n > 0 && n + 1 + word.chars().count() > w {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(cur);
    }
    out
}

fn draw_help(f: &mut Frame, area: Rect, s: &AppState, scroll: u16) {
    let t = &s.theme;
    let w = area.width.min(100);
    // key column: 2 + 30 + 1; the description wraps in what is left
    let desc_w = (w.saturating_sub(2) as usize).saturating_sub(33).max(16);
    let mut lines = Vec::new();
    let mut last = "";
    for (sec, k, what) in HELP {
        if *sec != last {
            lines.push(Line::from(Span::styled(
                sec.to_string(),
                Style::default().fg(t.accent).add_modifier(Modifier::BOLD),
            )));
            last = sec;
        }
        for (i, part) in wrap_words(what, desc_w).into_iter().enumerate() {
            let key = if i == 0 { *k } else { "" };
            lines.push(Line::from(vec![
                Span::styled(
                    format!("  {key:<30} "),
                    Style::default().fg(t.fg).add_modifier(Modifier::BOLD),
                ),
                Span::styled(part, Style::default().fg(t.dim)),
            ]));
        }
    }
    let r = centered(area, w, lines.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).scroll((scroll, 0)).block(block(
            t,
            true,
            "keys · Esc closes · j/k scroll",
        )),
        r,
    );
}

/// No GPU: the recorded sessions, to open one in replay.
fn draw_sessions(f: &mut Frame, area: Rect, s: &AppState, sel: usize) {
    let t = &s.theme;
    let files = &s.recorded_sessions;
    let w = area.width.saturating_sub(4).min(76);
    let h = (files.len() as u16 + 5).min(area.height.saturating_sub(2));
    let r = centered(area, w, h);
    f.render_widget(Clear, r);
    let rows = h.saturating_sub(5) as usize;
    let start = window(sel, rows, files.len());
    let mut lines = vec![Line::from(Span::styled(
        "no GPU: browse and replay only — open a recorded session?",
        Style::default().fg(t.warn).add_modifier(Modifier::BOLD),
    ))];
    lines.push(Line::from(""));
    let name_w = (w as usize).saturating_sub(2 + 33).max(12);
    for (i, x) in files.iter().enumerate().skip(start).take(rows) {
        let size = if x.bytes >= 1 << 20 {
            format!("{:.1} MiB", x.bytes as f64 / (1u64 << 20) as f64)
        } else {
            format!("{} KiB", x.bytes.div_ceil(1024))
        };
        let name: String = x.name.chars().take(name_w).collect();
        let mut style = Style::default().fg(t.fg);
        if i == sel {
            style = style.bg(t.selection_bg).add_modifier(Modifier::BOLD);
        }
        lines.push(Line::from(vec![
            Span::styled(format!("{} ", if i == sel { "▶" } else { " " }), style),
            Span::styled(format!("{name:<name_w$}"), style),
            Span::styled(format!(" {size:>9}"), style.fg(t.dim)),
            Span::styled(
                format!(
                    " {:>11}",
                    x.events.map(|n| format!("{n} events")).unwrap_or_default()
                ),
                style.fg(t.dim),
            ),
            Span::styled(
                if x.path.is_none() { " built-in" } else { "" },
                style.fg(t.info),
            ),
        ]));
    }
    lines.push(Line::from(Span::styled(
        "Enter replays (read-only) · j/k choose · Esc dismisses",
        Style::default().fg(t.dim),
    )));
    f.render_widget(
        Paragraph::new(lines).block(block(t, true, "recorded sessions")),
        r,
    );
}

fn draw_confirm(f: &mut Frame, area: Rect, s: &AppState) {
    let t = &s.theme;
    let r = centered(area, 52, 5);
    f.render_widget(Clear, r);
    let n = s.jobs.len();
    f.render_widget(
        Paragraph::new(vec![
            Line::from(format!(
                "{n} measurement{} running.",
                if n == 1 { " is" } else { "s are" }
            )),
            Line::from(Span::styled(
                "Quit and cancel? y / n",
                Style::default().fg(t.warn).add_modifier(Modifier::BOLD),
            )),
        ])
        .alignment(Alignment::Center)
        .block(block(t, true, "quit")),
        r,
    );
}

fn draw_editor(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.theme;
    let Modal::Editor(ed) = &s.modal else { return };
    f.render_widget(Clear, r);
    let saved = ed
        .saved
        .and_then(|rev| s.model.ops.get(&ed.op).and_then(|o| o.rev(rev)));
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
            RevVerdict::Measuring | RevVerdict::Unmeasured => t.warn,
            _ => t.bad,
        };
        status.push(Line::from(Span::styled(
            format!("v{}: {}", sv.rev, v.label()),
            Style::default().fg(c),
        )));
        for d in sv.measurement.diagnostics.iter().take(4) {
            status.push(Line::from(Span::styled(
                format!("  line {}: {}: {}", d.line, d.severity, d.msg),
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
