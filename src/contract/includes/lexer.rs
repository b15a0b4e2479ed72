//! Preprocessing tokens, as far as the include rule needs them: where every `#include`, other
//! file-naming directive and `__has_include` of a source is, and what it names.
//!
//! The scan follows the C++ translation phases 1–3 over the whole source, `#if 0` blocks
//! included: a line splice (backslash, newline) joins lines everywhere but inside a raw string,
//! where it is kept as written; comments are whitespace (a block comment spanning lines stays
//! inside its logical line); string and character literals, with their encoding prefixes
//! (`u8`, `u`, `U`, `L`, and the raw forms `R`, `u8R`, `uR`, `UR`, `LR` with delimiters), hide
//! what they contain; a pp-number keeps its digit separators (`1'000`); digraphs are
//! punctuators (`%:` is `#`, `%:%:` is `##`, `<%` is `{`); identifiers may hold universal
//! character names.
//!
//! Invariants:
//! - A scan either fails (a [`Fault`]: a construct whose reading compilers may disagree on, or
//!   that hides the rest of the source) or reports every file-naming construct that a compiler
//!   following the dialect would act on. It may report more, never less: a `#` or `%:` followed
//!   by a directive name counts wherever it stands, not only as the first token of a line.
//! - Where compilers differ, a [`Dialect`] names the reading; the caller scans under every one of
//!   [`DIALECTS`] and keeps the union, so no single reading can hide a directive.
//! - Lines are 1-based physical lines of the source as given: a directive's line is its `#`'s.
//! - Trigraphs (`??=`, …) are refused outside comments and raw strings (where they mean
//!   nothing); `??/`, a splice for a compiler that replaces trigraphs, is refused in comments
//!   too. A carriage return not followed by a line feed is refused (compilers disagree on it).
//! - A universal character name that spells a basic character (`\u0069`), a named one
//!   (`\N{…}`), an invalid raw string delimiter, and an unterminated raw string or block
//!   comment are refused.

/// How a compiler reads the points where compilers differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Dialect {
    /// A backslash followed by spaces or tabs before the newline is a splice (gcc, clang).
    pub spaced_splices: bool,
    pub separators: Separators,
}

/// How a `'` inside a pp-number is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Separators {
    /// Not a separator: it starts a character literal (before C++14).
    Off,
    /// C++14: a `'` followed by a digit or a letter continues the number.
    Standard,
    /// gcc: every `'` continues the number; trailing ones are given back.
    Gcc,
}

/// Every reading the include rule scans under.
pub(super) const DIALECTS: [Dialect; 6] = {
    const fn d(spaced_splices: bool, separators: Separators) -> Dialect {
        Dialect {
            spaced_splices,
            separators,
        }
    }
    use Separators::*;
    [
        d(true, Gcc),
        d(true, Standard),
        d(true, Off),
        d(false, Gcc),
        d(false, Standard),
        d(false, Off),
    ]
};

/// A construct that names a file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum What {
    /// `#include`, with its header name when written out (`<name>` or `"name"`, then nothing).
    Include(Option<String>),
    /// `__has_include` and kin (the identifier as written), with the header name when written
    /// out as `(<name>)` or `("name")`.
    Probe(String, Option<String>),
    /// `#include` with a written-out header name followed by more tokens on its logical line
    /// (gcc includes the header and warns).
    Trailing(String),
    /// A directive refused whatever it names (`include_next`, `import`, `embed`).
    Forbidden(String),
}

/// A file-naming construct and its line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Found {
    pub line: usize,
    pub what: What,
}

/// A source the scan refuses to read: the line and why.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fault {
    pub line: usize,
    pub why: String,
}

/// Scans a source under one dialect.
pub(super) fn scan(src: &str, dialect: Dialect) -> Result<Vec<Found>, Fault> {
    let mut lx = Lexer::new(src, dialect);
    lx.lone_carriage_return()?;
    lx.run()?;
    lx.trigraphs()?;
    Ok(lx.found)
}

/// A stretch where trigraphs mean nothing (a raw string) or only `??/` matters (a comment).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Quiet {
    Comment,
    Raw,
}

/// The last significant tokens, newest first, as far as directives need them.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    None,
    Hash(usize),
    Ident(String),
    Open,
    Other,
}

struct Lexer {
    s: Vec<char>,
    d: Dialect,
    /// Position of the first character of every physical line.
    line_starts: Vec<usize>,
    quiet: Vec<(usize, usize, Quiet)>,
    found: Vec<Found>,
    prev: [Tok; 2],
}

const STRING_PREFIXES: &[&str] = &["u8", "u", "U", "L", "R", "u8R", "uR", "UR", "LR"];
const CHAR_PREFIXES: &[&str] = &["u8", "u", "U", "L"];

fn horizontal_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0b' | '\x0c' | '\r' | '\0')
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$' || !c.is_ascii()
}

impl Lexer {
    fn new(src: &str, d: Dialect) -> Lexer {
        let s: Vec<char> = src.chars().collect();
        let mut line_starts = vec![0];
        line_starts.extend(
            s.iter()
                .enumerate()
                .filter(|(_, c)| **c == '\n')
                .map(|(i, _)| i + 1),
        );
        Lexer {
            s,
            d,
            line_starts,
            quiet: Vec::new(),
            found: Vec::new(),
            prev: [Tok::None, Tok::None],
        }
    }

    fn line_of(&self, pos: usize) -> usize {
        self.line_starts.partition_point(|&st| st <= pos)
    }

    fn fault(&self, pos: usize, why: impl Into<String>) -> Fault {
        Fault {
            line: self.line_of(pos),
            why: why.into(),
        }
    }

    fn lone_carriage_return(&self) -> Result<(), Fault> {
        match (0..self.s.len()).find(|&i| self.s[i] == '\r' && self.s.get(i + 1) != Some(&'\n')) {
            Some(i) => Err(self.fault(
                i,
                "a carriage return without a line feed (compilers disagree on where its line ends)",
            )),
            None => Ok(()),
        }
    }

    /// Length of the line splice at `i`, 0 when there is none.
    fn splice(&self, i: usize) -> usize {
        if self.s.get(i) != Some(&'\\') {
            return 0;
        }
        let mut j = i + 1;
        if self.d.spaced_splices {
            while matches!(self.s.get(j), Some(' ' | '\t' | '\x0b' | '\x0c' | '\0')) {
                j += 1;
            }
        }
        if self.s.get(j) == Some(&'\r') {
            j += 1;
        }
        if self.s.get(j) == Some(&'\n') {
            j + 1 - i
        } else {
            0
        }
    }

    /// The physical position of the logical character at or after `i` (splices skipped).
    fn at(&self, mut i: usize) -> usize {
        loop {
            let n = self.splice(i);
            if n == 0 {
                return i;
            }
            i += n;
        }
    }

    /// The logical character at `i` and the position after it.
    fn get(&self, i: usize) -> Option<(char, usize)> {
        let p = self.at(i);
        self.s.get(p).map(|c| (*c, p + 1))
    }

    fn peek(&self, i: usize) -> Option<char> {
        self.get(i).map(|(c, _)| c)
    }

    fn push(&mut self, t: Tok) {
        let old = std::mem::replace(&mut self.prev[0], t);
        self.prev[1] = old;
    }

    fn run(&mut self) -> Result<(), Fault> {
        let mut i = usize::from(self.s.first() == Some(&'\u{feff}'));
        while let Some((c, j)) = self.get(i) {
            let pos = self.at(i);
            let next = self.peek(j);
            i = match c {
                '\n' => {
                    self.prev = [Tok::None, Tok::None];
                    j
                }
                c if horizontal_space(c) => j,
                '/' if next == Some('/') || next == Some('*') => self.comment(pos)?,
                '"' | '\'' => {
                    self.push(Tok::Other);
                    self.quoted(j, c)
                }
                c if c.is_ascii_digit()
                    || (c == '.' && next.is_some_and(|n| n.is_ascii_digit())) =>
                {
                    self.push(Tok::Other);
                    self.number(j, c)?
                }
                c if ident_char(c) || (c == '\\' && self.ucn(pos)?.is_some()) => {
                    let (name, k) = self.ident(pos)?;
                    self.after_ident(pos, name, k)?
                }
                '#' if next == Some('#') => {
                    self.push(Tok::Other);
                    self.get(j).map_or(j, |(_, k)| k)
                }
                '#' => {
                    self.push(Tok::Hash(pos));
                    j
                }
                '%' if next == Some(':') => {
                    let k = self.get(j).map_or(j, |(_, k)| k);
                    if self.peek(k) == Some('%')
                        && let Some((_, k2)) = self.get(k)
                        && self.peek(k2) == Some(':')
                    {
                        self.push(Tok::Other);
                        self.get(k2).map_or(k2, |(_, k3)| k3)
                    } else {
                        self.push(Tok::Hash(pos));
                        k
                    }
                }
                // `<<` and `<%` are single tokens: the `%` of `<%:` is no digraph of `#`.
                '<' if next == Some('<') || next == Some('%') => {
                    self.push(Tok::Other);
                    self.get(j).map_or(j, |(_, k)| k)
                }
                '(' => {
                    self.push(Tok::Open);
                    j
                }
                _ => {
                    self.push(Tok::Other);
                    j
                }
            };
        }
        Ok(())
    }

    /// Skips the comment starting at `pos` (`//` or `/*`); returns the position after it (a
    /// line comment ends before its newline).
    fn comment(&mut self, pos: usize) -> Result<usize, Fault> {
        let (_, j) = self.get(pos).expect("a comment starts here");
        let (kind, mut i) = self.get(j).expect("a comment starts here");
        if kind == '/' {
            while let Some((c, k)) = self.get(i) {
                if c == '\n' {
                    break;
                }
                i = k;
            }
            let end = self.at(i);
            self.quiet.push((pos, end, Quiet::Comment));
            return Ok(end);
        }
        let mut star = false;
        while let Some((c, k)) = self.get(i) {
            if star && c == '/' {
                self.quiet.push((pos, k, Quiet::Comment));
                return Ok(k);
            }
            star = c == '*';
            i = k;
        }
        Err(self.fault(
            pos,
            "an unterminated block comment hides the rest of the source",
        ))
    }

    /// Skips whitespace and comments within the logical line; returns where the next token
    /// (or the newline) starts.
    fn skip_space(&mut self, mut i: usize) -> Result<usize, Fault> {
        while let Some((c, j)) = self.get(i) {
            let pos = self.at(i);
            if horizontal_space(c) {
                i = j;
            } else if c == '/' && matches!(self.peek(j), Some('/' | '*')) {
                i = self.comment(pos)?;
            } else {
                return Ok(pos);
            }
        }
        Ok(self.s.len())
    }

    /// An ordinary string or character literal whose opening quote is before `i`; returns the
    /// position after it. An unterminated one ends before its newline (as gcc reads it).
    fn quoted(&self, mut i: usize, quote: char) -> usize {
        while let Some((c, k)) = self.get(i) {
            if c == '\n' {
                return self.at(i);
            }
            if c == quote {
                return k;
            }
            i = k;
            if c == '\\'
                && let Some((e, k2)) = self.get(i)
                && e != '\n'
            {
                i = k2;
            }
        }
        self.s.len()
    }

    /// A raw string literal whose opening quote ends at `open` (a physical position: nothing
    /// inside is spliced); returns the position after its closing quote.
    fn raw(&mut self, start: usize, open: usize) -> Result<usize, Fault> {
        let mut i = open;
        let mut delim = String::new();
        loop {
            match self.s.get(i) {
                Some('(') => break,
                Some(c)
                    if delim.chars().count() < 16
                        && c.is_ascii_graphic()
                        && !matches!(c, ')' | '\\' | '"' | '$' | '@' | '`') =>
                {
                    delim.push(*c);
                    i += 1;
                }
                _ => {
                    return Err(self.fault(
                        start,
                        format!(
                            "an invalid raw string delimiter after `R\"{delim}` (at most 16 \
                             characters, no space, parenthesis, backslash or line end)"
                        ),
                    ));
                }
            }
        }
        let close: Vec<char> = std::iter::once(')')
            .chain(delim.chars())
            .chain(std::iter::once('"'))
            .collect();
        let body = i + 1;
        match (body..self.s.len()).find(|&k| self.s[k..].starts_with(&close)) {
            Some(k) => {
                let end = k + close.len();
                self.quiet.push((start, end, Quiet::Raw));
                Ok(end)
            }
            None => Err(self.fault(
                start,
                "an unterminated raw string hides the rest of the source",
            )),
        }
    }

    /// A pp-number whose first character (`first`) is before `i`; returns the position after it.
    fn number(&self, mut i: usize, first: char) -> Result<usize, Fault> {
        let mut prev = first;
        // Where the number ends when trailing separators are given back (gcc).
        let mut end = i;
        while let Some((c, k)) = self.get(i) {
            let (last, k) = if ident_char(c) || (c == '.' && prev != '\'') {
                (c, k)
            } else if matches!(c, '+' | '-') && matches!(prev, 'e' | 'E' | 'p' | 'P') {
                (c, k)
            } else if c == '\\'
                && let Some((u, k)) = self.ucn(self.at(i))?
            {
                (u, k)
            } else if c == '\'' && self.d.separators == Separators::Gcc {
                prev = c;
                i = k;
                continue;
            } else if c == '\'' && self.d.separators == Separators::Standard {
                match self.get(k) {
                    Some((n, k2)) if ident_char(n) => (n, k2),
                    Some(('\\', _)) => match self.ucn(self.at(k))? {
                        Some(u) => u,
                        None => break,
                    },
                    _ => break,
                }
            } else {
                break;
            };
            prev = last;
            i = k;
            end = k;
        }
        Ok(end)
    }

    /// The universal character name at `pos` (a backslash) and the position after it; None
    /// when the backslash starts none.
    fn ucn(&self, pos: usize) -> Result<Option<(char, usize)>, Fault> {
        let Some((_, i)) = self.get(pos) else {
            return Ok(None);
        };
        let Some((kind, mut i)) = self.get(i) else {
            return Ok(None);
        };
        let mut hex = String::new();
        match kind {
            'N' if self.peek(i) == Some('{') => {
                return Err(self.fault(
                    pos,
                    "a named universal character (`\\N{…}`) outside a literal",
                ));
            }
            'u' if self.peek(i) == Some('{') => {
                i = self.get(i).map_or(i, |(_, k)| k);
                loop {
                    match self.get(i) {
                        Some(('}', k)) => {
                            i = k;
                            break;
                        }
                        Some((c, k)) if c.is_ascii_hexdigit() => {
                            hex.push(c);
                            i = k;
                        }
                        _ => return Ok(None),
                    }
                }
            }
            'u' | 'U' => {
                for _ in 0..if kind == 'u' { 4 } else { 8 } {
                    match self.get(i) {
                        Some((c, k)) if c.is_ascii_hexdigit() => {
                            hex.push(c);
                            i = k;
                        }
                        _ => return Ok(None),
                    }
                }
            }
            _ => return Ok(None),
        }
        let Some(c) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) else {
            return Ok(None);
        };
        if c.is_ascii() {
            return Err(self.fault(
                pos,
                format!("a universal character name for the basic character `{c}`"),
            ));
        }
        Ok(Some((c, i)))
    }

    /// The identifier starting at `pos`, universal character names decoded, and the position
    /// after it.
    fn ident(&self, pos: usize) -> Result<(String, usize), Fault> {
        let mut name = String::new();
        let mut i = pos;
        while let Some((c, k)) = self.get(i) {
            if ident_char(c) {
                name.push(c);
                i = k;
            } else if c == '\\'
                && let Some((u, k)) = self.ucn(self.at(i))?
            {
                name.push(u);
                i = k;
            } else {
                break;
            }
        }
        Ok((name, i))
    }

    /// What follows an identifier `name` that starts at `pos` and ends before `i`: a literal it
    /// prefixes, a directive it names, or a probe.
    fn after_ident(&mut self, pos: usize, name: String, i: usize) -> Result<usize, Fault> {
        let next = self.get(i);
        if let Some(('"', k)) = next
            && STRING_PREFIXES.contains(&name.as_str())
        {
            self.push(Tok::Other);
            return if name.ends_with('R') {
                self.raw(pos, k)
            } else {
                Ok(self.quoted(k, '"'))
            };
        }
        if let Some(('\'', k)) = next
            && CHAR_PREFIXES.contains(&name.as_str())
        {
            self.push(Tok::Other);
            return Ok(self.quoted(k, '\''));
        }
        let mut i = i;
        if let Tok::Hash(hash) = self.prev[0] {
            let line = self.line_of(hash);
            match name.as_str() {
                "include" => {
                    let (what, k) = self.operand(i)?;
                    self.found.push(Found { line, what });
                    i = k;
                }
                "include_next" | "import" | "embed" => self.found.push(Found {
                    line,
                    what: What::Forbidden(name.clone()),
                }),
                _ => {}
            }
        }
        if (name.starts_with("__has_include") || name.starts_with("__has_embed"))
            && !self.names_the_macro(i)?
        {
            let (header, k) = self.probe(i)?;
            self.found.push(Found {
                line: self.line_of(pos),
                what: What::Probe(name.clone(), header),
            });
            i = k;
        }
        self.push(Tok::Ident(name));
        Ok(i)
    }

    /// Whether a probe's identifier (ending before `i`) is only asked about as a macro
    /// (`defined(__has_include)`, `#ifdef __has_include`) and not called.
    fn names_the_macro(&mut self, i: usize) -> Result<bool, Fault> {
        let asked = match (&self.prev[0], &self.prev[1]) {
            (Tok::Ident(d), _) if d == "defined" => true,
            (Tok::Open, Tok::Ident(d)) if d == "defined" => true,
            (Tok::Ident(d), Tok::Hash(_)) => {
                matches!(d.as_str(), "ifdef" | "ifndef" | "elifdef" | "elifndef")
            }
            _ => false,
        };
        if !asked {
            return Ok(false);
        }
        let next = self.skip_space(i)?;
        Ok(self.peek(next) != Some('('))
    }

    /// A header name (`<…>` or `"…"`) at `i` within the logical line, and the position after.
    fn header_name(&self, i: usize) -> Option<(String, usize)> {
        let (open, mut i) = self.get(i)?;
        let close = match open {
            '<' => '>',
            '"' => '"',
            _ => return None,
        };
        let mut name = String::new();
        loop {
            let (c, k) = self.get(i)?;
            i = k;
            if c == '\n' {
                return None;
            }
            if c == close {
                return Some((name, i));
            }
            name.push(c);
        }
    }

    /// The operand of `#include` after `i` (the header name, whether written out and whether
    /// alone on its line), and where scanning resumes.
    fn operand(&mut self, i: usize) -> Result<(What, usize), Fault> {
        let start = self.skip_space(i)?;
        if let Some((name, k)) = self.header_name(start) {
            let end = self.skip_space(k)?;
            return Ok(if matches!(self.peek(end), None | Some('\n')) {
                (What::Include(Some(name)), end)
            } else {
                (What::Trailing(name), end)
            });
        }
        Ok((What::Include(None), start))
    }

    /// The operand of a probe after `i`: `(` header name `)`, and where scanning resumes.
    fn probe(&mut self, i: usize) -> Result<(Option<String>, usize), Fault> {
        let open = self.skip_space(i)?;
        if let Some(('(', k)) = self.get(open) {
            let start = self.skip_space(k)?;
            if let Some((name, k)) = self.header_name(start) {
                let close = self.skip_space(k)?;
                if let Some((')', end)) = self.get(close) {
                    return Ok((Some(name), end));
                }
            }
        }
        Ok((None, i))
    }

    /// Refuses a trigraph outside raw strings (and, but for `??/`, outside comments).
    fn trigraphs(&mut self) -> Result<(), Fault> {
        self.quiet.sort_by_key(|q| q.0);
        for i in 0..self.s.len().saturating_sub(2) {
            if self.s[i] != '?' || self.s[i + 1] != '?' {
                continue;
            }
            let t = self.s[i + 2];
            if !"=/'()!<>-".contains(t) {
                continue;
            }
            let quiet = self.quiet.iter().find(|q| q.0 <= i && i < q.1).map(|q| q.2);
            let refused = match quiet {
                Some(Quiet::Raw) => false,
                Some(Quiet::Comment) => t == '/',
                None => true,
            };
            if refused {
                return Err(self.fault(i, format!("the trigraph `??{t}`")));
            }
        }
        Ok(())
    }
}
