//! Hand edits: the built-in editor, $EDITOR with a watched file, and saved files.

use crate::session::model::LogLevel;
use crate::tui::event::Effect;
use crate::tui::keymap::Action;
use crate::tui::state::AppState;
use crate::tui::view_state::{EditorState, Modal};
use crate::tui::workbench::Watch;
use crossterm::event::KeyEvent;
use ratatui_textarea::{CursorMove, TextArea};
use std::path::PathBuf;

pub(crate) fn on_file(
    state: &mut AppState,
    path: PathBuf,
    content: Result<String, String>,
) -> Vec<Effect> {
    let Some(w) = state.work.watches.get(&path).cloned() else {
        return vec![];
    };
    let content = match content {
        Ok(c) => c,
        Err(e) => {
            state
                .work
                .log(LogLevel::Warn, format!("{}: {e}", path.display()));
            return vec![];
        }
    };
    if content == w.last_content || content.trim().is_empty() {
        return vec![];
    }
    let (rev, fx) = state.save_human(&w.op, w.last_rev, content.clone(), "external");
    state.work.watches.insert(
        path,
        Watch {
            op: w.op.clone(),
            last_rev: Some(rev),
            last_content: content,
        },
    );
    fx
}

pub(crate) fn open_editor(state: &mut AppState) {
    let Some(op) = state.selected_op() else {
        return;
    };
    let r = state.selected_rev().cloned();
    let source = r.as_ref().map(|r| r.source.clone()).unwrap_or_default();
    let lines: Vec<String> = source.lines().map(|l| l.to_string()).collect();
    let mut ta = TextArea::new(if lines.is_empty() {
        vec![String::new()]
    } else {
        lines
    });
    ta.set_line_number_style(ratatui::style::Style::default().fg(state.view.theme.gutter));
    ta.set_cursor_line_style(ratatui::style::Style::default().bg(state.view.theme.selection_bg));
    if let Some(d) = r.as_ref().and_then(|r| r.measurement.diagnostics.first()) {
        ta.move_cursor(CursorMove::Jump(
            d.line.saturating_sub(1).min(u16::MAX as usize) as u16,
            0,
        ));
    }
    state.view.modal = Modal::Editor(Box::new(EditorState {
        op,
        base: r.as_ref().map(|r| r.rev),
        base_source: source,
        saved: r
            .as_ref()
            .filter(|r| !r.measurement.diagnostics.is_empty())
            .map(|r| r.rev),
        textarea: ta,
        confirm_discard: false,
    }));
}

pub(crate) fn editor_key(state: &mut AppState, k: KeyEvent) -> Vec<Effect> {
    let action = crate::tui::keymap::action(&k, &crate::tui::keymap::Ctx::editor());
    let Modal::Editor(ed) = &mut state.view.modal else {
        return vec![];
    };
    if action == Some(Action::EditorSave) {
        let text = ed.text();
        if text == ed.base_source {
            state.work.log(
                LogLevel::Info,
                "nothing to save: the text is unchanged".into(),
            );
            return vec![];
        }
        let (op, base) = (ed.op.clone(), ed.base);
        let (rev, fx) = state.save_human(&op, base, text.clone(), "editor");
        if let Modal::Editor(ed) = &mut state.view.modal {
            ed.base = Some(rev);
            ed.base_source = text;
            ed.saved = Some(rev);
            ed.confirm_discard = false;
        }
        return fx;
    }
    if action == Some(Action::EditorClose) {
        if ed.text() != ed.base_source && !ed.confirm_discard {
            ed.confirm_discard = true;
            return vec![];
        }
        state.view.modal = Modal::None;
        return vec![];
    }
    ed.confirm_discard = false;
    match action {
        Some(Action::EditorUndo) => {
            ed.textarea.undo();
        }
        Some(Action::EditorRedo) => {
            ed.textarea.redo();
        }
        _ => {
            ed.textarea.input(k);
        }
    }
    vec![]
}

pub(crate) fn external_edit(state: &mut AppState) -> Vec<Effect> {
    let Some(op) = state.selected_op() else {
        return vec![];
    };
    let r = state.selected_rev().cloned();
    let n = r.as_ref().map(|r| r.rev).unwrap_or(0);
    let path = state.work.kernels_dir.join(&op).join(format!("v{n}.cu"));
    let content = r.as_ref().map(|r| r.source.clone()).unwrap_or_default();
    state.work.watches.insert(
        path.clone(),
        Watch {
            op: op.clone(),
            last_rev: r.as_ref().map(|r| r.rev),
            last_content: content.clone(),
        },
    );
    state.work.log(
        LogLevel::Info,
        format!("editing {op} v{n} in $EDITOR; every save is measured"),
    );
    vec![Effect::ExternalEdit { op, path, content }]
}
