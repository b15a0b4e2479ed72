//! Every key of the main view and the editor, in one table that drives three things: dispatch
//! (`action`), the key bar (`key_bar`) and the `?` help (`help_rows`). A key is defined once; a
//! test checks that the three agree. Modal dialogs (help, quit, steer, sessions) handle their
//! few keys themselves and name them in `modal_bar`.

use super::app::{AppState, Modal, PaneId};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key does in the main view (or the editor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    NextPane,
    PrevPane,
    Down,
    Up,
    PageDown,
    PageUp,
    First,
    Last,
    Phase,
    DiffMode,
    FullSource,
    Help,
    Accept,
    Reject,
    Steer,
    Agent,
    Dropout,
    Measure,
    RemeasureSelected,
    RemeasureStale,
    Profile,
    Edit,
    ExternalEdit,
    StepBack,
    StepForward,
    Back10,
    Forward10,
    NextRevision,
    PrevRevision,
    Start,
    End,
    PlayPause,
    Faster,
    Slower,
    EditorSave,
    EditorUndo,
    EditorRedo,
    EditorClose,
    Suspend,
    Quit,
}

/// When a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The main view, live or in replay.
    Always,
    /// The main view of a live run (not in replay).
    Live,
    /// The main view in replay.
    Replay,
    /// The built-in editor.
    Editor,
}

/// A key with or without Ctrl (Shift is part of the character).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chord {
    pub code: KeyCode,
    pub ctrl: bool,
}

const fn k(c: char) -> Chord {
    Chord {
        code: KeyCode::Char(c),
        ctrl: false,
    }
}
const fn ctrl(c: char) -> Chord {
    Chord {
        code: KeyCode::Char(c),
        ctrl: true,
    }
}
const fn code(code: KeyCode) -> Chord {
    Chord { code, ctrl: false }
}

/// Where a key-bar hint shows: in one pane, or in every pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where {
    Pane(PaneId),
    Everywhere,
}

/// A hint in the key bar: where, its place in the bar (lower first), the key and what it does.
#[derive(Debug, Clone, Copy)]
pub struct Hint {
    pub at: Where,
    pub slot: u8,
    pub key: &'static str,
    pub what: &'static str,
}

const fn hint(at: Where, slot: u8, key: &'static str, what: &'static str) -> Hint {
    Hint {
        at,
        slot,
        key,
        what,
    }
}

/// One row of the help: the keys that do it, the actions they dispatch to, the hints.
pub struct Binding {
    pub section: &'static str,
    /// The keys as the help shows them.
    pub keys: &'static str,
    pub help: &'static str,
    pub scope: Scope,
    pub chords: &'static [(Chord, Action)],
    pub hints: &'static [Hint],
}

use Action as A;
use PaneId::{Diff, Gauges, Log, Operators, Revisions};
use Where::{Everywhere, Pane};

/// Every key, in the help's order.
pub const BINDINGS: &[Binding] = &[
    Binding {
        section: "move",
        keys: "Tab / l",
        help: "next pane",
        scope: Scope::Always,
        chords: &[
            (code(KeyCode::Tab), A::NextPane),
            (k('l'), A::NextPane),
            (code(KeyCode::Right), A::NextPane),
        ],
        hints: &[hint(Everywhere, 90, "Tab", "pane")],
    },
    Binding {
        section: "move",
        keys: "Shift-Tab / h",
        help: "previous pane",
        scope: Scope::Always,
        chords: &[
            (code(KeyCode::BackTab), A::PrevPane),
            (k('h'), A::PrevPane),
            (code(KeyCode::Left), A::PrevPane),
        ],
        hints: &[],
    },
    Binding {
        section: "move",
        keys: "j / k, ↓ / ↑",
        help: "next / previous item (or scroll)",
        scope: Scope::Always,
        chords: &[
            (k('j'), A::Down),
            (code(KeyCode::Down), A::Down),
            (k('k'), A::Up),
            (code(KeyCode::Up), A::Up),
        ],
        hints: &[
            hint(Pane(Operators), 0, "j/k", "operator"),
            hint(Pane(Revisions), 0, "j/k", "revision"),
            hint(Pane(Diff), 0, "j/k", "scroll"),
            hint(Pane(Gauges), 0, "j/k", "shape"),
            hint(Pane(Log), 0, "j/k", "scroll"),
        ],
    },
    Binding {
        section: "move",
        keys: "g / G",
        help: "first / last item",
        scope: Scope::Always,
        chords: &[
            (k('g'), A::First),
            (code(KeyCode::Home), A::First),
            (k('G'), A::Last),
            (code(KeyCode::End), A::Last),
        ],
        hints: &[
            hint(Pane(Operators), 1, "g/G", "first/last"),
            hint(Pane(Log), 1, "G", "follow"),
        ],
    },
    Binding {
        section: "move",
        keys: "Ctrl-D / Ctrl-U, PgDn / PgUp",
        help: "ten items down / up",
        scope: Scope::Always,
        chords: &[
            (ctrl('d'), A::PageDown),
            (code(KeyCode::PageDown), A::PageDown),
            (ctrl('u'), A::PageUp),
            (code(KeyCode::PageUp), A::PageUp),
        ],
        hints: &[],
    },
    Binding {
        section: "view",
        keys: "P",
        help: "phase filter: all → prefill → decode",
        scope: Scope::Always,
        chords: &[(k('P'), A::Phase)],
        hints: &[hint(Pane(Operators), 2, "P", "phase")],
    },
    Binding {
        section: "view",
        keys: "d",
        help: "diff against the parent / the incumbent",
        scope: Scope::Always,
        chords: &[(k('d'), A::DiffMode)],
        hints: &[hint(Pane(Diff), 1, "d", "vs parent/incumbent")],
    },
    Binding {
        section: "view",
        keys: "f",
        help: "full source instead of the diff",
        scope: Scope::Always,
        chords: &[(k('f'), A::FullSource)],
        hints: &[hint(Pane(Diff), 2, "f", "full source")],
    },
    Binding {
        section: "view",
        keys: "?",
        help: "this help",
        scope: Scope::Always,
        chords: &[(k('?'), A::Help)],
        hints: &[hint(Everywhere, 91, "?", "help")],
    },
    Binding {
        section: "decide",
        keys: "y",
        help: "accept the selected revision (it becomes the incumbent)",
        scope: Scope::Always,
        chords: &[(k('y'), A::Accept)],
        hints: &[hint(Pane(Revisions), 1, "y", "accept")],
    },
    Binding {
        section: "decide",
        keys: "n",
        help: "reject the selected revision",
        scope: Scope::Always,
        chords: &[(k('n'), A::Reject)],
        hints: &[hint(Pane(Revisions), 2, "n", "reject")],
    },
    Binding {
        section: "decide",
        keys: "s",
        help: "steer: a message for this operator's agent",
        scope: Scope::Live,
        chords: &[(k('s'), A::Steer)],
        hints: &[hint(Everywhere, 50, "s", "steer")],
    },
    Binding {
        section: "decide",
        keys: "a",
        help: "start/stop this operator's agent (several at once)",
        scope: Scope::Always,
        chords: &[(k('a'), A::Agent)],
        hints: &[],
    },
    Binding {
        section: "decide",
        keys: "x",
        help: "agent dropout: mask about half of its history",
        scope: Scope::Always,
        chords: &[(k('x'), A::Dropout)],
        hints: &[],
    },
    Binding {
        section: "measure",
        keys: "m",
        help: "re-measure the selected revision: quick check + time, all shapes",
        scope: Scope::Always,
        chords: &[(k('m'), A::Measure)],
        hints: &[
            hint(Pane(Revisions), 4, "m", "measure"),
            hint(Pane(Gauges), 1, "m", "measure"),
        ],
    },
    Binding {
        section: "measure",
        keys: "M / U",
        help: "standing: re-measure the selected / every stale incumbent in full",
        scope: Scope::Live,
        chords: &[(k('M'), A::RemeasureSelected), (k('U'), A::RemeasureStale)],
        hints: &[hint(Pane(Operators), 3, "M/U", "re-measure")],
    },
    Binding {
        section: "measure",
        keys: "p",
        help: "ncu profile: the selected shape, else the largest",
        scope: Scope::Always,
        chords: &[(k('p'), A::Profile)],
        hints: &[
            hint(Pane(Revisions), 5, "p", "profile"),
            hint(Pane(Gauges), 2, "p", "profile"),
        ],
    },
    Binding {
        section: "measure",
        keys: "e",
        help: "edit in the built-in editor; Ctrl-S saves a human revision and measures it",
        scope: Scope::Always,
        chords: &[(k('e'), A::Edit)],
        hints: &[hint(Pane(Revisions), 3, "e/E", "edit")],
    },
    Binding {
        section: "measure",
        keys: "E",
        help: "edit in $EDITOR; every save is recorded and measured",
        scope: Scope::Always,
        chords: &[(k('E'), A::ExternalEdit)],
        hints: &[],
    },
    Binding {
        section: "replay",
        keys: ", / .",
        help: "step back / forward one event",
        scope: Scope::Replay,
        chords: &[(k(','), A::StepBack), (k('.'), A::StepForward)],
        hints: &[hint(Everywhere, 50, ",/.", "step")],
    },
    Binding {
        section: "replay",
        keys: "[ / ]",
        help: "back / forward 10 events",
        scope: Scope::Replay,
        chords: &[(k('['), A::Back10), (k(']'), A::Forward10)],
        hints: &[],
    },
    Binding {
        section: "replay",
        keys: "r / R",
        help: "jump to the next / previous revision",
        scope: Scope::Replay,
        chords: &[(k('r'), A::NextRevision), (k('R'), A::PrevRevision)],
        hints: &[hint(Everywhere, 52, "r/R", "next/prev rev")],
    },
    Binding {
        section: "replay",
        keys: "0 / $",
        help: "start / end of the session",
        scope: Scope::Replay,
        chords: &[(k('0'), A::Start), (k('$'), A::End)],
        hints: &[],
    },
    Binding {
        section: "replay",
        keys: "space",
        help: "play / pause",
        scope: Scope::Replay,
        chords: &[(k(' '), A::PlayPause)],
        hints: &[hint(Everywhere, 51, "space", "play")],
    },
    Binding {
        section: "replay",
        keys: "+ / -",
        help: "faster / slower",
        scope: Scope::Replay,
        chords: &[
            (k('+'), A::Faster),
            (k('='), A::Faster),
            (k('-'), A::Slower),
        ],
        hints: &[],
    },
    Binding {
        section: "editor",
        keys: "Ctrl-S",
        help: "save (records a human revision, measures it)",
        scope: Scope::Editor,
        chords: &[(ctrl('s'), A::EditorSave)],
        hints: &[],
    },
    Binding {
        section: "editor",
        keys: "Ctrl-Z / Ctrl-Y",
        help: "undo / redo",
        scope: Scope::Editor,
        chords: &[(ctrl('z'), A::EditorUndo), (ctrl('y'), A::EditorRedo)],
        hints: &[],
    },
    Binding {
        section: "editor",
        keys: "Esc",
        help: "close (twice to discard unsaved changes)",
        scope: Scope::Editor,
        chords: &[(code(KeyCode::Esc), A::EditorClose)],
        hints: &[],
    },
    Binding {
        section: "quit",
        keys: "q / Ctrl-C",
        help: "quit (asks while a measurement runs)",
        scope: Scope::Always,
        chords: &[(k('q'), A::Quit), (ctrl('c'), A::Quit)],
        hints: &[hint(Everywhere, 92, "q", "quit")],
    },
    Binding {
        section: "quit",
        keys: "Ctrl-Z",
        help: "suspend to the shell (fg resumes; measurements go on)",
        scope: Scope::Always,
        chords: &[(ctrl('z'), A::Suspend)],
        hints: &[],
    },
];

/// The key bar of the editor (its keys are bindings of the table, shown in its own words).
const EDITOR_BAR: &[(&str, &str)] = &[
    ("Ctrl-S", "save + measure"),
    ("Ctrl-Z/Y", "undo/redo"),
    ("Esc", "close"),
];

fn chord_of(key: &KeyEvent) -> Chord {
    Chord {
        code: key.code,
        ctrl: key.modifiers.contains(KeyModifiers::CONTROL),
    }
}

fn applies(scope: Scope, replaying: bool, editor: bool) -> bool {
    match scope {
        Scope::Always => !editor,
        Scope::Live => !editor && !replaying,
        Scope::Replay => !editor && replaying,
        Scope::Editor => editor,
    }
}

/// What a key does in the main view (`editor` false) or the editor (true).
pub fn action(key: &KeyEvent, replaying: bool, editor: bool) -> Option<Action> {
    let c = chord_of(key);
    BINDINGS
        .iter()
        .filter(|b| applies(b.scope, replaying, editor))
        .flat_map(|b| b.chords.iter())
        .find(|(ch, _)| *ch == c)
        .map(|(_, a)| *a)
}

/// The help overlay's rows: (section, keys, what).
pub fn help_rows() -> impl Iterator<Item = (&'static str, &'static str, &'static str)> {
    BINDINGS.iter().map(|b| (b.section, b.keys, b.help))
}

/// The key bar's hints of a modal dialog, or None in the main view.
pub fn modal_bar(modal: &Modal) -> Option<Vec<(&'static str, &'static str)>> {
    Some(match modal {
        Modal::Help { .. } => vec![("j/k", "scroll"), ("Esc/?/q", "close")],
        Modal::ConfirmQuit => vec![("y", "quit and cancel the job"), ("n/Esc", "stay")],
        Modal::Steer(_) => vec![("Enter", "send"), ("Esc", "cancel")],
        Modal::Editor(_) => EDITOR_BAR.to_vec(),
        Modal::Sessions { .. } => vec![("j/k", "session"), ("Enter", "replay"), ("Esc", "dismiss")],
        Modal::None => return None,
    })
}

/// The key bar: the keys of what has focus now.
pub fn key_bar(state: &AppState) -> Vec<(&'static str, &'static str)> {
    if let Some(v) = modal_bar(&state.modal) {
        return v;
    }
    let replaying = state.replay.is_some();
    let mut hints: Vec<&Hint> = BINDINGS
        .iter()
        .filter(|b| applies(b.scope, replaying, false))
        .flat_map(|b| b.hints.iter())
        .filter(|h| h.at == Everywhere || h.at == Pane(state.focus))
        .collect();
    hints.sort_by_key(|h| h.slot);
    hints.into_iter().map(|h| (h.key, h.what)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(c: Chord) -> KeyEvent {
        KeyEvent::new(
            c.code,
            if c.ctrl {
                KeyModifiers::CONTROL
            } else {
                KeyModifiers::NONE
            },
        )
    }

    /// Every chord of the table dispatches to its own action in its scope, and no chord is
    /// bound twice where both bindings apply.
    #[test]
    fn the_table_dispatches_every_key_it_lists_and_binds_none_twice() {
        for (replaying, editor) in [(false, false), (true, false), (false, true)] {
            let mut seen: Vec<Chord> = Vec::new();
            for b in BINDINGS
                .iter()
                .filter(|b| applies(b.scope, replaying, editor))
            {
                for (c, a) in b.chords {
                    assert!(!seen.contains(c), "{c:?} bound twice");
                    seen.push(*c);
                    assert_eq!(action(&ev(*c), replaying, editor), Some(*a), "{}", b.keys);
                }
            }
        }
        // Ctrl-D pages; plain d switches the diff's base.
        assert_eq!(action(&ev(ctrl('d')), false, false), Some(A::PageDown));
        assert_eq!(action(&ev(k('d')), false, false), Some(A::DiffMode));
        // Replay keys do nothing live; steering does nothing in replay.
        assert_eq!(action(&ev(k('.')), false, false), None);
        assert_eq!(action(&ev(k('s')), true, false), None);
    }

    /// The help names every key the table binds: each help row's key text mentions each of
    /// its chords, and each key-bar hint belongs to a row that binds the keys it names.
    #[test]
    fn the_help_text_names_every_bound_key() {
        let name = |c: &Chord| -> String {
            let base = match c.code {
                KeyCode::Char(' ') => "space".to_string(),
                KeyCode::Char(ch) => ch.to_string(),
                KeyCode::Tab => "Tab".into(),
                KeyCode::BackTab => "Shift-Tab".into(),
                KeyCode::Esc => "Esc".into(),
                KeyCode::Down => "↓".into(),
                KeyCode::Up => "↑".into(),
                KeyCode::PageDown => "PgDn".into(),
                KeyCode::PageUp => "PgUp".into(),
                other => format!("{other:?}"),
            };
            if c.ctrl {
                format!("Ctrl-{}", base.to_uppercase())
            } else {
                base
            }
        };
        // Keys the help leaves out on purpose: arrows and Home/End mirror the letters shown.
        let silent = [
            KeyCode::Right,
            KeyCode::Left,
            KeyCode::Home,
            KeyCode::End,
            KeyCode::Char('='),
        ];
        let rows: Vec<_> = help_rows().collect();
        assert_eq!(rows.len(), BINDINGS.len());
        for b in BINDINGS {
            for (c, _) in b.chords {
                if silent.contains(&c.code) {
                    continue;
                }
                let n = name(c);
                // "j / k, ↓ / ↑": words apart by spaces, a comma ending a word is punctuation
                let mut words = b.keys.split_whitespace().map(|w| match w.len() > 1 {
                    true => w.trim_end_matches(','),
                    false => w,
                });
                assert!(
                    words.any(|w| w == n),
                    "help row `{}` does not name {n}",
                    b.keys
                );
            }
            for h in b.hints {
                let first = h.key.split('/').next().unwrap();
                assert!(
                    b.chords.iter().any(|(c, _)| name(c) == first),
                    "hint {} is not a key of `{}`",
                    h.key,
                    b.keys
                );
            }
        }
        for (k, _) in EDITOR_BAR {
            let first = k.split('/').next().unwrap();
            assert!(
                BINDINGS
                    .iter()
                    .filter(|b| b.scope == Scope::Editor)
                    .any(|b| b.keys.contains(first)),
                "editor hint {k}"
            );
        }
    }
}
