//! Syntax highlighting (syntect + two-face, CUDA as C++) and the diff view (similar).

use super::theme::Theme;
use crate::contract::protocol::Diagnostic;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use similar::{ChangeTag, TextDiff};
use std::collections::HashMap;
use std::sync::Arc;
use syntect::easy::HighlightLines;
use syntect::highlighting::{FontStyle, Theme as SynTheme};
use syntect::parsing::SyntaxSet;

/// Highlighted lines: per line, styled segments.
pub type Highlighted = Arc<Vec<Vec<(Style, String)>>>;

impl std::fmt::Debug for Highlighter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Highlighter({})", self.theme_name)
    }
}

pub struct Highlighter {
    syntaxes: SyntaxSet,
    theme: SynTheme,
    pub theme_name: String,
    truecolor: bool,
}

/// The syntax themes two-face offers.
pub fn syntax_theme_names() -> Vec<&'static str> {
    two_face::theme::EmbeddedLazyThemeSet::theme_names()
        .iter()
        .map(|n| n.as_name())
        .collect()
}

impl Highlighter {
    /// Loads the syntaxes and a syntax theme (tens of milliseconds: done off the input loop).
    pub fn new(theme_name: &str, truecolor: bool) -> Result<Highlighter, String> {
        let names = two_face::theme::EmbeddedLazyThemeSet::theme_names();
        let which = names
            .iter()
            .find(|n| n.as_name().eq_ignore_ascii_case(theme_name))
            .ok_or_else(|| {
                format!(
                    "unknown syntax theme `{theme_name}` (known: {})",
                    syntax_theme_names().join(", ")
                )
            })?;
        let theme = two_face::theme::extra().get(*which).clone();
        Ok(Highlighter {
            syntaxes: two_face::syntax::extra_newlines(),
            theme,
            theme_name: which.as_name().to_string(),
            truecolor,
        })
    }

    fn conv(&self, c: syntect::highlighting::Color) -> Color {
        super::theme::color((c.r, c.g, c.b), self.truecolor)
    }

    /// Highlights a CUDA source as C++. Lines longer than 400 characters are not highlighted.
    pub fn highlight(&self, code: &str) -> Vec<Vec<(Style, String)>> {
        let syntax = self
            .syntaxes
            .find_syntax_by_extension("cu")
            .or_else(|| self.syntaxes.find_syntax_by_extension("cpp"))
            .unwrap_or_else(|| self.syntaxes.find_syntax_plain_text());
        let mut h = HighlightLines::new(syntax, &self.theme);
        let mut out = Vec::new();
        for line in syntect::util::LinesWithEndings::from(code) {
            let plain = line.trim_end_matches(['\n', '\r']).to_string();
            if line.len() > 400 {
                out.push(vec![(Style::default(), plain)]);
                continue;
            }
            match h.highlight_line(line, &self.syntaxes) {
                Ok(regions) => {
                    let mut segs = Vec::new();
                    for (st, text) in regions {
                        let text = text.trim_end_matches(['\n', '\r']);
                        if text.is_empty() {
                            continue;
                        }
                        let mut s = Style::default().fg(self.conv(st.foreground));
                        if st.font_style.contains(FontStyle::BOLD) {
                            s = s.add_modifier(Modifier::BOLD);
                        }
                        if st.font_style.contains(FontStyle::ITALIC) {
                            s = s.add_modifier(Modifier::ITALIC);
                        }
                        segs.push((s, text.to_string()));
                    }
                    out.push(segs);
                }
                Err(_) => out.push(vec![(Style::default(), plain)]),
            }
        }
        out
    }
}

/// Highlighted sources by content hash.
#[derive(Default)]
pub struct HighlightCache {
    map: HashMap<u64, Highlighted>,
}

pub fn hash_str(s: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

impl HighlightCache {
    pub fn get(&mut self, hl: Option<&Highlighter>, code: &str) -> Highlighted {
        let key = hash_str(code);
        if let Some(h) = self.map.get(&key) {
            return h.clone();
        }
        let lines = match hl {
            Some(h) => h.highlight(code),
            None => code
                .lines()
                .map(|l| vec![(Style::default(), l.to_string())])
                .collect(),
        };
        let v = Arc::new(lines);
        if hl.is_some() {
            if self.map.len() > 256 {
                self.map.clear();
            }
            self.map.insert(key, v.clone());
        }
        v
    }
    pub fn clear(&mut self) {
        self.map.clear();
    }
}

/// Splits styled segments at byte ranges to emphasise (background), keeping the syntax colours.
fn emphasise(
    segs: &[(Style, String)],
    ranges: &[(usize, usize)],
    base_bg: Color,
    emph_bg: Color,
) -> Vec<Span<'static>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    for (st, text) in segs {
        let start = pos;
        let end = pos + text.len();
        pos = end;
        // cut points within this segment
        let mut cuts = vec![start, end];
        for (a, b) in ranges {
            for c in [*a, *b] {
                if c > start && c < end {
                    cuts.push(c);
                }
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1]);
            let (la, lb) = (a - start, b - start);
            if !text.is_char_boundary(la) || !text.is_char_boundary(lb) {
                out.push(Span::styled(text.clone(), st.bg(base_bg)));
                break;
            }
            let emph = ranges.iter().any(|(ra, rb)| a >= *ra && b <= *rb);
            let bg = if emph { emph_bg } else { base_bg };
            let mut s = st.bg(bg);
            if emph {
                s = s.add_modifier(Modifier::BOLD);
            }
            out.push(Span::styled(text[la..lb].to_string(), s));
        }
    }
    out
}

/// What the diff pane shows. Every line starts with `gutter` columns (line numbers and the
/// change sign; a diagnostic's indent and `▲`) that stay put when the code scrolls sideways.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DiffView {
    pub title: String,
    pub lines: Vec<Line<'static>>,
    /// Index in `lines` of the first diagnostic, for jumping to it.
    pub first_diag: Option<usize>,
    pub added: usize,
    pub removed: usize,
    /// Columns of the gutter.
    pub gutter: usize,
    /// Columns of the widest line's code (after the gutter).
    pub max_cols: usize,
}

impl DiffView {
    /// Line `i` as gutter and code spans.
    pub fn split(&self, i: usize) -> (Vec<Span<'static>>, Vec<Span<'static>>) {
        self.lines
            .get(i)
            .map(|l| super::text::split_cols(&l.spans, self.gutter))
            .unwrap_or_default()
    }

    /// The code of line `i` (what a search looks in).
    pub fn code(&self, i: usize) -> String {
        super::text::plain(&self.split(i).1)
    }

    /// Measures the code's widest line (once the lines are built).
    fn measure(&mut self) {
        self.max_cols = (0..self.lines.len())
            .map(|i| super::text::cols(&self.code(i)))
            .max()
            .unwrap_or(0);
    }
}

fn gutter(
    old: Option<usize>,
    new: Option<usize>,
    sign: char,
    t: &Theme,
    width: usize,
) -> Vec<Span<'static>> {
    let f = |n: Option<usize>| {
        n.map(|n| format!("{n:>width$}"))
            .unwrap_or_else(|| " ".repeat(width))
    };
    let sign_style = match sign {
        '+' => Style::default().fg(t.added),
        '-' => Style::default().fg(t.removed),
        _ => Style::default().fg(t.gutter),
    };
    vec![
        Span::styled(
            format!("{} {} ", f(old), f(new)),
            Style::default().fg(t.gutter),
        ),
        Span::styled(format!("{sign} "), sign_style),
    ]
}

fn diag_lines(diags: &[&Diagnostic], t: &Theme, width: usize) -> Vec<Line<'static>> {
    diags
        .iter()
        .map(|d| {
            let c = if d.severity == "warning" {
                t.warn
            } else {
                t.bad
            };
            Line::from(vec![
                Span::raw(" ".repeat(width * 2 + 2)),
                Span::styled(
                    format!("▲ {} ({}): {}", d.severity, d.place(), d.msg),
                    Style::default().fg(c).add_modifier(Modifier::BOLD),
                ),
            ])
        })
        .collect()
}

/// Builds the diff of `new` against `old` (None: the full source of `new`), with syntax
/// highlighting, changed words emphasised and diagnostics under their lines.
#[allow(clippy::too_many_arguments)]
pub fn build_diff(
    title: String,
    old: Option<&str>,
    new: &str,
    old_hl: Option<&Highlighted>,
    new_hl: &Highlighted,
    full: bool,
    diagnostics: &[Diagnostic],
    t: &Theme,
) -> DiffView {
    let n_new = new.lines().count().max(1);
    let width = n_new
        .max(old.map(|o| o.lines().count()).unwrap_or(0))
        .to_string()
        .len()
        .max(3);
    let mut v = DiffView {
        title,
        gutter: gutter_cols(width),
        ..Default::default()
    };
    let cx = DiffCtx {
        old_hl,
        new_hl,
        diagnostics,
        t,
        width,
    };
    let Some(old) = old else {
        cx.full_source(&mut v, new, n_new);
        v.measure();
        return v;
    };
    let diff = TextDiff::from_lines(old, new);
    let mut shown = std::collections::BTreeSet::new();
    let groups = if full {
        vec![diff.ops().to_vec()]
    } else {
        diff.grouped_ops(3)
    };
    if groups.iter().all(|g| g.is_empty()) || (diff.ratio() == 1.0 && !full) {
        v.lines.push(Line::from(Span::styled(
            "  (no changes; f shows the full source)",
            Style::default().fg(t.dim),
        )));
    }
    for (gi, group) in groups.iter().enumerate() {
        if gi > 0 {
            v.lines.push(Line::from(Span::styled(
                format!("{:─<1$}", "", width * 2 + 8),
                Style::default().fg(t.gutter),
            )));
        }
        for op in group {
            for change in diff.iter_inline_changes(op) {
                let tag = change.tag();
                let (old_i, new_i) = (change.old_index(), change.new_index());
                let (text, ranges) = inline_text(&change);
                let line = cx.change_line(&mut v, tag, old_i, new_i, &text, &ranges);
                v.lines.push(line);
                if let (Some(n), true) = (new_i, tag != ChangeTag::Delete) {
                    shown.insert(n + 1);
                    cx.push_diags(&mut v, cx.diags_at(n + 1));
                }
            }
        }
    }
    cx.prepend_hidden_diags(&mut v, &shown);
    v.measure();
    v
}

/// The gutter's columns for line numbers of `digits` digits: old and new numbers, the sign.
pub fn gutter_cols(digits: usize) -> usize {
    2 * digits + 4
}

/// Rebuilds a changed line's text and the byte ranges of its emphasised (changed) words.
fn inline_text(change: &similar::InlineChange<'_, str>) -> (String, Vec<(usize, usize)>) {
    let mut text = String::new();
    let mut ranges = Vec::new();
    for (emph, s) in change.iter_strings_lossy() {
        let s = s.trim_end_matches(['\n', '\r']);
        if emph && !s.is_empty() {
            ranges.push((text.len(), text.len() + s.len()));
        }
        text.push_str(s);
    }
    (text, ranges)
}

/// What every line of one diff is rendered with: highlighting, diagnostics, theme, gutter width.
struct DiffCtx<'a> {
    old_hl: Option<&'a Highlighted>,
    new_hl: &'a Highlighted,
    diagnostics: &'a [Diagnostic],
    t: &'a Theme,
    width: usize,
}

impl<'a> DiffCtx<'a> {
    /// The diagnostics on a line of the new source.
    fn diags_at(&self, line: usize) -> Vec<&'a Diagnostic> {
        self.diagnostics.iter().filter(|d| d.line == line).collect()
    }

    /// Appends diagnostic lines, remembering where the first one went.
    fn push_diags(&self, v: &mut DiffView, ds: Vec<&Diagnostic>) {
        if ds.is_empty() {
            return;
        }
        if v.first_diag.is_none() {
            v.first_diag = Some(v.lines.len());
        }
        v.lines.extend(diag_lines(&ds, self.t, self.width));
    }

    /// A line's highlighted segments, or the text unstyled when there are none.
    fn plain(&self, hl: Option<&Highlighted>, idx: usize, text: &str) -> Vec<(Style, String)> {
        hl.and_then(|h| h.get(idx).cloned())
            .unwrap_or_else(|| vec![(Style::default().fg(self.t.fg), text.to_string())])
    }

    /// The whole new source with its diagnostics (no old source to diff against).
    fn full_source(&self, v: &mut DiffView, new: &str, n_new: usize) {
        let orphan: Vec<&Diagnostic> = self
            .diagnostics
            .iter()
            .filter(|d| d.line == 0 || d.line > n_new)
            .collect();
        self.push_diags(v, orphan);
        for (i, line) in new.lines().enumerate() {
            let mut spans = gutter(None, Some(i + 1), ' ', self.t, self.width);
            spans.extend(
                self.plain(Some(self.new_hl), i, line)
                    .into_iter()
                    .map(|(s, x)| Span::styled(x, s)),
            );
            v.lines.push(Line::from(spans));
            self.push_diags(v, self.diags_at(i + 1));
        }
    }

    /// Renders one changed (or equal) line, counting it as added or removed.
    fn change_line(
        &self,
        v: &mut DiffView,
        tag: ChangeTag,
        old_i: Option<usize>,
        new_i: Option<usize>,
        text: &str,
        ranges: &[(usize, usize)],
    ) -> Line<'static> {
        let t = self.t;
        let (sign, base_bg, emph_bg, segs) = match tag {
            ChangeTag::Delete => {
                v.removed += 1;
                (
                    '-',
                    t.removed_bg,
                    t.removed_emph_bg,
                    self.plain(self.old_hl, old_i.unwrap_or(0), text),
                )
            }
            ChangeTag::Insert => {
                v.added += 1;
                (
                    '+',
                    t.added_bg,
                    t.added_emph_bg,
                    self.plain(Some(self.new_hl), new_i.unwrap_or(0), text),
                )
            }
            ChangeTag::Equal => (
                ' ',
                t.bg,
                t.bg,
                self.plain(Some(self.new_hl), new_i.unwrap_or(0), text),
            ),
        };
        // Highlighted text must match the diff's text; fall back to plain otherwise.
        let joined: String = segs.iter().map(|(_, s)| s.as_str()).collect();
        let segs = if joined == text {
            segs
        } else {
            vec![(Style::default().fg(t.fg), text.to_string())]
        };
        let mut spans = gutter(
            old_i.map(|i| i + 1),
            new_i.map(|i| i + 1),
            sign,
            t,
            self.width,
        );
        if tag == ChangeTag::Equal {
            spans.extend(segs.into_iter().map(|(s, x)| Span::styled(x, s)));
        } else {
            spans.extend(emphasise(&segs, ranges, base_bg, emph_bg));
        }
        let mut line = Line::from(spans);
        if tag != ChangeTag::Equal {
            line = line.style(Style::default().bg(base_bg));
        }
        line
    }

    /// Puts diagnostics on lines outside the hunks on top, so they are never hidden.
    fn prepend_hidden_diags(&self, v: &mut DiffView, shown: &std::collections::BTreeSet<usize>) {
        let hidden: Vec<&Diagnostic> = self
            .diagnostics
            .iter()
            .filter(|d| !shown.contains(&d.line))
            .collect();
        if !hidden.is_empty() {
            let extra = diag_lines(&hidden, self.t, self.width);
            let n = extra.len();
            v.lines.splice(0..0, extra);
            v.first_diag = Some(0);
            let _ = n;
        }
    }
}
