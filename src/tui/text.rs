//! Text by terminal columns, shared by update and view so that both count alike: the width of
//! a string, a log line wrapped into rows (as byte ranges of the line, so a search's matches
//! map onto the rows), styled spans cut to a window of columns (sideways scroll), and the
//! matches of a search query (smart case: case-insensitive unless the query has a capital).
//!
//! Invariants: every range returned lies on char boundaries of the text it was computed from;
//! widths are `unicode-width`'s (the width ratatui draws with).

use ratatui::style::Style;
use ratatui::text::Span;
use std::ops::Range;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Columns a string takes on the terminal.
pub fn cols(s: &str) -> usize {
    s.width()
}

/// Wraps `text` into rows of at most `width` columns: the first row takes `width`, the next ones
/// `width - indent` (they are drawn after `indent` spaces). Breaks after a space where it can,
/// else inside the word; the spaces at a break end the row before it (they are not drawn). Each
/// row is a byte range of `text`; an empty text is one empty row.
pub fn wrap(text: &str, width: usize, indent: usize) -> Vec<Range<usize>> {
    let width = width.max(1);
    let rest = width.saturating_sub(indent).max(1);
    let mut rows = Vec::new();
    let mut start = 0;
    while start < text.len() || rows.is_empty() {
        let room = if rows.is_empty() { width } else { rest };
        let (end, next) = row_end(&text[start..], room);
        rows.push(start..start + end);
        if start + next >= text.len() {
            break;
        }
        start += next;
    }
    rows
}

/// Where the row of at most `room` columns that starts `s` ends, and where the next begins.
fn row_end(s: &str, room: usize) -> (usize, usize) {
    let mut used = 0;
    // the last space that fits: the row may end before it
    let mut last_space: Option<usize> = None;
    for (i, c) in s.char_indices() {
        let w = c.width().unwrap_or(0);
        if used + w > room {
            if c == ' ' {
                // the row is full right before a space: break there, skip the spaces
                return (trim_end(s, i), skip_spaces(s, i));
            }
            return match last_space {
                Some(sp) if sp > 0 => (trim_end(s, sp), skip_spaces(s, sp)),
                // one word longer than the row: cut it (at least one char per row)
                _ => {
                    let cut = if i == 0 { c.len_utf8() } else { i };
                    (cut, cut)
                }
            };
        }
        if c == ' ' {
            last_space = Some(i);
        }
        used += w;
    }
    (s.len(), s.len())
}

/// The end of `s[..end]` without its trailing spaces (unless that leaves nothing).
fn trim_end(s: &str, end: usize) -> usize {
    match s[..end].trim_end_matches(' ').len() {
        0 => end,
        n => n,
    }
}

fn skip_spaces(s: &str, from: usize) -> usize {
    from + s[from..].len() - s[from..].trim_start_matches(' ').len()
}

/// The matches of `query` in `text` as byte ranges, left to right, not overlapping. Smart
/// case: a query without capitals matches either case. An empty query matches nothing.
pub fn find(text: &str, query: &str) -> Vec<Range<usize>> {
    if query.is_empty() {
        return vec![];
    }
    let fold = !query.chars().any(char::is_uppercase);
    let mut out = Vec::new();
    if !fold {
        let mut at = 0;
        while let Some(i) = text[at..].find(query) {
            out.push(at + i..at + i + query.len());
            at += i + query.len();
        }
        return out;
    }
    // Case-folded compare char by char, keeping the text's own byte offsets.
    let q: Vec<char> = query.chars().flat_map(char::to_lowercase).collect();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let mut qi = 0;
        let mut j = i;
        while j < chars.len() && qi < q.len() {
            let mut low = chars[j].1.to_lowercase();
            let ok = low.all(|c| {
                let hit = q.get(qi) == Some(&c);
                qi += 1;
                hit
            });
            if !ok {
                break;
            }
            j += 1;
        }
        if qi == q.len() && j > i {
            let end = chars.get(j).map(|(b, _)| *b).unwrap_or(text.len());
            out.push(chars[i].0..end);
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Whether `text` matches `query` (see `find`).
pub fn matches(text: &str, query: &str) -> bool {
    !find(text, query).is_empty()
}

/// The plain text of styled spans.
pub fn plain(spans: &[Span<'_>]) -> String {
    spans.iter().map(|s| s.content.as_ref()).collect()
}

/// Splits styled spans after `at` columns: what fills those columns, and the rest.
pub fn split_cols(spans: &[Span<'static>], at: usize) -> (Vec<Span<'static>>, Vec<Span<'static>>) {
    let (mut head, mut tail) = (Vec::new(), Vec::new());
    let mut used = 0;
    for sp in spans {
        if used >= at {
            tail.push(sp.clone());
            continue;
        }
        let w = cols(&sp.content);
        if used + w <= at {
            used += w;
            head.push(sp.clone());
            continue;
        }
        let cut = byte_at_col(&sp.content, at - used);
        let (a, b) = sp.content.split_at(cut);
        head.push(Span::styled(a.to_string(), sp.style));
        tail.push(Span::styled(b.to_string(), sp.style));
        used = at;
    }
    (head, tail)
}

/// The byte offset where column `col` of `s` starts (a wide char across it is left out).
fn byte_at_col(s: &str, col: usize) -> usize {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        let w = c.width().unwrap_or(0);
        if used + w > col {
            return i;
        }
        used += w;
    }
    s.len()
}

/// Styled spans seen through a window of `take` columns that starts `skip` columns in.
pub fn window_cols(spans: &[Span<'static>], skip: usize, take: usize) -> Vec<Span<'static>> {
    let (_, rest) = split_cols(spans, skip);
    split_cols(&rest, take).0
}

/// Spans with `style` patched over the byte ranges `ranges` of their joined text (sorted, not
/// overlapping): the search's matches drawn over the syntax colours.
pub fn patch(
    spans: Vec<Span<'static>>,
    ranges: &[Range<usize>],
    style: Style,
) -> Vec<Span<'static>> {
    if ranges.is_empty() {
        return spans;
    }
    let mut out = Vec::with_capacity(spans.len() + 2 * ranges.len());
    let mut pos = 0;
    for sp in spans {
        let (a, b) = (pos, pos + sp.content.len());
        pos = b;
        let mut cuts = vec![a, b];
        for r in ranges {
            for c in [r.start, r.end] {
                if c > a && c < b {
                    cuts.push(c);
                }
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        for w in cuts.windows(2) {
            let (x, y) = (w[0], w[1]);
            let text = &sp.content[x - a..y - a];
            let hit = ranges.iter().any(|r| x >= r.start && y <= r.end);
            let st = if hit { sp.style.patch(style) } else { sp.style };
            out.push(Span::styled(text.to_string(), st));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{
        Range, Span, Style, cols, find, matches, patch, plain, split_cols, window_cols, wrap,
    };

    fn rows(t: &str, w: usize, ind: usize) -> Vec<&str> {
        wrap(t, w, ind).into_iter().map(|r| &t[r]).collect()
    }

    #[test]
    fn wrap_breaks_at_spaces_and_cuts_long_words() {
        assert_eq!(rows("", 10, 2), vec![""]);
        assert_eq!(rows("short", 10, 2), vec!["short"]);
        assert_eq!(
            rows("rms_norm v2: compile error at line 84", 16, 2),
            vec!["rms_norm v2:", "compile error", "at line 84"]
        );
        // a word longer than a row is cut; continuation rows are `width - indent` wide
        assert_eq!(
            rows("/a/very/long/path/name ok", 10, 2),
            vec!["/a/very/lo", "ng/path/", "name ok"]
        );
        // the spaces at a break are dropped, never a row of spaces
        assert_eq!(rows("aaaa     bbbb", 6, 0), vec!["aaaa", "bbbb"]);
        // exactly full
        assert_eq!(rows("abcd efgh", 4, 0), vec!["abcd", "efgh"]);
        // wide chars count two columns
        assert_eq!(rows("ＡＢＣ", 4, 0), vec!["ＡＢ", "Ｃ"]);
        // every row fits
        let t = "finding [stall_long_scoreboard] unified_attention_flash: 41% of cycles wait on L1TEX (global loads)";
        for w in 5..40 {
            for (i, r) in wrap(t, w, 2).into_iter().enumerate() {
                let room = if i == 0 { w } else { w - 2 };
                assert!(cols(&t[r.clone()]) <= room, "{w}: {:?}", &t[r]);
            }
        }
    }

    #[test]
    fn find_is_smart_case_and_keeps_byte_offsets() {
        assert_eq!(
            find("WARPS warps Warps", "warps"),
            vec![0..5, 6..11, 12..17]
        );
        assert_eq!(find("WARPS warps Warps", "WARPS"), vec![0..5]);
        assert_eq!(find("aaa", "aa"), vec![0..2]);
        assert_eq!(find("x", ""), Vec::<Range<usize>>::new());
        // non-ASCII before the match: offsets are bytes of the text
        let t = "µs → 12µs";
        let m = find(t, "µs");
        assert_eq!(m.len(), 2);
        assert!(m.iter().all(|r| &t[r.clone()] == "µs"));
        assert!(!matches("rms_norm", "NORM") && matches("rms_norm", "norm"));
    }

    #[test]
    fn spans_cut_to_a_window_of_columns() {
        let spans = vec![
            Span::raw("  1 "),
            Span::styled(
                "int x = 1;",
                Style::default().add_modifier(ratatui::style::Modifier::BOLD),
            ),
        ];
        let (head, tail) = split_cols(&spans, 6);
        assert_eq!(plain(&head), "  1 in");
        assert_eq!(plain(&tail), "t x = 1;");
        assert_eq!(
            tail[0].style,
            Style::default().add_modifier(ratatui::style::Modifier::BOLD)
        );
        assert_eq!(plain(&window_cols(&spans, 4, 3)), "int");
        assert_eq!(plain(&window_cols(&spans, 10, 100)), "= 1;");
        assert!(window_cols(&spans, 40, 10).is_empty());
    }

    #[test]
    fn patch_styles_only_the_ranges() {
        let spans = vec![Span::raw("ab"), Span::raw("cdef")];
        let out = patch(
            spans,
            &[1..3, 5..6],
            Style::default().add_modifier(ratatui::style::Modifier::REVERSED),
        );
        let hit: Vec<(String, bool)> = out
            .iter()
            .map(|s| {
                (
                    s.content.to_string(),
                    s.style
                        .add_modifier
                        .contains(ratatui::style::Modifier::REVERSED),
                )
            })
            .collect();
        assert_eq!(
            hit,
            vec![
                ("a".into(), false),
                ("b".into(), true),
                ("c".into(), true),
                ("de".into(), false),
                ("f".into(), true)
            ]
        );
    }
}
