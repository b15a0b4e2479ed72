//! The highlighted diff: CUDA highlighting, emphasised changed words, rebuilds only on selection.

use super::{fixture_state, send};
use crate::tui::event::{AgentMsg, AppEvent, press};
use crate::tui::highlight::Highlighter;
use crate::tui::theme::Theme;
use crate::tui::update::update;
use crate::tui::workbench::AgentView;
use crossterm::event::KeyCode;
use std::sync::Arc;

#[test]
fn highlighting_colours_cuda_as_cpp() {
    let h = Highlighter::new("OneHalfDark", true).unwrap();
    let lines = h.highlight("__global__ void k(int* x) { x[0] = 1; }\n");
    let colours: std::collections::BTreeSet<String> = lines[0]
        .iter()
        .map(|(s, _)| format!("{:?}", s.fg))
        .collect();
    assert!(colours.len() >= 3, "{lines:?}");
    assert!(
        Highlighter::new("no such theme", true)
            .unwrap_err()
            .contains("OneHalfDark")
    );
}

#[test]
fn changed_words_are_emphasised() {
    let t = Theme::builtin("dark", true).unwrap();
    let old = "int a = 1;\nint b = 2;\n";
    let new = "int a = 1;\nint b = 3;\n";
    let hl = |c: &str| {
        Arc::new(
            c.lines()
                .map(|l| vec![(ratatui::style::Style::default(), l.to_string())])
                .collect::<Vec<_>>(),
        )
    };
    let v = crate::tui::highlight::build_diff(
        "x".into(),
        Some(old),
        new,
        Some(&hl(old)),
        &hl(new),
        false,
        &[],
        &t,
    );
    assert_eq!((v.added, v.removed), (1, 1));
    let plus = v
        .lines
        .iter()
        .find(|l| l.to_string().contains("+ int b = 3;"))
        .unwrap();
    let emph: Vec<&str> = plus
        .spans
        .iter()
        .filter(|s| s.style.bg == Some(t.added_emph_bg))
        .map(|s| s.content.as_ref())
        .collect();
    assert_eq!(emph, vec!["3;"]);
}

/// Streamed agent text, progress and log lines do not rebuild the highlighted diff; a new
/// selection does.
#[test]
fn streamed_text_does_not_rebuild_the_diff() {
    let mut s = fixture_state(vec![]);
    s.work.agents.insert(
        "rms_norm".into(),
        AgentView {
            op: "rms_norm".into(),
            backend: "openai".into(),
            running: true,
            stopping: false,
            stream: String::new(),
            ..Default::default()
        },
    );
    let before = s.view.diff_builds;
    for i in 0..200 {
        update(
            &mut s,
            AppEvent::Agent("rms_norm".into(), AgentMsg::Stream(format!("token {i} "))),
        );
        update(
            &mut s,
            AppEvent::Log(crate::session::model::LogLevel::Info, "x".into()),
        );
    }
    assert_eq!(s.view.diff_builds, before, "no rebuild per chunk");
    assert!(s.work.agents["rms_norm"].stream.contains("token 199"));
    send(&mut s, vec![press(KeyCode::Char('k'))]);
    send(&mut s, vec![press(KeyCode::Tab), press(KeyCode::Char('k'))]);
    assert!(s.view.diff_builds > before, "a new selection rebuilds");
}
