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
/// The keys that are not characters.
const TAB: Chord = code(KeyCode::Tab);
const BACKTAB: Chord = code(KeyCode::BackTab);
const LEFT: Chord = code(KeyCode::Left);
const RIGHT: Chord = code(KeyCode::Right);
const UP: Chord = code(KeyCode::Up);
const DOWN: Chord = code(KeyCode::Down);
const HOME: Chord = code(KeyCode::Home);
const END: Chord = code(KeyCode::End);
const PGUP: Chord = code(KeyCode::PageUp);
const PGDN: Chord = code(KeyCode::PageDown);
const ENTER: Chord = code(KeyCode::Enter);
const ESC: Chord = code(KeyCode::Esc);

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

/// A hint in one pane's key bar.
const fn at(pane: PaneId, slot: u8, key: &'static str, what: &'static str) -> Hint {
    Hint {
        at: Where::Pane(pane),
        slot,
        key,
        what,
    }
}

/// A hint in every pane's key bar.
const fn everywhere(slot: u8, key: &'static str, what: &'static str) -> Hint {
    Hint {
        at: Where::Everywhere,
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

/// A binding of the main view, live or in replay, in every pane.
const fn bind(
    section: &'static str,
    keys: &'static str,
    help: &'static str,
    chords: &'static [(Chord, Action)],
    hints: &'static [Hint],
) -> Binding {
    Binding {
        section,
        keys,
        help,
        scope: Scope::Always,
        panes: &[],
        chords,
        hints,
    }
}

impl Binding {
    /// The binding in `scope` only.
    const fn only(self, scope: Scope) -> Binding {
        Binding { scope, ..self }
    }

    /// The binding in these panes only.
    const fn in_panes(self, panes: &'static [PaneId]) -> Binding {
        Binding { panes, ..self }
    }
}

use Action as A;
use PaneId::{Diff, Gauges, Log, Operators, Revisions};
use Where::{Everywhere, Pane};

/// The panes `/` searches.
const SEARCHED: &[PaneId] = &[Operators, Diff, Log];

/// Every key, in the help's order: one `bind` per binding (its section, the keys as the help
/// names them, the help, the chords and what each does, the key-bar hints), narrowed by `only`
/// (a scope) and `in_panes`. Laid out by hand, as a table.
#[rustfmt::skip]
pub static BINDINGS: &[Binding] = &[
    bind("move", "Tab / l", "next pane",
        &[(TAB, A::NextPane), (k('l'), A::NextPane), (RIGHT, A::NextPane)],
        &[everywhere(90, "Tab", "pane")]),
    bind("move", "Shift-Tab / h", "previous pane",
        &[(BACKTAB, A::PrevPane), (k('h'), A::PrevPane), (LEFT, A::PrevPane)], &[]),
    bind("move", "j / k, ↓ / ↑", "next / previous item (or scroll)",
        &[(k('j'), A::Down), (DOWN, A::Down), (k('k'), A::Up), (UP, A::Up)],
        &[at(Operators, 0, "j/k", "operator"), at(Revisions, 0, "j/k", "revision"),
          at(Diff, 0, "j/k", "scroll"), at(Gauges, 0, "j/k", "shape"),
          at(Log, 0, "j/k", "scroll")]),
    bind("move", "g / G", "first / last item",
        &[(k('g'), A::First), (HOME, A::First), (k('G'), A::Last), (END, A::Last)],
        &[at(Operators, 1, "g/G", "first/last"), at(Log, 1, "g/G", "top/follow")]),
    bind("move", "Ctrl-D / Ctrl-U, PgDn / PgUp", "ten items down / up",
        &[(ctrl('d'), A::PageDown), (PGDN, A::PageDown), (ctrl('u'), A::PageUp), (PGUP, A::PageUp)],
        &[]),
    bind("move", "H / L, 0",
        "the code pane: scroll sideways half a pane / back to column 0 (› marks a cut line)",
        &[(k('H'), A::ScrollLeft), (k('L'), A::ScrollRight), (k('0'), A::ColumnZero)],
        &[at(Diff, 1, "H/L/0", "sideways")]).in_panes(&[Diff]),
    bind("move", "Enter", "on an operator: its revisions; on a revision: its code",
        &[(ENTER, A::Open)],
        &[at(Operators, 60, "Enter", "revisions"), at(Revisions, 60, "Enter", "code")])
        .in_panes(&[Operators, Revisions]),

    bind("search", "/",
        "search the operators' names, the code or the log (the focused pane) as you type; Enter \
         keeps the search, Esc cancels it",
        &[(k('/'), A::Search)],
        &[at(Operators, 4, "/", "find"), at(Diff, 3, "/", "search"), at(Log, 2, "/", "search")])
        .in_panes(SEARCHED),
    bind("search", "n / N",
        "next / previous match (in the log: older / newer) while a search is set",
        &[(k('n'), A::SearchNext), (k('N'), A::SearchPrev)],
        &[at(Operators, 5, "n/N", "match"), at(Diff, 4, "n/N", "match"),
          at(Log, 3, "n/N", "match")])
        .only(Scope::Searching).in_panes(SEARCHED),
    bind("search", "Esc", "clear the search",
        &[(ESC, A::ClearSearch)], &[everywhere(49, "Esc", "clear search")]).only(Scope::Searching),

    bind("view", "P", "phase filter: all → prefill → decode",
        &[(k('P'), A::Phase)], &[at(Operators, 2, "P", "phase")]),
    bind("view", "d", "diff against the parent / the incumbent",
        &[(k('d'), A::DiffMode)], &[at(Diff, 1, "d", "vs parent/incumbent")]),
    bind("view", "f", "full source instead of the diff",
        &[(k('f'), A::FullSource)], &[at(Diff, 2, "f", "full source")]),
    bind("view", "?", "this help",
        &[(k('?'), A::Help)], &[everywhere(91, "?", "help")]),

    bind("decide", "y", "accept the selected revision (it becomes the incumbent)",
        &[(k('y'), A::Accept)], &[at(Revisions, 1, "y", "accept")]),
    bind("decide", "n",
        "reject the selected revision (while a search is set, n in the operators, the code and \
         the log is its next match)",
        &[(k('n'), A::Reject)], &[at(Revisions, 2, "n", "reject")]),
    bind("decide", "s", "steer: a message for this operator's agent",
        &[(k('s'), A::Steer)], &[everywhere(50, "s", "steer")]).only(Scope::Live),
    bind("decide", "a", "start/stop this operator's agent (several at once)",
        &[(k('a'), A::Agent)], &[]),
    bind("decide", "x", "agent dropout: mask about half of its history",
        &[(k('x'), A::Dropout)], &[]),

    bind("measure", "m", "re-measure the selected revision: quick check + time, all shapes",
        &[(k('m'), A::Measure)],
        &[at(Revisions, 4, "m", "measure"), at(Gauges, 1, "m", "measure")]),
    bind("measure", "M / U", "standing: re-measure the selected / every stale incumbent in full",
        &[(k('M'), A::RemeasureSelected), (k('U'), A::RemeasureStale)],
        &[at(Operators, 3, "M/U", "re-measure")]).only(Scope::Live),
    bind("measure", "p", "ncu profile: the selected shape, else the largest",
        &[(k('p'), A::Profile)],
        &[at(Revisions, 5, "p", "profile"), at(Gauges, 2, "p", "profile")]),
    bind("measure", "e",
        "edit in the built-in editor; Ctrl-S saves a human revision and measures it",
        &[(k('e'), A::Edit)], &[at(Revisions, 3, "e/E", "edit")]),
    bind("measure", "E", "edit in $EDITOR; every save is recorded and measured",
        &[(k('E'), A::ExternalEdit)], &[]),

    bind("replay", ", / .", "step back / forward one event",
        &[(k(','), A::StepBack), (k('.'), A::StepForward)], &[everywhere(50, ",/.", "step")])
        .only(Scope::Replay),
    bind("replay", "[ / ]", "back / forward 10 events",
        &[(k('['), A::Back10), (k(']'), A::Forward10)], &[]).only(Scope::Replay),
    bind("replay", "r / R", "jump to the next / previous revision",
        &[(k('r'), A::NextRevision), (k('R'), A::PrevRevision)],
        &[everywhere(52, "r/R", "next/prev rev")]).only(Scope::Replay),
    bind("replay", "0 / $", "start / end of the session (in the code pane 0 is column 0)",
        &[(k('0'), A::Start), (k('$'), A::End)], &[]).only(Scope::Replay),
    bind("replay", "space", "play / pause",
        &[(k(' '), A::PlayPause)], &[everywhere(51, "space", "play")]).only(Scope::Replay),
    bind("replay", "+ / -", "faster / slower",
        &[(k('+'), A::Faster), (k('='), A::Faster), (k('-'), A::Slower)], &[]).only(Scope::Replay),

    bind("editor", "Ctrl-S", "save (records a human revision, measures it)",
        &[(ctrl('s'), A::EditorSave)], &[]).only(Scope::Editor),
    bind("editor", "Ctrl-Z / Ctrl-Y", "undo / redo",
        &[(ctrl('z'), A::EditorUndo), (ctrl('y'), A::EditorRedo)], &[]).only(Scope::Editor),
    bind("editor", "Esc", "close (twice to discard unsaved changes)",
        &[(ESC, A::EditorClose)], &[]).only(Scope::Editor),

    bind("quit", "q / Ctrl-C", "quit (asks while a measurement runs)",
        &[(k('q'), A::Quit), (ctrl('c'), A::Quit)], &[everywhere(92, "q", "quit")]),
    bind("quit", "q", "in a replay opened from the session picker: back to the picker",
        &[(k('q'), A::BackToSessions)], &[everywhere(92, "q", "sessions")]).only(Scope::Picked),
    bind("quit", "Ctrl-Z", "suspend to the shell (fg resumes; measurements go on)",
        &[(ctrl('z'), A::Suspend)], &[]),
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
    use super::{
        A, Action, BINDINGS, Chord, Ctx, Diff, EDITOR_BAR, Everywhere, KeyCode, KeyEvent,
        KeyModifiers, Operators, Pane, PaneId, Revisions, SEARCHED, Scope, action, applies, code,
        ctrl, help_rows, k, rank, winner,
    };

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
