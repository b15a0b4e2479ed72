//! Every key of the main view and the editor, in one table that drives three things: dispatch
//! (`action`), the key bar (`key_bar`) and the `?` help (`help_rows`). A key is defined once; a
//! test checks that the three agree. Modal dialogs (help, quit, steer, sessions, the search
//! prompt) handle their few keys themselves and name them in `modal_bar`.
//!
//! A binding applies in a scope (live, replay, a replay opened from the session picker, while a
//! search is set, the editor) and in some panes or all of them. Where two bindings of one key
//! apply, the narrower one wins: one for the focused pane before one for every pane, one of a
//! scope before one that always applies. Tests list every such override, so none is an
//! accident.

use super::state::AppState;
use super::view_state::{Modal, PaneId};
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
    /// The code pane: half a pane left / right, back to column 0.
    ScrollLeft,
    ScrollRight,
    ColumnZero,
    /// Opens the search prompt.
    Search,
    SearchNext,
    SearchPrev,
    ClearSearch,
    /// Acts on the selection: an operator's revisions, a revision's code.
    Open,
    /// Leaves a replay opened from the session picker, back to the picker.
    BackToSessions,
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
    /// The main view in a replay opened from the session picker.
    Picked,
    /// The main view while a search is set.
    Searching,
    /// The built-in editor.
    Editor,
}

/// Where a key is pressed: what `action` and `key_bar` look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctx {
    pub replaying: bool,
    /// The replay was opened from the session picker (`q` goes back to it).
    pub picked: bool,
    pub searching: bool,
    pub editor: bool,
    pub focus: PaneId,
}

impl Ctx {
    /// The main view as the state is now.
    pub fn of(s: &AppState) -> Ctx {
        Ctx {
            replaying: s.work.replay.is_some(),
            picked: s.work.replay.as_ref().is_some_and(|r| r.back.is_some()),
            searching: s.view.search.is_some(),
            editor: false,
            focus: s.view.focus,
        }
    }

    /// The built-in editor.
    pub fn editor() -> Ctx {
        Ctx {
            replaying: false,
            picked: false,
            searching: false,
            editor: true,
            focus: PaneId::Diff,
        }
    }
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
    /// The panes it applies in (none: every pane).
    pub panes: &'static [PaneId],
    pub chords: &'static [(Chord, Action)],
    pub hints: &'static [Hint],
}

use Action as A;
use PaneId::{Diff, Gauges, Log, Operators, Revisions};
use Where::{Everywhere, Pane};

/// Every pane.
const ALL: &[PaneId] = &[];
/// The panes `/` searches.
const SEARCHED: &[PaneId] = &[Operators, Diff, Log];

/// Every key, in the help's order.
pub static BINDINGS: &[Binding] = &[
    Binding {
        section: "move",
        keys: "Tab / l",
        help: "next pane",
        scope: Scope::Always,
        panes: ALL,
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
        panes: ALL,
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
        panes: ALL,
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
        panes: ALL,
        chords: &[
            (k('g'), A::First),
            (code(KeyCode::Home), A::First),
            (k('G'), A::Last),
            (code(KeyCode::End), A::Last),
        ],
        hints: &[
            hint(Pane(Operators), 1, "g/G", "first/last"),
            hint(Pane(Log), 1, "g/G", "top/follow"),
        ],
    },
    Binding {
        section: "move",
        keys: "Ctrl-D / Ctrl-U, PgDn / PgUp",
        help: "ten items down / up",
        scope: Scope::Always,
        panes: ALL,
        chords: &[
            (ctrl('d'), A::PageDown),
            (code(KeyCode::PageDown), A::PageDown),
            (ctrl('u'), A::PageUp),
            (code(KeyCode::PageUp), A::PageUp),
        ],
        hints: &[],
    },
    Binding {
        section: "move",
        keys: "H / L, 0",
        help: "the code pane: scroll sideways half a pane / back to column 0 (› marks a cut line)",
        scope: Scope::Always,
        panes: &[Diff],
        chords: &[
            (k('H'), A::ScrollLeft),
            (k('L'), A::ScrollRight),
            (k('0'), A::ColumnZero),
        ],
        hints: &[hint(Pane(Diff), 1, "H/L/0", "sideways")],
    },
    Binding {
        section: "move",
        keys: "Enter",
        help: "on an operator: its revisions; on a revision: its code",
        scope: Scope::Always,
        panes: &[Operators, Revisions],
        chords: &[(code(KeyCode::Enter), A::Open)],
        hints: &[
            hint(Pane(Operators), 60, "Enter", "revisions"),
            hint(Pane(Revisions), 60, "Enter", "code"),
        ],
    },
    Binding {
        section: "search",
        keys: "/",
        help: "search the operators' names, the code or the log (the focused pane) as you type; Enter keeps the search, Esc cancels it",
        scope: Scope::Always,
        panes: SEARCHED,
        chords: &[(k('/'), A::Search)],
        hints: &[
            hint(Pane(Operators), 4, "/", "find"),
            hint(Pane(Diff), 3, "/", "search"),
            hint(Pane(Log), 2, "/", "search"),
        ],
    },
    Binding {
        section: "search",
        keys: "n / N",
        help: "next / previous match (in the log: older / newer) while a search is set",
        scope: Scope::Searching,
        panes: SEARCHED,
        chords: &[(k('n'), A::SearchNext), (k('N'), A::SearchPrev)],
        hints: &[
            hint(Pane(Operators), 5, "n/N", "match"),
            hint(Pane(Diff), 4, "n/N", "match"),
            hint(Pane(Log), 3, "n/N", "match"),
        ],
    },
    Binding {
        section: "search",
        keys: "Esc",
        help: "clear the search",
        scope: Scope::Searching,
        panes: ALL,
        chords: &[(code(KeyCode::Esc), A::ClearSearch)],
        hints: &[hint(Everywhere, 49, "Esc", "clear search")],
    },
    Binding {
        section: "view",
        keys: "P",
        help: "phase filter: all → prefill → decode",
        scope: Scope::Always,
        panes: ALL,
        chords: &[(k('P'), A::Phase)],
        hints: &[hint(Pane(Operators), 2, "P", "phase")],
    },
    Binding {
        section: "view",
        keys: "d",
        help: "diff against the parent / the incumbent",
        scope: Scope::Always,
        panes: ALL,
        chords: &[(k('d'), A::DiffMode)],
        hints: &[hint(Pane(Diff), 1, "d", "vs parent/incumbent")],
    },
    Binding {
        section: "view",
        keys: "f",
        help: "full source instead of the diff",
        scope: Scope::Always,
        panes: ALL,
        chords: &[(k('f'), A::FullSource)],
        hints: &[hint(Pane(Diff), 2, "f", "full source")],
    },
    Binding {
        section: "view",
        keys: "?",
        help: "this help",
        scope: Scope::Always,
        panes: ALL,
        chords: &[(k('?'), A::Help)],
        hints: &[hint(Everywhere, 91, "?", "help")],
    },
    Binding {
        section: "decide",
        keys: "y",
        help: "accept the selected revision (it becomes the incumbent)",
        scope: Scope::Always,
        panes: ALL,
        chords: &[(k('y'), A::Accept)],
        hints: &[hint(Pane(Revisions), 1, "y", "accept")],
    },
    Binding {
        section: "decide",
        keys: "n",
        help: "reject the selected revision (while a search is set, n in the operators, the code and the log is its next match)",
        scope: Scope::Always,
        panes: ALL,
        chords: &[(k('n'), A::Reject)],
        hints: &[hint(Pane(Revisions), 2, "n", "reject")],
    },
    Binding {
        section: "decide",
        keys: "s",
        help: "steer: a message for this operator's agent",
        scope: Scope::Live,
        panes: ALL,
        chords: &[(k('s'), A::Steer)],
        hints: &[hint(Everywhere, 50, "s", "steer")],
    },
    Binding {
        section: "decide",
        keys: "a",
        help: "start/stop this operator's agent (several at once)",
        scope: Scope::Always,
        panes: ALL,
        chords: &[(k('a'), A::Agent)],
        hints: &[],
    },
    Binding {
        section: "decide",
        keys: "x",
        help: "agent dropout: mask about half of its history",
        scope: Scope::Always,
        panes: ALL,
        chords: &[(k('x'), A::Dropout)],
        hints: &[],
    },
    Binding {
        section: "measure",
        keys: "m",
        help: "re-measure the selected revision: quick check + time, all shapes",
        scope: Scope::Always,
        panes: ALL,
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
        panes: ALL,
        chords: &[(k('M'), A::RemeasureSelected), (k('U'), A::RemeasureStale)],
        hints: &[hint(Pane(Operators), 3, "M/U", "re-measure")],
    },
    Binding {
        section: "measure",
        keys: "p",
        help: "ncu profile: the selected shape, else the largest",
        scope: Scope::Always,
        panes: ALL,
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
        panes: ALL,
        chords: &[(k('e'), A::Edit)],
        hints: &[hint(Pane(Revisions), 3, "e/E", "edit")],
    },
    Binding {
        section: "measure",
        keys: "E",
        help: "edit in $EDITOR; every save is recorded and measured",
        scope: Scope::Always,
        panes: ALL,
        chords: &[(k('E'), A::ExternalEdit)],
        hints: &[],
    },
    Binding {
        section: "replay",
        keys: ", / .",
        help: "step back / forward one event",
        scope: Scope::Replay,
        panes: ALL,
        chords: &[(k(','), A::StepBack), (k('.'), A::StepForward)],
        hints: &[hint(Everywhere, 50, ",/.", "step")],
    },
    Binding {
        section: "replay",
        keys: "[ / ]",
        help: "back / forward 10 events",
        scope: Scope::Replay,
        panes: ALL,
        chords: &[(k('['), A::Back10), (k(']'), A::Forward10)],
        hints: &[],
    },
    Binding {
        section: "replay",
        keys: "r / R",
        help: "jump to the next / previous revision",
        scope: Scope::Replay,
        panes: ALL,
        chords: &[(k('r'), A::NextRevision), (k('R'), A::PrevRevision)],
        hints: &[hint(Everywhere, 52, "r/R", "next/prev rev")],
    },
    Binding {
        section: "replay",
        keys: "0 / $",
        help: "start / end of the session (in the code pane 0 is column 0)",
        scope: Scope::Replay,
        panes: ALL,
        chords: &[(k('0'), A::Start), (k('$'), A::End)],
        hints: &[],
    },
    Binding {
        section: "replay",
        keys: "space",
        help: "play / pause",
        scope: Scope::Replay,
        panes: ALL,
        chords: &[(k(' '), A::PlayPause)],
        hints: &[hint(Everywhere, 51, "space", "play")],
    },
    Binding {
        section: "replay",
        keys: "+ / -",
        help: "faster / slower",
        scope: Scope::Replay,
        panes: ALL,
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
        panes: ALL,
        chords: &[(ctrl('s'), A::EditorSave)],
        hints: &[],
    },
    Binding {
        section: "editor",
        keys: "Ctrl-Z / Ctrl-Y",
        help: "undo / redo",
        scope: Scope::Editor,
        panes: ALL,
        chords: &[(ctrl('z'), A::EditorUndo), (ctrl('y'), A::EditorRedo)],
        hints: &[],
    },
    Binding {
        section: "editor",
        keys: "Esc",
        help: "close (twice to discard unsaved changes)",
        scope: Scope::Editor,
        panes: ALL,
        chords: &[(code(KeyCode::Esc), A::EditorClose)],
        hints: &[],
    },
    Binding {
        section: "quit",
        keys: "q / Ctrl-C",
        help: "quit (asks while a measurement runs)",
        scope: Scope::Always,
        panes: ALL,
        chords: &[(k('q'), A::Quit), (ctrl('c'), A::Quit)],
        hints: &[hint(Everywhere, 92, "q", "quit")],
    },
    Binding {
        section: "quit",
        keys: "q",
        help: "in a replay opened from the session picker: back to the picker",
        scope: Scope::Picked,
        panes: ALL,
        chords: &[(k('q'), A::BackToSessions)],
        hints: &[hint(Everywhere, 92, "q", "sessions")],
    },
    Binding {
        section: "quit",
        keys: "Ctrl-Z",
        help: "suspend to the shell (fg resumes; measurements go on)",
        scope: Scope::Always,
        panes: ALL,
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

fn applies(b: &Binding, c: &Ctx) -> bool {
    let main = !c.editor;
    let scope = match b.scope {
        Scope::Always => main,
        Scope::Live => main && !c.replaying,
        Scope::Replay => main && c.replaying,
        Scope::Picked => main && c.picked,
        Scope::Searching => main && c.searching,
        Scope::Editor => c.editor,
    };
    scope && (b.panes.is_empty() || b.panes.contains(&c.focus))
}

/// How narrow a binding is: a pane's own before every pane's, a scope's before always.
fn rank(b: &Binding) -> u8 {
    2 * u8::from(!b.panes.is_empty()) + u8::from(b.scope != Scope::Always)
}

/// The binding a chord dispatches to here, and its action.
fn winner(ch: Chord, c: &Ctx) -> Option<(&'static Binding, Action)> {
    BINDINGS
        .iter()
        .filter(|b| applies(b, c))
        .flat_map(|b| b.chords.iter().map(move |(x, a)| (b, *x, *a)))
        .filter(|(_, x, _)| *x == ch)
        .max_by_key(|(b, _, _)| rank(b))
        .map(|(b, _, a)| (b, a))
}

/// What a key does where it is pressed (the main view or the editor).
pub fn action(key: &KeyEvent, c: &Ctx) -> Option<Action> {
    winner(chord_of(key), c).map(|(_, a)| a)
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
        Modal::Search(_) => vec![("Enter", "keep"), ("Esc", "cancel")],
        Modal::None => return None,
    })
}

/// Hints from this slot on are the view's own (quit, help, panes): the last a narrow bar drops.
const KEPT: u8 = 89;

/// The key bar: the keys of what has focus now (a hint whose key another binding takes here
/// is left out), in slot order.
fn bar_hints(state: &AppState) -> Vec<&'static Hint> {
    let c = Ctx::of(state);
    let mut hints: Vec<&Hint> = BINDINGS
        .iter()
        .filter(|b| applies(b, &c))
        .filter(|b| {
            b.chords
                .first()
                .and_then(|(ch, _)| winner(*ch, &c))
                .is_some_and(|(w, _)| std::ptr::eq(w, *b))
        })
        .flat_map(|b| b.hints.iter())
        .filter(|h| h.at == Everywhere || h.at == Pane(state.view.focus))
        .collect();
    hints.sort_by_key(|h| h.slot);
    hints
}

/// The key bar: the keys of what has focus now.
pub fn key_bar(state: &AppState) -> Vec<(&'static str, &'static str)> {
    key_bar_within(state, usize::MAX)
}

/// Columns a hint takes in the bar: `key what` and two spaces.
pub fn hint_cols(key: &str, what: &str) -> usize {
    super::text::cols(key) + 1 + super::text::cols(what) + 2
}

/// The key bar in `room` columns: the view's own hints (help, panes, quit) stay; the others
/// come in slot order as long as they fit (one too wide is passed over for a shorter one).
pub fn key_bar_within(state: &AppState, room: usize) -> Vec<(&'static str, &'static str)> {
    if let Some(v) = modal_bar(&state.view.modal) {
        return v;
    }
    let hints = bar_hints(state);
    let mut left = room.saturating_sub(
        hints
            .iter()
            .filter(|h| h.slot >= KEPT)
            .map(|h| hint_cols(h.key, h.what))
            .sum(),
    );
    hints
        .into_iter()
        .filter(|h| {
            let w = hint_cols(h.key, h.what);
            if h.slot >= KEPT {
                return true;
            }
            let fits = w <= left;
            if fits {
                left -= w;
            }
            fits
        })
        .map(|h| (h.key, h.what))
        .collect()
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

    /// Every context a key can be pressed in: each pane, live or replaying (from the picker
    /// or not), with or without a search; and the editor.
    fn contexts() -> Vec<Ctx> {
        let mut v = vec![Ctx::editor()];
        for focus in crate::tui::view_state::PANES {
            for (replaying, picked) in [(false, false), (true, false), (true, true)] {
                for searching in [false, true] {
                    v.push(Ctx {
                        replaying,
                        picked,
                        searching,
                        editor: false,
                        focus,
                    });
                }
            }
        }
        v
    }

    fn live(focus: PaneId) -> Ctx {
        Ctx {
            replaying: false,
            picked: false,
            searching: false,
            editor: false,
            focus,
        }
    }

    /// Wherever a key is pressed, at most one binding of it is the narrowest that applies; a
    /// binding's own chords dispatch to their actions wherever nothing narrower takes them.
    #[test]
    fn the_table_dispatches_every_key_it_lists_and_binds_none_twice() {
        for c in contexts() {
            let mut seen: Vec<(Chord, u8)> = Vec::new();
            for b in BINDINGS.iter().filter(|b| applies(b, &c)) {
                for (ch, a) in b.chords {
                    assert!(
                        !seen.contains(&(*ch, rank(b))),
                        "{ch:?} bound twice at one rank in {c:?}"
                    );
                    seen.push((*ch, rank(b)));
                    let (w, got) = winner(*ch, &c).unwrap();
                    if std::ptr::eq(w, b) {
                        assert_eq!(got, *a, "{}", b.keys);
                    }
                }
            }
        }
        let ops = live(Operators);
        // Ctrl-D pages; plain d switches the diff's base.
        assert_eq!(action(&ev(ctrl('d')), &ops), Some(A::PageDown));
        assert_eq!(action(&ev(k('d')), &ops), Some(A::DiffMode));
        // Replay keys do nothing live; steering does nothing in replay.
        assert_eq!(action(&ev(k('.')), &ops), None);
        let replay = Ctx {
            replaying: true,
            ..ops
        };
        assert_eq!(action(&ev(k('s')), &replay), None);
        // The editor's keys are its own: Ctrl-Z suspends in the main view, undoes in the editor.
        assert_eq!(action(&ev(k('q')), &Ctx::editor()), None);
        assert_eq!(action(&ev(ctrl('z')), &ops), Some(A::Suspend));
        assert_eq!(action(&ev(ctrl('z')), &Ctx::editor()), Some(A::EditorUndo));
        assert_eq!(
            action(&ev(code(KeyCode::Esc)), &Ctx::editor()),
            Some(A::EditorClose)
        );
    }

    /// Every key that a narrower binding takes from a wider one, and where: nothing else is
    /// shadowed. `n` rejects unless a search is set in a pane it searches; `0` is column 0 in
    /// the code pane (the start of a replay elsewhere); `q` leaves a picked replay.
    #[test]
    fn the_overrides_are_these_and_no_others() {
        let mut found: Vec<(char, PaneId, bool, bool, bool, Action, Action)> = Vec::new();
        for c in contexts().into_iter().filter(|c| !c.editor) {
            for b in BINDINGS.iter().filter(|b| applies(b, &c)) {
                for (ch, a) in b.chords {
                    let (w, got) = winner(*ch, &c).unwrap();
                    if !std::ptr::eq(w, b) {
                        let KeyCode::Char(key) = ch.code else {
                            panic!("{ch:?} shadowed in {c:?}")
                        };
                        found.push((key, c.focus, c.replaying, c.picked, c.searching, *a, got));
                    }
                }
            }
        }
        for (key, focus, replaying, picked, searching, lost, won) in &found {
            let ok = match key {
                'n' => {
                    *searching
                        && SEARCHED.contains(focus)
                        && *lost == A::Reject
                        && *won == A::SearchNext
                }
                '0' => *replaying && *focus == Diff && *lost == A::Start && *won == A::ColumnZero,
                'q' => *picked && *lost == A::Quit && *won == A::BackToSessions,
                _ => false,
            };
            assert!(
                ok,
                "unexpected override: {key} in {focus:?}: {lost:?} -> {won:?}"
            );
        }
        // and each of them happens
        for key in ['n', '0', 'q'] {
            assert!(found.iter().any(|f| f.0 == key), "{key} never overrides");
        }
        // n rejects in the revisions pane even while a search is set
        let revs = Ctx {
            searching: true,
            ..live(Revisions)
        };
        assert_eq!(action(&ev(k('n')), &revs), Some(A::Reject));
        assert_eq!(action(&ev(k('n')), &live(Diff)), Some(A::Reject));
    }

    /// The key bar leaves out a hint whose key a narrower binding takes: a picked replay says
    /// `q sessions`, not `q quit`.
    #[test]
    fn the_key_bar_shows_the_binding_that_wins() {
        let hints = |c: &Ctx| -> Vec<(&str, &str)> {
            BINDINGS
                .iter()
                .filter(|b| applies(b, c))
                .filter(|b| winner(b.chords[0].0, c).is_some_and(|(w, _)| std::ptr::eq(w, *b)))
                .flat_map(|b| b.hints.iter())
                .filter(|h| h.at == Everywhere || h.at == Pane(c.focus))
                .map(|h| (h.key, h.what))
                .collect()
        };
        let picked = Ctx {
            replaying: true,
            picked: true,
            ..live(Operators)
        };
        assert!(hints(&picked).contains(&("q", "sessions")));
        assert!(!hints(&picked).contains(&("q", "quit")));
        assert!(hints(&live(Operators)).contains(&("q", "quit")));
        assert!(!hints(&live(Diff)).contains(&("n/N", "match")));
        let searching = Ctx {
            searching: true,
            ..live(Diff)
        };
        assert!(hints(&searching).contains(&("n/N", "match")));
        assert!(hints(&searching).contains(&("H/L/0", "sideways")));
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
                let first = match h.key {
                    "/" => "/",
                    k => k.split('/').next().unwrap(),
                };
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
