//! The header: S_agg by phase, the GPU and worker, the agent, and a line for the running
//! measurement, the phase, counts and the session.

use crate::suite::PhaseFilter;
use crate::tui::app::{AppState, WorkerState};
use ratatui::prelude::*;
use ratatui::widgets::Paragraph;

pub(crate) fn draw_header(f: &mut Frame, r: Rect, s: &AppState) {
    let t = &s.theme;
    let agg = |p| s.s_agg(p);
    let stale = s.tally(PhaseFilter::All).stale;
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
    if stale > 0 {
        l1.push(Span::styled(format!("· {stale} stale "), hs.fg(t.warn)));
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
        if let Some((done, total)) = s.standing.run {
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
        if s.jobs.len() > 1 {
            l2.push(Span::styled(format!("+{} queued ", s.jobs.len() - 1), sub));
        }
        l2.push(Span::styled("│ ", sub));
    }
    if narrow {
        l2.push(Span::styled(format!(" agent: {agent} ·"), sub));
    }
    l2.push(Span::styled(
        format!(" standing: {} ·", s.standing.view.short()),
        sub,
    ));
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
