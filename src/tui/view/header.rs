//! The header: S_agg by phase under the strict level and the benchmark's rule, the GPU and
//! worker, the agents, a line for the running measurement, the phase with the operators and
//! shapes it shows, and the session, and with a pool of workers a line for the pool (per host
//! up, busy, down; restarts; the queue).

use crate::pool::SeatState;
use crate::suite::PhaseFilter;
use crate::tui::state::AppState;
use crate::tui::workbench::WorkerState;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub(crate) fn draw_header(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.view.theme;
    let stale = s.work.tally(PhaseFilter::All).stale;
    let hs = Style::default().bg(t.header_bg).fg(t.header_fg);
    // Under 120 columns the agent moves to the second line; from 160 S_agg of every phase is
    // shown; from 200 the GPU's full name and the benchmark's rule spelled out.
    let narrow = r.width < 120;
    let wide = r.width >= 200;
    let mut l1 = s_agg_spans(s, hs, r.width >= 160, wide);
    if stale > 0 {
        l1.push(Span::styled(format!("· {stale} stale "), hs.fg(t.warn)));
    }
    l1.push(Span::styled("│ ", hs));
    match &s.work.worker {
        WorkerState::Ready { gpu, sm_clock_mhz } => {
            let gpu = if wide {
                gpu.clone()
            } else {
                gpu.trim_start_matches("NVIDIA ").to_string()
            };
            let n = s.work.pool.workers.len();
            let workers = if n > 1 {
                format!("{}/{n} workers ", s.work.pool.up())
            } else {
                "worker ".to_string()
            };
            l1.push(Span::styled(
                if narrow {
                    format!("{gpu} {sm_clock_mhz} MHz ")
                } else {
                    format!("{gpu} · SM {sm_clock_mhz} MHz · {workers}")
                },
                hs,
            ));
            let (txt, c) = if s.work.measuring() || s.work.pool.running > 0 {
                ("busy", t.warn)
            } else {
                ("ready", t.good)
            };
            l1.push(Span::styled(txt, hs.fg(c)));
            if s.work.restarts > 0 {
                l1.push(Span::styled(
                    format!(" ({} restarts)", s.work.restarts),
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
    let several = s.work.running_agents().len() > 1;
    if !narrow {
        l1.push(Span::styled(if several { " │ " } else { " │ agent: " }, hs));
        l1.push(Span::styled(agent.clone(), hs.fg(t.dim)));
    }
    let mut l2 = vec![];
    let sub = Style::default().bg(t.bg).fg(t.dim);
    if let Some(j) = s.work.jobs.values().next() {
        if let Some((done, total)) = s.work.standing.run {
            l2.push(Span::styled(
                format!(" ◔ standing {}/{total} ·", done + 1),
                Style::default().bg(t.bg).fg(t.warn),
            ));
        }
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
        if s.work.jobs.len() > 1 {
            l2.push(Span::styled(
                format!("+{} queued ", s.work.jobs.len() - 1),
                sub,
            ));
        }
        l2.push(Span::styled("│ ", sub));
    }
    if narrow {
        let label = if several {
            format!(" {agent} ·")
        } else {
            format!(" agent: {agent} ·")
        };
        l2.push(Span::styled(label, sub));
    }
    // The operators and shapes the phase filter shows.
    let shown = s.work.suite.by_weight(s.view.phase);
    l2.push(Span::styled(
        format!(
            " phase {} · {} operators · {} shapes · T_SOL on {}",
            s.view.phase.name(),
            shown.len(),
            shown.iter().map(|p| p.shapes.len()).sum::<usize>(),
            s.work.hw.as_ref().map(|h| h.key.as_str()).unwrap_or("-")
        ),
        sub,
    ));
    match (&s.work.replay, &s.work.session_name) {
        (Some(r), _) => l2.push(Span::styled(format!(" · replay {}", r.file), sub)),
        (None, Some(n)) => l2.push(Span::styled(format!(" · session {n}"), sub)),
        (None, None) => l2.push(Span::styled(" · not recording", sub)),
    }
    l2.push(Span::styled(
        format!(" · standing: {}", s.work.standing.view.short()),
        sub,
    ));
    let mut lines = vec![Line::from(l1).style(hs), Line::from(l2)];
    lines.extend(pool_line(s));
    f.render_widget(Paragraph::new(lines), r);
}

/// S_agg under the strict level and under the benchmark's rule, each named: with room (`all`),
/// of all operators and of each phase ("S_agg 0.313 strict · 0.304 bench rule · prefill
/// 0.346/0.336 · decode 0.318/0.309", the pairs strict first); else of the phase the filter
/// shows ("S_agg 0.313 strict · 0.304 bench rule", "S_agg prefill 0.346 strict · …").
fn s_agg_spans(s: &AppState, hs: Style, all: bool, wide: bool) -> Vec<Span<'static>> {
    let rule = if wide { "benchmark rule" } else { "bench rule" };
    if !all {
        let phase = match s.view.phase {
            PhaseFilter::All => String::new(),
            p => format!("{} ", p.name()),
        };
        return vec![
            Span::styled(format!(" S_agg {phase}"), hs),
            Span::styled(
                s.work.s_agg_by_rule(s.view.phase).named(rule),
                hs.add_modifier(Modifier::BOLD),
            ),
            Span::styled(" ", hs),
        ];
    }
    vec![
        Span::styled(" S_agg ", hs),
        Span::styled(
            s.work.s_agg_by_rule(PhaseFilter::All).named(rule),
            hs.add_modifier(Modifier::BOLD),
        ),
        Span::styled(
            format!(
                " · prefill {} · decode {} ",
                s.work.s_agg_by_rule(PhaseFilter::Prefill).pair(),
                s.work.s_agg_by_rule(PhaseFilter::Decode).pair()
            ),
            hs,
        ),
    ]
}

/// The header's height: two lines, three with the pool line.
pub(crate) fn header_height(s: &AppState) -> u16 {
    if pool_line(s).is_some() { 3 } else { 2 }
}

/// The header's agent label: with one agent its backend, operator, state and latest reason;
/// with several running at once, each operator and its state.
pub fn agent_label(s: &AppState) -> String {
    let short = |r: &str| -> String {
        let mut x: String = r.chars().take(60).collect();
        if r.chars().count() > 60 {
            x.push('…');
        }
        x
    };
    let with_reason = |st: &str, reason: Option<String>| match (reason, st) {
        (Some(r), "stopped" | "dropout" | "stall" | "failed" | "waiting" | "running") => {
            format!("{st} ({r})")
        }
        _ => st.to_string(),
    };
    let state_of = |op: &str| {
        s.work
            .model
            .agents
            .get(op)
            .map(|r| r.state.clone())
            .unwrap_or_else(|| "starting".into())
    };
    let running = s.work.running_agents();
    if running.len() > 1 {
        let parts: Vec<String> = running
            .iter()
            .map(|a| {
                format!(
                    "{} {}{}",
                    a.op,
                    state_of(&a.op),
                    if a.stopping { " (stopping)" } else { "" }
                )
            })
            .collect();
        return format!("{} agents: {}", running.len(), parts.join(" · "));
    }
    // The one running, else the one the session heard of last.
    let shown = running.first().copied().or_else(|| {
        s.work
            .model
            .agent_op
            .as_ref()
            .and_then(|op| s.work.agents.get(op))
            .or_else(|| s.work.agents.values().next())
    });
    match shown {
        Some(a) => {
            let reason = s
                .work
                .model
                .agents
                .get(&a.op)
                .and_then(|r| r.reason.as_deref())
                .map(short);
            let mut out = format!(
                "{} on {}: {}",
                a.backend,
                a.op,
                with_reason(&state_of(&a.op), reason)
            );
            if a.stopping {
                out.push_str(" · stopping");
            }
            out
        }
        None => match &s.work.model.agent_state {
            Some(st) => with_reason(st, s.work.model.agent_reason.as_deref().map(short)),
            None => match &s.work.agent_cfg {
                Ok(c) => match &c.endpoint {
                    Some(e) => format!("idle (a starts {} · {})", c.backend.name(), e.model),
                    None => format!("idle (a starts the {})", c.backend.name()),
                },
                Err(_) => "idle (agent unavailable: see the log)".into(),
            },
        },
    }
}

/// The pool line, when there is more than one worker or a templated one is down (a single
/// local worker down is the header's "no GPU"): per host the workers up, busy, starting and
/// down; restarts; the shapes waiting in the queue.
pub(crate) fn pool_line(s: &AppState) -> Option<Line<'static>> {
    let p = &s.work.pool;
    let down = p
        .workers
        .iter()
        .any(|w| w.state == SeatState::Down && w.templated);
    if p.workers.len() < 2 && !down {
        return None;
    }
    let t = &s.view.theme;
    let sub = Style::default().bg(t.bg).fg(t.dim);
    let mut spans = vec![Span::styled(" workers:", sub)];
    for (i, (host, c)) in p.by_host().into_iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" ·", sub));
        }
        spans.push(Span::styled(
            format!(" {host}"),
            Style::default().bg(t.bg).fg(t.fg),
        ));
        for (n, word, colour) in [
            (c.up, "up", t.good),
            (c.busy, "busy", t.warn),
            (c.starting, "starting", t.dim),
            (c.down, "down", t.bad),
        ] {
            if n > 0 {
                spans.push(Span::styled(
                    format!(" {n} {word}"),
                    Style::default().bg(t.bg).fg(colour),
                ));
            }
        }
    }
    let restarts = p.restarts();
    if restarts > 0 {
        spans.push(Span::styled(
            format!(
                " │ {restarts} restart{}",
                if restarts == 1 { "" } else { "s" }
            ),
            Style::default().bg(t.bg).fg(t.warn),
        ));
    }
    spans.push(Span::styled(
        format!(" │ queue {} · running {}", p.queued, p.running),
        sub,
    ));
    if p.requeued > 0 {
        spans.push(Span::styled(format!(" · {} requeued", p.requeued), sub));
    }
    Some(Line::from(spans))
}
