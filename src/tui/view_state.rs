//! The view state: how the workbench is looked at. The focused pane, the selections and
//! scrolls, the phase filter, the search, the dialog open, the terminal's size as last drawn,
//! the theme and the caches drawing uses (the highlighter, highlighted sources, the diff view).
//! Nothing here is recorded in the session; `state::AppState` holds it beside the workbench.
//!
//! Invariants:
//! - `op_sel` indexes the operators the phase filter shows and `rev_sel` the selected
//!   operator's revisions; `AppState::refresh` brings both back into range after every update.
//! - `diff` is the diff view of the selected revision as `diff_key` describes it (operator,
//!   revision, base, mode, diagnostics, highlighter, theme); it is rebuilt only when that key
//!   changes (`diff_builds` counts the builds), and a rebuild scrolls to its first diagnostic,
//!   back to column 0.
//! - `screen` is the size last drawn: `update` lays the panes out with it as `draw` does
//!   (`view::layout`), so scroll limits and the log's wrapped rows agree with the screen.
//! - Drawing reads this state and the workbench and changes neither.

use crate::suite::PhaseFilter;
use crate::tui::highlight::{DiffView, HighlightCache, Highlighter};
use crate::tui::search::{Search, SearchPrompt};
use crate::tui::theme::Theme;
use ratatui_textarea::TextArea;
use std::sync::Arc;

/// The main view's panes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaneId {
    Operators,
    Revisions,
    Diff,
    Gauges,
    Log,
}

/// The panes in Tab's order.
pub const PANES: [PaneId; 5] = [
    PaneId::Operators,
    PaneId::Revisions,
    PaneId::Diff,
    PaneId::Gauges,
    PaneId::Log,
];

impl PaneId {
    pub fn title(self) -> &'static str {
        match self {
            PaneId::Operators => "operators",
            PaneId::Revisions => "revisions",
            PaneId::Diff => "diff",
            PaneId::Gauges => "shapes",
            PaneId::Log => "log",
        }
    }
}

/// What the code pane compares the selected revision with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffMode {
    Parent,
    Incumbent,
}

/// The built-in editor.
pub struct EditorState {
    pub op: String,
    /// The revision the text came from (the parent of the next save).
    pub base: Option<u32>,
    pub base_source: String,
    pub textarea: TextArea<'static>,
    /// The last revision saved from this editor (its diagnostics are shown).
    pub saved: Option<u32>,
    pub confirm_discard: bool,
}

impl EditorState {
    pub fn text(&self) -> String {
        let mut s = self.textarea.lines().join("\n");
        s.push('\n');
        s
    }
}

/// The dialog over the main view (one at a time).
pub enum Modal {
    None,
    Help {
        scroll: u16,
    },
    ConfirmQuit,
    Steer(TextArea<'static>),
    Editor(Box<EditorState>),
    /// No GPU: the recorded sessions, to open one in replay.
    Sessions {
        sel: usize,
    },
    /// The search prompt in the bottom line (`/`).
    Search(Box<SearchPrompt>),
}

/// The inputs of the diff view (see `AppState::refresh`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DiffKey {
    pub(super) op: Option<String>,
    pub(super) rev: Option<u32>,
    pub(super) base: Option<u32>,
    pub(super) diags: Vec<crate::contract::protocol::Diagnostic>,
    pub(super) full_source: bool,
    pub(super) mode: DiffMode,
    pub(super) highlighter: bool,
    pub(super) theme: String,
}

/// How the workbench is looked at (see the module's invariants).
pub struct ViewState {
    pub theme: Theme,
    pub focus: PaneId,
    pub phase: PhaseFilter,
    pub op_sel: usize,
    pub rev_sel: usize,
    pub diff_mode: DiffMode,
    pub full_source: bool,
    pub diff_scroll: usize,
    /// Columns of code scrolled past on the left in the code pane (the gutter stays).
    pub diff_hscroll: usize,
    pub gauge_scroll: usize,
    /// The shape selected in the shapes pane (an index into the operator's shapes); `p`
    /// profiles it (else the largest shape).
    pub shape_sel: Option<usize>,
    /// Rows (wrapped) from the bottom of the log (0: follow the end).
    pub log_scroll: usize,
    /// The search set with `/` (None: none).
    pub search: Option<Search>,
    /// The terminal's size (columns, rows) as last drawn: update lays the panes out as the view
    /// does (sideways scroll limits, the log's wrapped rows, bringing a match into view).
    pub screen: (u16, u16),
    pub modal: Modal,
    pub highlighter: Option<Arc<Highlighter>>,
    pub hl_cache: HighlightCache,
    pub diff: DiffView,
    pub(super) diff_key: Option<DiffKey>,
    /// How many times the diff view was built (it must not be rebuilt per streamed chunk).
    pub diff_builds: u64,
}

impl ViewState {
    /// The first view: the operators focused, every phase, the first operator, no diff built
    /// yet, an 80×24 screen until the first draw says otherwise.
    pub fn new(theme: Theme) -> ViewState {
        ViewState {
            theme,
            focus: PaneId::Operators,
            phase: PhaseFilter::All,
            op_sel: 0,
            rev_sel: 0,
            diff_mode: DiffMode::Parent,
            full_source: false,
            diff_scroll: 0,
            diff_hscroll: 0,
            gauge_scroll: 0,
            shape_sel: None,
            log_scroll: 0,
            search: None,
            screen: (80, 24),
            modal: Modal::None,
            highlighter: None,
            hl_cache: HighlightCache::default(),
            diff: DiffView::default(),
            diff_key: None,
            diff_builds: 0,
        }
    }
}
