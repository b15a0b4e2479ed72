//! The panes as lazygit, tig and vim users drive them: the code scrolled sideways (`H` / `L` /
//! `0`, markers on cut lines), the log wrapped and scrolled (kept in place while lines arrive),
//! `/` search with `n` / `N` in the operators, the code and the log, `Enter` on the selection,
//! and the code keeping its 80 columns from 160 up.

use super::{fixture_state, last_event, render, screen, send, tuner_v3, typed};
use crate::session::model::LogLevel;
use crate::session::{Decision, Model, SessionEvent};
use crate::tui::event::{AppEvent, press, press_ctrl};
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use crate::tui::view::OpTable;
use crate::tui::view_state::{Modal, PaneId};
use crate::tui::{keymap, view};
use crossterm::event::KeyCode;
use crossterm::event::{KeyEvent, KeyModifiers};
use std::sync::Arc;

/// The fixture state on silu_and_mul (its baseline's lines reach 118 columns), drawn at `w`×`h`.
fn on_silu(w: u16, h: u16) -> AppState {
    let mut s = fixture_state(vec![]);
    send(&mut s, vec![AppEvent::Resize(w, h)]);
    send(&mut s, typed("/silu"));
    send(&mut s, vec![press(KeyCode::Enter)]);
    assert_eq!(s.selected_op().as_deref(), Some("silu_and_mul"));
    s.view.search = None;
    s
}

/// The rows of a pane's text area in a rendered screen: the characters between its borders.
fn pane_rows(s: &AppState, w: u16, h: u16, r: ratatui::layout::Rect) -> Vec<String> {
    let t = render(s, w, h);
    let buf = t.backend().buffer();
    (r.y + 1..r.bottom() - 1)
        .map(|y| {
            (r.x + 1..r.right() - 1)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect()
        })
        .collect()
}

fn log_rows(s: &AppState, w: u16, h: u16) -> Vec<String> {
    let r = view::areas(s, ratatui::layout::Rect::new(0, 0, w, h)).log;
    pane_rows(s, w, h, r)
}

fn code_rows(s: &AppState, w: u16, h: u16) -> Vec<String> {
    let r = view::areas(s, ratatui::layout::Rect::new(0, 0, w, h)).diff;
    pane_rows(s, w, h, r)
}

#[test]
fn the_code_scrolls_sideways_with_the_gutter_kept_and_cut_lines_marked() {
    for (w, h) in [(80u16, 24u16), (120, 40), (160, 45), (200, 50)] {
        let mut s = on_silu(w, h);
        s.view.focus = PaneId::Diff;
        let cols = view::code_cols(&s);
        let max = s.view.diff.max_cols;
        assert_eq!(max, 118, "the widest line of silu_and_mul's baseline");
        // L: half a pane to the right, never past the widest line's end
        send(&mut s, typed("L"));
        assert_eq!(s.view.diff_hscroll, (cols / 2).min(max - cols), "{w}x{h}");
        for _ in 0..20 {
            send(&mut s, typed("L"));
        }
        assert_eq!(
            s.view.diff_hscroll,
            max - cols,
            "{w}x{h}: stops at the widest line"
        );
        let rows = code_rows(&s, w, h);
        // the gutter stays: line 11's number, then `‹` (the line goes on to the left)
        let l11 = rows.iter().find(|r| r.starts_with("     11")).unwrap();
        assert!(l11.starts_with("     11  ‹"), "{w}x{h}: {l11}");
        // line 43 (118 columns) ends at the pane's right edge
        let l43 = rows.iter().find(|r| r.starts_with("     43"));
        if let Some(l) = l43 {
            assert!(l.trim_end().ends_with("[j + k]));"), "{w}x{h}: {l}");
        }
        // H back by half a pane, 0 to column 0
        let before = s.view.diff_hscroll;
        send(&mut s, typed("H"));
        assert_eq!(
            s.view.diff_hscroll,
            before.saturating_sub((cols / 2).max(4))
        );
        send(&mut s, typed("0"));
        assert_eq!(s.view.diff_hscroll, 0);
        // at column 0: `›` on the border of each cut line, not on the others
        let t = render(&s, w, h);
        let a = view::areas(&s, ratatui::layout::Rect::new(0, 0, w, h)).diff;
        let buf = t.backend().buffer();
        let rows = code_rows(&s, w, h);
        let src = s.selected_rev().unwrap().source.clone();
        for (i, row) in rows.iter().enumerate() {
            let edge = buf[(a.right() - 1, a.y + 1 + i as u16)].symbol();
            let n: usize = row[..7].trim().parse().unwrap_or(0);
            let long = src
                .lines()
                .nth(n.wrapping_sub(1))
                .is_some_and(|l| text_cols(l) > cols);
            assert_eq!(edge == "›", n > 0 && long, "{w}x{h} row {i}: {row}");
        }
    }
}

fn text_cols(s: &str) -> usize {
    crate::tui::text::cols(s)
}

/// H, L and 0 belong to the code pane: elsewhere H and L do nothing and 0 is a replay's start.
#[test]
fn sideways_keys_only_in_the_code_pane() {
    let mut s = on_silu(80, 24);
    s.view.focus = PaneId::Operators;
    send(&mut s, typed("LL"));
    assert_eq!((s.view.diff_hscroll, s.view.focus), (0, PaneId::Operators));
    s.view.focus = PaneId::Diff;
    send(&mut s, typed("L"));
    assert!(s.view.diff_hscroll > 0);
    // another revision's code starts at column 0
    s.view.focus = PaneId::Operators;
    send(&mut s, typed("k"));
    assert_eq!(s.view.diff_hscroll, 0);
    // the key bar of the code pane says so
    s.view.focus = PaneId::Diff;
    assert!(keymap::key_bar(&s).contains(&("H/L/0", "sideways")));
}

#[test]
fn a_resize_keeps_the_sideways_scroll_within_the_widest_line() {
    let mut s = on_silu(80, 24);
    s.view.focus = PaneId::Diff;
    for _ in 0..20 {
        send(&mut s, typed("L"));
    }
    assert!(s.view.diff_hscroll > 40);
    send(&mut s, vec![AppEvent::Resize(200, 50)]);
    assert_eq!(
        s.view.diff_hscroll,
        s.view.diff.max_cols - view::code_cols(&s)
    );
}

const LONG: &str = "worker 0 died (signal 11) on rms_norm v7 shape 13: its last words were \
`CUDA error: an illegal memory access was encountered`; see sessions/2026-01-01-run.worker.log";

#[test]
fn the_log_wraps_long_lines_with_an_indent() {
    for (w, h) in [(80u16, 24u16), (120, 40), (160, 45), (200, 50)] {
        let mut s = fixture_state(vec![]);
        send(
            &mut s,
            vec![
                AppEvent::Resize(w, h),
                AppEvent::Log(LogLevel::Error, LONG.into()),
            ],
        );
        let rows = log_rows(&s, w, h);
        let width = (w - 2) as usize;
        // the line's rows, continuations indented, are the bottom rows (as many as fit)
        let want: Vec<String> = crate::tui::text::wrap(LONG, width, 2)
            .into_iter()
            .enumerate()
            .map(|(i, r)| format!("{}{}", if i > 0 { "  " } else { "" }, &LONG[r]))
            .collect();
        assert!(want.len() >= 2 || w == 200, "{w}: {want:?}");
        let shown: Vec<&str> = rows.iter().map(|r| r.trim_end()).collect();
        let k = want.len().min(rows.len());
        assert_eq!(shown[shown.len() - k..], want[want.len() - k..], "{w}x{h}");
        if want.len() <= rows.len() {
            let joined: Vec<&str> = want.iter().map(|r| r.trim()).collect();
            assert_eq!(joined.join(" "), LONG);
        }
    }
}

#[test]
fn the_log_scrolls_by_rows_and_stays_put_while_lines_arrive() {
    let (w, h) = (120, 40);
    let mut s = fixture_state(vec![]);
    send(&mut s, vec![AppEvent::Resize(w, h)]);
    for i in 0..30 {
        let text = if i % 3 == 0 {
            format!("line {i}: {LONG}")
        } else {
            format!("line {i}")
        };
        send(&mut s, vec![AppEvent::Log(LogLevel::Info, text)]);
    }
    s.view.focus = PaneId::Log;
    // follows the end: the newest at the bottom
    let rows = log_rows(&s, w, h);
    assert!(rows.last().unwrap().starts_with("line 29"), "{rows:?}");
    // k: one row up
    send(&mut s, typed("k"));
    assert_eq!(s.view.log_scroll, 1);
    let rows = log_rows(&s, w, h);
    assert!(rows.last().unwrap().starts_with("line 28"), "{rows:?}");
    // two rows up: into the wrapped line 27, its continuation
    send(&mut s, typed("k"));
    let rows = log_rows(&s, w, h);
    assert!(rows.last().unwrap().starts_with("  "), "{rows:?}");
    // lines arrive while scrolled up: the view stays on the same rows
    send(&mut s, vec![AppEvent::Log(LogLevel::Info, LONG.into())]);
    send(&mut s, vec![AppEvent::Log(LogLevel::Info, "short".into())]);
    assert_eq!(log_rows(&s, w, h), rows);
    assert!(screen(&s, w, h).contains("log · 5 rows up (G follows)"));
    // g: the top (the oldest line), never past it
    send(&mut s, typed("g"));
    let (lw, lh) = view::log_size(&s);
    let max = crate::tui::logview::max_scroll(&s, lw, lh);
    assert_eq!(s.view.log_scroll, max);
    let oldest = crate::tui::logview::newest_first(&s)
        .last()
        .unwrap()
        .1
        .text
        .clone();
    assert!(
        oldest.starts_with(log_rows(&s, w, h)[0].trim_end()),
        "{oldest}"
    );
    send(&mut s, typed("k"));
    assert_eq!(s.view.log_scroll, max);
    // Ctrl-D: ten rows down; G: follow again, and new lines show at the bottom
    send(&mut s, vec![press_ctrl('d')]);
    assert_eq!(s.view.log_scroll, max - 10);
    send(&mut s, typed("G"));
    assert_eq!(s.view.log_scroll, 0);
    send(&mut s, vec![AppEvent::Log(LogLevel::Info, "newest".into())]);
    assert_eq!(log_rows(&s, w, h).last().unwrap().trim(), "newest");
}

fn esc() -> AppEvent {
    AppEvent::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE))
}

#[test]
fn search_the_operators_as_you_type_enter_keeps_esc_goes_back() {
    let mut s = fixture_state(vec![]);
    let (op, rev) = (s.view.op_sel, s.view.rev_sel);
    send(&mut s, typed("/"));
    assert!(matches!(s.view.modal, Modal::Search(_)));
    // each key searches again from where the view was
    send(&mut s, typed("s"));
    // `s` matches rms_norm itself (selected): it stays
    assert_eq!(s.selected_op().as_deref(), Some("rms_norm"));
    send(&mut s, typed("il"));
    assert_eq!(s.selected_op().as_deref(), Some("silu_and_mul"));
    let bottom = screen(&s, 80, 24);
    assert!(bottom.contains(" /sil "), "{bottom}");
    assert!(bottom.contains("Enter keep  Esc cancel"), "{bottom}");
    assert!(bottom.contains("/sil 1/1"), "the pane's title: {bottom}");
    // Backspace edits; Esc: back where it was, no search
    send(&mut s, vec![press(KeyCode::Backspace)]);
    assert_eq!(s.view.search.as_ref().unwrap().query, "si");
    send(&mut s, vec![esc()]);
    assert!(matches!(s.view.modal, Modal::None));
    assert_eq!(
        (s.view.op_sel, s.view.rev_sel, s.view.search.clone()),
        (op, rev, None)
    );
    // Enter keeps it; n and N go round the matches; smart case
    send(&mut s, typed("/a"));
    send(&mut s, vec![press(KeyCode::Enter)]);
    assert!(matches!(s.view.modal, Modal::None));
    let order = |s: &mut AppState, key: &str| {
        send(s, typed(key));
        s.selected_op().unwrap()
    };
    // "a" matches paged_attention_decode and silu_and_mul (rms_norm has none)
    assert_eq!(s.selected_op().as_deref(), Some("silu_and_mul"));
    assert_eq!(order(&mut s, "n"), "paged_attention_decode");
    assert_eq!(order(&mut s, "n"), "silu_and_mul");
    assert_eq!(order(&mut s, "N"), "paged_attention_decode");
    // Esc in the view clears the search; n rejects again (nothing to reject here: a line)
    send(&mut s, vec![esc()]);
    assert!(s.view.search.is_none());
    send(&mut s, typed("/RMS"));
    send(&mut s, vec![press(KeyCode::Enter)]);
    assert!(
        s.work
            .ui_log
            .last()
            .unwrap()
            .text
            .contains("no match for `RMS`")
    );
    send(&mut s, vec![esc()]);
    // a Backspace on an empty prompt closes it
    send(&mut s, typed("/"));
    send(&mut s, vec![press(KeyCode::Backspace)]);
    assert!(matches!(s.view.modal, Modal::None));
}

#[test]
fn n_rejects_where_no_search_is_set_or_in_the_revisions_pane() {
    let mut s = fixture_state(tuner_v3());
    s.view.rev_sel = 3;
    send(&mut s, typed("/x"));
    send(&mut s, vec![press(KeyCode::Enter)]);
    // in the operators with a search set, n searches
    let n = s.work.journal.len();
    send(&mut s, typed("n"));
    assert_eq!(s.work.journal.len(), n);
    // in the revisions pane it rejects
    s.view.focus = PaneId::Revisions;
    s.select_op_name("rms_norm");
    s.view.rev_sel = 3;
    send(&mut s, typed("n"));
    assert!(matches!(
        last_event(&s),
        SessionEvent::Decision {
            decision: Decision::Rejected,
            rev: 3,
            ..
        }
    ));
}

#[test]
fn search_the_code_n_moves_down_and_brings_the_match_into_view() {
    let mut s = on_silu(80, 24);
    s.view.focus = PaneId::Diff;
    // smart case: a capital matches only itself
    send(&mut s, typed("/Bfloat16"));
    assert!(s.view.search.as_ref().unwrap().code_hit.is_none());
    send(&mut s, vec![esc()]);
    send(&mut s, typed("/bfloat16"));
    send(&mut s, vec![press(KeyCode::Enter)]);
    let all = crate::tui::search::code_matches(&s.view.diff, "bfloat16");
    assert!(all.len() > 10, "{all:?}");
    assert_eq!(
        s.view.search.as_ref().unwrap().code_hit.as_ref(),
        Some(&all[0])
    );
    // the first is in line 16 (line 13's `cuda_bf16.h` is no match)
    assert_eq!(all[0].0, 15);
    // n: each next one, scrolled into view, sideways too where it lies past the columns shown
    let mut sideways = 0;
    for (i, m) in all
        .iter()
        .enumerate()
        .skip(1)
        .chain(all.iter().enumerate().take(1))
    {
        send(&mut s, typed("n"));
        assert_eq!(
            s.view.search.as_ref().unwrap().code_hit.as_ref(),
            Some(m),
            "{i}"
        );
        let rows = view::diff_rows(&s);
        assert!(
            m.0 >= s.view.diff_scroll && m.0 < s.view.diff_scroll + rows,
            "{i}"
        );
        let code = s.view.diff.code(m.0);
        let (a, b) = (text_cols(&code[..m.1.start]), text_cols(&code[..m.1.end]));
        let cols = view::code_cols(&s);
        assert!(
            a >= s.view.diff_hscroll && b <= s.view.diff_hscroll + cols,
            "{i}: {a}..{b}"
        );
        sideways = sideways.max(s.view.diff_hscroll);
        // the current match is drawn in the accent colour, on screen
        let t = render(&s, 80, 24);
        let hit = t
            .backend()
            .buffer()
            .content()
            .iter()
            .filter(|c| c.bg == s.view.theme.accent)
            .count();
        assert_eq!(hit, "bfloat16".len(), "{i}");
    }
    assert!(sideways > 0, "some matches lie past 32 columns");
    // N goes back; the title counts
    send(&mut s, typed("N"));
    let n = all.len();
    assert_eq!(
        s.view.search.as_ref().unwrap().code_hit.as_ref(),
        Some(&all[n - 1])
    );
    let sc = screen(&s, 80, 24);
    assert!(sc.contains(&format!("/bfloat16 {n}/{n}")), "{sc}");
}

#[test]
fn search_the_log_from_the_newest_n_goes_older() {
    let mut s = fixture_state(vec![]);
    send(&mut s, vec![AppEvent::Resize(80, 24)]);
    for i in 0..40 {
        send(
            &mut s,
            vec![AppEvent::Log(LogLevel::Info, format!("entry {i:02}"))],
        );
    }
    s.view.focus = PaneId::Log;
    send(&mut s, typed("/measuring"));
    send(&mut s, vec![press(KeyCode::Enter)]);
    // the newest "measuring" of the session log, scrolled into view
    let rows = log_rows(&s, 80, 24);
    assert!(
        rows.iter()
            .any(|r| r.starts_with("silu_and_mul v0: measuring")),
        "{rows:?}"
    );
    assert!(s.view.log_scroll > 0);
    send(&mut s, typed("n"));
    let rows = log_rows(&s, 80, 24);
    assert!(
        rows.iter().any(|r| r.starts_with("rms_norm v2: measuring")),
        "{rows:?}"
    );
    let sc = screen(&s, 80, 24);
    assert!(sc.contains("/measuring 2/"), "{sc}");
    // N: newer again
    send(&mut s, typed("N"));
    assert!(screen(&s, 80, 24).contains("/measuring 1/"));
}

#[test]
fn enter_opens_the_selection_in_the_next_pane() {
    let mut s = fixture_state(vec![]);
    send(&mut s, vec![press(KeyCode::Enter)]);
    assert_eq!(s.view.focus, PaneId::Revisions);
    send(&mut s, vec![press(KeyCode::Enter)]);
    assert_eq!(s.view.focus, PaneId::Diff);
    // nothing more to open from the code
    send(&mut s, vec![press(KeyCode::Enter)]);
    assert_eq!(s.view.focus, PaneId::Diff);
}

/// The code's text area is 80 columns from 160 up, with the shipped unified_attention
/// incumbent (1,152 lines: a four-digit gutter) on the real suite, and with names too long for
/// the operators column (they are cut, not the code).
#[test]
fn the_code_keeps_80_columns_from_160_up() {
    let suite = crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).unwrap();
    let mut long = suite.clone();
    let i = long
        .problems
        .iter()
        .position(|p| p.name == "rms_norm")
        .unwrap();
    long.problems[i].name = "an_operator_with_a_name_far_too_long_to_show_whole".into();
    let src = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("knowledge/templates/unified_attention_wgmma.cu"),
    )
    .unwrap();
    assert!(src.lines().count() >= 1000);
    let lines: Vec<&str> = src.lines().collect();
    for suite in [suite, long] {
        let suite = Arc::new(suite);
        let mut model = Model::new(&suite);
        model.start_from("unified_attention", &src, "the standing's incumbent");
        let mut s = AppState::new(
            suite.clone(),
            model,
            Theme::builtin("dark", true).unwrap(),
            suite.hardware("H200").ok().cloned(),
            std::env::temp_dir(),
        );
        s.select_op_name("unified_attention");
        s.select_latest_rev();
        s.view.full_source = true;
        s.refresh();
        assert_eq!(s.view.diff.gutter, 12);
        // a long line in view
        let long_line = lines.iter().position(|l| l.len() > 120).unwrap();
        s.view.diff_scroll = long_line;
        for (w, h) in [(160u16, 45u16), (200, 50), (240, 60)] {
            // the line's first columns on screen, after the gutter: count them
            let row = code_rows(&s, w, h)[0].clone();
            let number: usize = row
                .chars()
                .take(10)
                .collect::<String>()
                .trim()
                .parse()
                .unwrap();
            assert_eq!(number, long_line + 1);
            let code: String = row.chars().skip(12).collect();
            let n = code.chars().count();
            assert!(n >= 80, "{w}: {n} columns of code");
            assert_eq!(
                code,
                lines[long_line].chars().take(n).collect::<String>(),
                "{w}"
            );
            s.view.screen = (w, h);
            assert_eq!(
                view::code_cols(&s),
                n,
                "{w}: update counts as the view draws"
            );
        }
        // 160 is where the rule starts: 80 exactly or more
        assert!(view::code_cols(&s) >= 80);
    }
}

/// With the suite's longest name whole and 80 columns of code beside it, the operators table
/// says each status in words at 160×45 (with the 8-wide history) and at 200×50 (beside the
/// shapes pane, with a 4-wide one); the revisions spell their decisions out. Under 160 the
/// table is compact.
#[test]
fn the_status_words_fit_at_160_and_200() {
    let suite = Arc::new(crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).unwrap());
    let longest = suite
        .problems
        .iter()
        .map(|p| p.name.clone())
        .max_by_key(|n| n.chars().count())
        .unwrap();
    let mut s = AppState::new(
        suite.clone(),
        Model::new(&suite),
        Theme::builtin("dark", true).unwrap(),
        suite.hardware("H200").ok().cloned(),
        std::env::temp_dir(),
    );
    for (w, h, table) in [
        (120, 40, OpTable::Compact),
        (160, 45, OpTable::Full),
        (200, 50, OpTable::Words),
        (240, 60, OpTable::Full),
    ] {
        assert_eq!(view::left_width(&s, w).1, table, "{w}");
        s.select_op_name(&longest);
        s.refresh();
        let sc = screen(&s, w, h);
        // its row in the operators table (its weight follows the name)
        let row = sc
            .lines()
            .find(|l| l.contains(&longest) && l.contains('%'))
            .unwrap_or_else(|| panic!("{w}: {longest} not whole\n{sc}"));
        assert_eq!(
            row.contains("· untouched"),
            table != OpTable::Compact,
            "{w}: {row}"
        );
        s.view.screen = (w, h);
        if w >= 160 {
            assert!(view::code_cols(&s) >= 80, "{w}");
        }
    }
}

const SIZES: [(u16, u16); 4] = [(80, 24), (120, 40), (160, 45), (200, 50)];

/// The code pane scrolled sideways onto a search match (`‹` where lines go on to the left, `›`
/// on the border where they go on to the right, the column in the title), with a long log line
/// wrapped below.
#[test]
fn snapshot_code_sideways_on_a_match() {
    for (w, h) in SIZES {
        let mut s = on_silu(w, h);
        send(&mut s, vec![AppEvent::Log(LogLevel::Error, LONG.into())]);
        s.view.focus = PaneId::Diff;
        send(&mut s, typed("/rounded"));
        send(&mut s, vec![press(KeyCode::Enter)]);
        send(&mut s, typed("nnL"));
        let sc = screen(&s, w, h);
        assert!(sc.contains("/rounded "), "{sc}");
        assert!(sc.contains("col "), "{sc}");
        assert!(sc.contains('‹'), "{sc}");
        assert!(sc.contains("run.worker.log"), "{sc}");
        insta::assert_snapshot!(format!("code_sideways_{w}x{h}"), sc);
    }
}

/// The search prompt in the bottom line while a query is typed in the log, which scrolls to
/// the newest match.
#[test]
fn snapshot_search_prompt_in_the_log() {
    for (w, h) in SIZES {
        let mut s = fixture_state(vec![]);
        send(&mut s, vec![AppEvent::Resize(w, h)]);
        for i in 0..12 {
            send(
                &mut s,
                vec![AppEvent::Log(LogLevel::Info, format!("entry {i:02}"))],
            );
        }
        s.view.focus = PaneId::Log;
        send(&mut s, typed("/compile"));
        let sc = screen(&s, w, h);
        assert!(sc.contains(" /compile "), "{sc}");
        assert!(sc.contains("Enter keep  Esc cancel"), "{sc}");
        assert!(sc.contains("rows up (G follows) · /compile 1/"), "{sc}");
        insta::assert_snapshot!(format!("search_prompt_{w}x{h}"), sc);
    }
}
