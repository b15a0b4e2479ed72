//! The application state: the workbench (`workbench`: what the session is about) and the view
//! state (`view_state`: how it is looked at), and what needs both — the selection resolved
//! against the suite and the model, the diff view kept in step with it, replay opened and left.
//! `update` changes both halves; `view::draw` reads both and changes neither.
//!
//! Invariants (beside each half's own):
//! - After `refresh` (which `update` calls after every event) the selections are in range and
//!   the diff view shows the selected revision.
//! - Opening a replay replaces the workbench's model with the timeline's, positioned after its
//!   last event, and selects the operator the session is about; `Behind` keeps what a replay
//!   opened from the session picker replaced (both halves' parts), for `q` to go back.

use crate::session::model::{LogLevel, Revision};
use crate::session::{Author, Model, SessionEvent, Timeline};
use crate::suite::PhaseFilter;
use crate::suite::hardware::HardwareProfile;
use crate::tui::event::Effect;
use crate::tui::highlight::build_diff;
use crate::tui::theme::Theme;
use crate::tui::view_state::{DiffKey, DiffMode, PaneId, ViewState};
use crate::tui::workbench::{Replay, Workbench};
use std::path::PathBuf;
use std::sync::Arc;

/// The app: what the session is about, and how it is looked at.
pub struct AppState {
    pub work: Workbench,
    pub view: ViewState,
}

/// The live view a replay opened from the session picker replaced, to go back to: the
/// workbench's part (the live session's model and profile) and the view's (focus, phase,
/// selections).
pub struct Behind {
    pub model: Model,
    pub hw: Option<HardwareProfile>,
    pub focus: PaneId,
    pub phase: PhaseFilter,
    pub op_sel: usize,
    pub rev_sel: usize,
    pub shape_sel: Option<usize>,
    /// The session chosen in the picker (selected again there).
    pub picked: usize,
}

impl AppState {
    /// The app on a session's model: the workbench as `Workbench::new` makes it, the first view
    /// on the first operator's latest revision.
    pub fn new(
        suite: Arc<crate::suite::Suite>,
        model: Model,
        theme: Theme,
        hw: Option<HardwareProfile>,
        kernels_dir: PathBuf,
    ) -> AppState {
        let mut s = AppState {
            work: Workbench::new(suite, model, hw, kernels_dir),
            view: ViewState::new(theme),
        };
        s.select_latest_rev();
        s.refresh();
        s
    }

    /// Opens a recorded session read-only, after its last event: `atrex-tui replay FILE` and the
    /// picker alike. The figures follow the header's one rule — the session's own measurements,
    /// else the standing the app read at start — whichever way the session was opened. `back`:
    /// the live view a replay opened from the session picker replaced (`q` goes back to it).
    pub fn open_replay(
        &mut self,
        name: String,
        records: impl Into<Timeline>,
        loaded: crate::session::Loaded,
        back: Option<Box<Behind>>,
    ) {
        let records = records.into();
        let n = records.len();
        let leave = if back.is_some() {
            ", q back to the sessions"
        } else {
            ""
        };
        self.view.focus = PaneId::Operators;
        self.start_replay(name.clone(), records, loaded.warnings);
        if let Some(r) = &mut self.work.replay {
            r.back = back;
        }
        self.work.log(
            LogLevel::Info,
            format!(
                "replaying {name} ({n} events, read-only): , / . step, space plays, r/R jump to revisions{leave}"
            ),
        );
    }

    /// Opens a replay positioned after its last event.
    pub fn start_replay(
        &mut self,
        file: String,
        records: impl Into<Timeline>,
        warnings: Vec<String>,
    ) {
        let records = records.into();
        for w in &warnings {
            self.work.log(LogLevel::Warn, w.clone());
        }
        let pos = records.len();
        let ended = records
            .records()
            .filter_map(|r| match r.event {
                SessionEvent::MeasureDone { mid, .. } => Some(mid),
                _ => None,
            })
            .collect();
        self.work.model = records.model_at(&self.work.suite, pos);
        self.work.model.interrupt_unended(&ended);
        self.work.replay = Some(Replay {
            file,
            records,
            pos,
            playing: false,
            speed: 2,
            warnings,
            asked: None,
            ended,
            back: None,
        });
        self.work.hw_from_run();
        self.select_session_op();
        self.refresh();
    }

    /// What the revision on screen still lacks to be shown whole: a large replay keeps its shape
    /// results as briefs (`session::timeline`), read from the file when shown. Asks once for
    /// each set of briefs.
    pub fn results_wanted(&mut self) -> Option<Effect> {
        let file = self.work.replay.as_ref()?.records.file.clone()?;
        let op = self.selected_op()?;
        let (rev, mid, briefs) = {
            let r = self.selected_rev()?;
            (r.rev, r.measurement.mid, r.measurement.results.briefs())
        };
        if briefs.is_empty() {
            return None;
        }
        let key = (
            op.clone(),
            rev,
            mid,
            briefs.iter().map(|b| b.place).collect::<Vec<_>>(),
        );
        let r = self.work.replay.as_mut()?;
        if r.asked.as_ref() == Some(&key) {
            return None;
        }
        r.asked = Some(key);
        Some(Effect::ReadResults {
            file,
            op,
            rev,
            mid,
            briefs,
        })
    }

    /// Selects the operator the session is about (the one of its latest revision) and that
    /// operator's latest revision.
    pub fn select_session_op(&mut self) {
        if let Some(op) = self.work.model.latest_op.clone() {
            self.select_op_name(&op);
        }
        self.select_latest_rev();
    }

    /// The operators the phase filter shows, heaviest first (the operators pane's rows).
    pub fn visible_ops(&self) -> Vec<String> {
        self.work
            .suite
            .by_weight(self.view.phase)
            .into_iter()
            .map(|p| p.name.clone())
            .collect()
    }

    /// The selected operator.
    pub fn selected_op(&self) -> Option<String> {
        self.visible_ops().get(self.view.op_sel).cloned()
    }

    /// The selected revision of the selected operator.
    pub fn selected_rev(&self) -> Option<&Revision> {
        let op = self.selected_op()?;
        self.work
            .model
            .ops
            .get(&op)?
            .revisions
            .get(self.view.rev_sel)
    }

    /// The shape selected in the shapes pane, if any.
    pub fn selected_shape(&self) -> Option<u32> {
        let op = self.selected_op()?;
        let i = self.view.shape_sel?;
        self.work.shape_info.get(&op)?.get(i).map(|s| s.id)
    }

    /// Selects the selected operator's latest revision.
    pub(crate) fn select_latest_rev(&mut self) {
        let n = self
            .selected_op()
            .and_then(|o| self.work.model.ops.get(&o).map(|o| o.revisions.len()))
            .unwrap_or(0);
        self.view.rev_sel = n.saturating_sub(1);
    }

    /// Selects revision `rev` of the selected operator, if it has one.
    pub fn select_rev_number(&mut self, rev: u32) {
        if let Some(o) = self.selected_op().and_then(|o| self.work.model.ops.get(&o))
            && let Some(i) = o.revisions.iter().position(|r| r.rev == rev)
        {
            self.view.rev_sel = i;
        }
    }

    /// Selects operator `op`, if the phase filter shows it.
    pub(crate) fn select_op_name(&mut self, op: &str) {
        if let Some(i) = self.visible_ops().iter().position(|o| o == op) {
            self.view.op_sel = i;
        }
    }

    /// The revision the diff compares against.
    pub fn diff_base(&self) -> Option<&Revision> {
        let op = self.selected_op()?;
        let o = self.work.model.ops.get(&op)?;
        let r = o.revisions.get(self.view.rev_sel)?;
        match self.view.diff_mode {
            DiffMode::Parent => r.parent.and_then(|p| o.rev(p)),
            DiffMode::Incumbent => o.incumbent.filter(|i| *i != r.rev).and_then(|i| o.rev(i)),
        }
    }

    /// Keeps selections in range and rebuilds the diff view when its inputs changed. A
    /// revision's source never changes, so the view is keyed by which revisions it shows (and
    /// their diagnostics, the highlighter and the theme): events that change none of these
    /// (streamed agent text, progress, log lines) cost a few comparisons, no hashing of sources.
    pub fn refresh(&mut self) {
        let n_ops = self.visible_ops().len();
        self.view.op_sel = self.view.op_sel.min(n_ops.saturating_sub(1));
        let n_revs = self
            .selected_op()
            .and_then(|o| self.work.model.ops.get(&o).map(|o| o.revisions.len()))
            .unwrap_or(0);
        self.view.rev_sel = self.view.rev_sel.min(n_revs.saturating_sub(1));
        let key = self.diff_inputs();
        if self.view.diff_key.as_ref() == Some(&key) {
            return;
        }
        self.view.diff_key = Some(key);
        self.rebuild_diff();
    }

    /// What the diff view shows: operator, revision, base, mode, diagnostics, highlighter, theme.
    fn diff_inputs(&self) -> DiffKey {
        let op = self.selected_op();
        let r = self.selected_rev();
        DiffKey {
            rev: r.map(|r| r.rev),
            base: if self.view.full_source {
                None
            } else {
                self.diff_base().map(|b| b.rev)
            },
            diags: r
                .map(|r| r.measurement.diagnostics.clone())
                .unwrap_or_default(),
            op,
            full_source: self.view.full_source,
            mode: self.view.diff_mode,
            highlighter: self.view.highlighter.is_some(),
            theme: self.view.theme.name.clone(),
        }
    }

    /// Builds the diff view of the selected revision, scrolled to its first diagnostic.
    fn rebuild_diff(&mut self) {
        self.view.diff_builds += 1;
        let (title, old, new, diags) = match (self.selected_op(), self.selected_rev()) {
            (Some(op), Some(r)) => {
                let base = self.diff_base();
                let title = match (base, self.view.full_source) {
                    (_, true) | (None, _) => format!("{op} v{} · full source", r.rev),
                    (Some(b), false) => format!(
                        "{op} v{} vs v{} ({})",
                        r.rev,
                        b.rev,
                        match self.view.diff_mode {
                            DiffMode::Parent => "parent",
                            DiffMode::Incumbent => "incumbent",
                        }
                    ),
                };
                let old = if self.view.full_source {
                    None
                } else {
                    base.map(|b| b.source.clone())
                };
                (
                    title,
                    old,
                    r.source.clone(),
                    r.measurement.diagnostics.clone(),
                )
            }
            (Some(op), None) => (
                format!("{op}: no kernel yet (e writes one)"),
                None,
                String::new(),
                vec![],
            ),
            _ => ("no operator".into(), None, String::new(), vec![]),
        };
        let hl = self.view.highlighter.clone();
        let new_hl = self.view.hl_cache.get(hl.as_deref(), &new);
        let old_hl = old
            .as_ref()
            .map(|o| self.view.hl_cache.get(hl.as_deref(), o));
        self.view.diff = build_diff(
            title,
            old.as_deref(),
            &new,
            old_hl.as_ref(),
            &new_hl,
            self.view.full_source,
            &diags,
            &self.view.theme,
        );
        self.view.diff_scroll = self
            .view
            .diff
            .first_diag
            .map(|d| d.saturating_sub(2))
            .unwrap_or(0);
        self.view.diff_hscroll = 0;
        if let Some(q) = &mut self.view.search {
            q.code_hit = None;
        }
    }

    /// Records a human revision and measures it at once.
    pub(crate) fn save_human(
        &mut self,
        op: &str,
        parent: Option<u32>,
        source: String,
        via: &str,
    ) -> (u32, Vec<Effect>) {
        let rev = self.work.recorder.ids().next_rev(op);
        self.work.record(SessionEvent::Revision {
            op: op.into(),
            rev,
            parent,
            author: Author::Human,
            rationale: match via {
                "editor" => "hand edit (built-in editor)".into(),
                _ => "hand edit ($EDITOR)".into(),
            },
            source,
            via: Some(via.into()),
            request_id: None,
            tokens_in: None,
            tokens_out: None,
            category: None,
            knowledge: vec![],
        });
        if self.selected_op().as_deref() == Some(op) {
            self.select_rev_number(rev);
        }
        let fx = self.work.measure(op, rev);
        (rev, fx)
    }
}
