//! The layer rule (docs/architecture.md, "Layers"): the crate's top-level modules are layered,
//! lowest first, and a module's production code uses only modules of its own layer or lower
//! ones. This test reads the order from docs/architecture.md, reads every file of src/, and
//! fails naming `file:line` for each `crate::` path that runs back up, and for a top-level
//! module the order does not place.
//!
//! What counts: every `crate::NAME` path outside comments and string literals (in `use`
//! declarations, grouped `use crate::{a, b::c}` included, and in expressions and types), and
//! `super::` chains that climb out of a top-level module. What does not: test code (a file
//! declared under `#[cfg(test)]`, and any item so marked, such as `mod tests { … }`), which may
//! use any layer for its fixtures; `main.rs` (the binary, above every layer) and `testing.rs`
//! (helpers of the unit tests).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first, from the "## Layers" section of docs/architecture.md: each line
/// `N. `a`, `b` — …` is one layer of the modules named before the dash.
fn layers_of(doc: &str) -> Result<Vec<Vec<String>>, String> {
    let start = doc
        .find("\n## Layers\n")
        .ok_or("docs/architecture.md has no \"## Layers\" section")?;
    let section = &doc[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let mut out = Vec::new();
    for line in section.lines() {
        let Some((num, rest)) = line.split_once(". ") else {
            continue;
        };
        if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let names_part = rest.split(" — ").next().unwrap_or(rest);
        let names: Vec<String> = names_part
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        if names.is_empty() {
            return Err(format!("layer line without module names: {line}"));
        }
        out.push(names);
    }
    if out.is_empty() {
        return Err("the \"## Layers\" section lists no layers".into());
    }
    Ok(out)
}

/// The source with comments and the contents of string and character literals blanked out
/// (newlines kept, so that positions keep their lines).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let ident = |i: usize| i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            let end = src[i..].find('\n').map_or(b.len(), |e| i + e);
            blank(&mut out, i, end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (0usize, i);
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if (b[i] == b'r' || b[i..].starts_with(b"br")) && !ident(i) {
            // A raw string: r"…", r#"…"#, br"…".
            let at = if b[i] == b'b' { i + 2 } else { i + 1 };
            let hashes = b[at..].iter().take_while(|c| **c == b'#').count();
            if b.get(at + hashes) == Some(&b'"') {
                let close = format!("\"{}", "#".repeat(hashes));
                let body = at + hashes + 1;
                let end = src[body..]
                    .find(&close)
                    .map_or(b.len(), |e| body + e + close.len());
                blank(&mut out, i, end);
                i = end;
            } else {
                i += 1;
            }
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{1F600}'); otherwise a lifetime.
            let end = if b.get(i + 1) == Some(&b'\\') {
                src[i + 2..].find('\'').map(|e| i + 2 + e + 1)
            } else {
                let ch = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 2 + ch)
            };
            match end {
                Some(e) => {
                    blank(&mut out, i, e);
                    i = e;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

/// Where the item that starts at `from` ends: after its `;`, or after the `}` that closes its
/// first `{` (code without comments or literals).
fn item_end(code: &str, from: usize) -> usize {
    let b = code.as_bytes();
    let mut j = from;
    while j < b.len() && b[j] != b'{' && b[j] != b';' {
        j += 1;
    }
    if j >= b.len() || b[j] == b';' {
        return (j + 1).min(b.len());
    }
    let mut depth = 0usize;
    while j < b.len() {
        match b[j] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
        j += 1;
    }
    b.len()
}

/// A module declared under `#[cfg(test)]` in a file of its own.
enum TestMod {
    /// `mod NAME;`: NAME.rs or NAME/ in the declaring module's folder.
    Named(String),
    /// `#[path = "FILE"] mod NAME;`: FILE beside the declaring file.
    Path(String),
}

/// The code with every `#[cfg(test)]` item blanked out, and the modules declared so whose
/// files are test code (`text`: the source `code` was made from, for `#[path]`'s string).
fn without_tests(code: &str, text: &str) -> (String, Vec<TestMod>) {
    const MARK: &str = "#[cfg(test)]";
    let mut out = code.as_bytes().to_vec();
    let mut test_mods = Vec::new();
    let mut at = 0;
    while let Some(p) = code[at..].find(MARK) {
        let start = at + p;
        let end = item_end(code, start + MARK.len());
        let item = code[start + MARK.len()..end].trim();
        let path_attr = item.starts_with("#[path").then(|| {
            let original = text.get(start..end).unwrap_or("");
            original.split('"').nth(1).unwrap_or("").to_string()
        });
        let decl = item
            .rsplit(']')
            .next()
            .unwrap_or(item)
            .trim_start()
            .trim_start_matches("pub(crate)")
            .trim_start_matches("pub(super)")
            .trim_start_matches("pub")
            .trim_start();
        if let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
            test_mods.push(match path_attr {
                Some(file) => TestMod::Path(file),
                None => TestMod::Named(name.trim().to_string()),
            });
        }
        for c in &mut out[start..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        at = end;
    }
    (String::from_utf8(out).unwrap_or_default(), test_mods)
}

/// The top-level modules a file's code names, with their lines: `crate::NAME`, the names of a
/// `crate::{…}` group, and `super::` chains that leave the top-level module (`depth`: how many
/// modules deep the file is, 1 for `src/x.rs` and `src/x/mod.rs`).
fn uses(code: &str, depth: usize) -> Vec<(usize, String)> {
    let b = code.as_bytes();
    let line_at = |i: usize| code[..i].matches('\n').count() + 1;
    let word = |i: usize| -> &str {
        let end = code[i..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(code.len(), |e| i + e);
        &code[i..end]
    };
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let boundary = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if boundary && code[i..].starts_with("crate") && word(i) == "crate" {
            let mut j = skip_ws(i + 5);
            if !code[j..].starts_with("::") {
                i += 5;
                continue;
            }
            j = skip_ws(j + 2);
            if b.get(j) == Some(&b'{') {
                // Top-level names of the group, each up to its `::`, `,` or the group's end.
                let mut depth_in = 0usize;
                let mut k = j;
                let mut expect_name = true;
                while k < b.len() {
                    match b[k] {
                        b'{' => {
                            depth_in += 1;
                            expect_name = depth_in == 1;
                            k += 1;
                        }
                        b'}' => {
                            depth_in -= 1;
                            k += 1;
                            if depth_in == 0 {
                                break;
                            }
                        }
                        b',' if depth_in == 1 => {
                            expect_name = true;
                            k += 1;
                        }
                        c if expect_name
                            && depth_in == 1
                            && (c.is_ascii_alphabetic() || c == b'_') =>
                        {
                            out.push((line_at(k), word(k).to_string()));
                            expect_name = false;
                            k += word(k).len();
                        }
                        _ => k += 1,
                    }
                }
                i = k;
            } else {
                out.push((line_at(i), word(j).to_string()));
                i = j;
            }
        } else if boundary && code[i..].starts_with("super") && word(i) == "super" {
            // super::super::… : the name after the last `super` is a top-level module when the
            // chain climbs to the crate's root.
            let (start, mut j, mut ups) = (i, i, 0usize);
            loop {
                if !(code[j..].starts_with("super") && word(j) == "super") {
                    break;
                }
                ups += 1;
                let k = skip_ws(j + 5);
                if !code[k..].starts_with("::") {
                    j = k;
                    break;
                }
                j = skip_ws(k + 2);
            }
            if ups >= depth && j < b.len() && (b[j].is_ascii_alphabetic() || b[j] == b'_') {
                out.push((line_at(start), word(j).to_string()));
            }
            i = j.max(i + 5);
        } else {
            i += 1;
        }
    }
    out
}

/// A file of src/: its path relative to src/, and its text.
struct SrcFile {
    rel: PathBuf,
    text: String,
}

/// Every path of production code that names a module of a higher layer than its own file's,
/// as `file:line: …`; and each top-level module no layer places.
fn violations(files: &[SrcFile], layers: &[Vec<String>]) -> Vec<String> {
    let rank: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, l)| l.iter().map(move |m| (m.as_str(), i)))
        .collect();
    // Files declared under #[cfg(test)], and the folders of such modules.
    let mut test_paths: BTreeSet<PathBuf> = BTreeSet::new();
    let mut stripped = Vec::new();
    for f in files {
        let (code, test_mods) = without_tests(&code_only(&f.text), &f.text);
        let name = f.rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let beside = f.rel.parent().map(Path::to_path_buf).unwrap_or_default();
        let dir = match name {
            "mod.rs" | "lib.rs" | "main.rs" => beside.clone(),
            _ => f.rel.with_extension(""),
        };
        for m in test_mods {
            match m {
                TestMod::Named(m) => {
                    test_paths.insert(dir.join(format!("{m}.rs")));
                    test_paths.insert(dir.join(&m));
                }
                TestMod::Path(file) => {
                    test_paths.insert(beside.join(file));
                }
            }
        }
        stripped.push(code);
    }
    let is_test = |rel: &Path| test_paths.iter().any(|t| rel == t || rel.starts_with(t));
    let mut out = Vec::new();
    let mut unplaced = BTreeSet::new();
    for (f, code) in files.iter().zip(&stripped) {
        let parts: Vec<&str> = f.rel.iter().filter_map(|c| c.to_str()).collect();
        let Some(first) = parts.first() else { continue };
        let top = first.trim_end_matches(".rs");
        if matches!(top, "lib" | "main" | "testing") || is_test(&f.rel) {
            continue;
        }
        let depth = if parts.last() == Some(&"mod.rs") {
            parts.len() - 1
        } else {
            parts.len()
        };
        let Some(&own) = rank.get(top) else {
            unplaced.insert(top.to_string());
            continue;
        };
        for (line, name) in uses(code, depth) {
            if let Some(&theirs) = rank.get(name.as_str())
                && theirs > own
            {
                out.push(format!(
                    "src/{}:{line}: `{top}` (layer {}) uses `{name}` (layer {})",
                    f.rel.display(),
                    own + 1,
                    theirs + 1
                ));
            }
        }
    }
    for m in unplaced {
        out.push(format!(
            "src/{m}: the top-level module `{m}` has no layer in docs/architecture.md"
        ));
    }
    out
}

fn read_src(dir: &Path, rel: &Path, out: &mut Vec<SrcFile>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir.join(rel))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join(rel).display()))
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let rel = rel.join(e.file_name());
        if e.path().is_dir() {
            read_src(dir, &rel, out);
        } else if rel.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(e.path()).unwrap();
            out.push(SrcFile { rel, text });
        }
    }
}

#[test]
fn no_module_uses_a_higher_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let layers = layers_of(&doc).unwrap();
    let mut files = Vec::new();
    read_src(&root.join("src"), Path::new(""), &mut files);
    assert!(files.len() > 100, "src/ read: {} files", files.len());
    let v = violations(&files, &layers);
    assert!(
        v.is_empty(),
        "imports that run back up (docs/architecture.md, \"Layers\"):\n{}",
        v.join("\n")
    );
}

// The parser itself, on small sources: it must see what it is meant to see, or the rule above
// could pass by seeing nothing.

fn file(rel: &str, text: &str) -> SrcFile {
    SrcFile {
        rel: PathBuf::from(rel),
        text: text.into(),
    }
}

fn three() -> Vec<Vec<String>> {
    vec![vec!["low".into()], vec!["mid".into()], vec!["high".into()]]
}

#[test]
fn the_layers_are_read_from_the_architecture_page() {
    let doc = "# A\n\n## Layers\n\nLowest first.\n\n1. `error`, `utc` — the bottom\n2. `suite` — \
               problems (`suite::expr`)\n\n## Next\n\n3. `not` — a list elsewhere\n";
    assert_eq!(
        layers_of(doc).unwrap(),
        vec![
            vec!["error".to_string(), "utc".into()],
            vec!["suite".into()]
        ]
    );
    assert!(layers_of("# A\n").is_err());
}

#[test]
fn paths_in_code_are_found_and_comments_and_strings_are_not() {
    let code = code_only(
        "use crate::{high::x, mid::{a, b}, low};\n\
         // crate::high in a comment\n\
         /* crate::high /* nested */ crate::high */\n\
         let s = \"crate::high\"; let r = r#\"crate::high\"#; let c = '\"';\n\
         fn f<'a>(x: &'a crate::mid::T) -> crate :: high::U { crate::low::g() }\n",
    );
    let found: Vec<(usize, String)> = uses(&code, 1);
    assert_eq!(
        found,
        vec![
            (1, "high".to_string()),
            (1, "mid".into()),
            (1, "low".into()),
            (5, "mid".into()),
            (5, "high".into()),
            (5, "low".into()),
        ]
    );
}

#[test]
fn super_chains_that_leave_the_module_count() {
    let code = code_only("use super::super::high::x;\nuse super::sibling;\n");
    // src/mid/a/b.rs is three deep: two `super`s stay inside `mid`.
    assert!(uses(&code, 3).is_empty());
    // src/mid/b.rs is two deep: two `super`s reach the crate's root.
    assert_eq!(uses(&code, 2), vec![(1, "high".to_string())]);
}

#[test]
fn an_import_from_a_higher_layer_is_named_with_its_file_and_line() {
    let files = [
        file("low/mod.rs", "//! Low.\n\nuse crate::mid::Thing;\n"),
        file("mid/mod.rs", "use crate::low::X;\nuse crate::mid::Y;\n"),
        file("high.rs", "use crate::{low, mid};\n"),
    ];
    assert_eq!(
        violations(&files, &three()),
        vec!["src/low/mod.rs:3: `low` (layer 1) uses `mid` (layer 2)".to_string()]
    );
}

#[test]
fn test_code_may_use_any_layer() {
    let files = [
        file(
            "low/mod.rs",
            "pub fn f() {}\n#[cfg(test)]\nmod tests;\n#[cfg(test)]\nmod inline {\n    use crate::high::fixture;\n    fn g() { let _ = \"}\"; }\n}\n#[cfg(test)]\nuse crate::high::Other;\nuse crate::high::Real;\n",
        ),
        file("low/tests.rs", "use crate::high::fixture;\n"),
        file(
            "low/part.rs",
            "#[cfg(test)]\n#[path = \"part_tests.rs\"]\nmod tests;\n",
        ),
        file("low/part_tests.rs", "use crate::high::fixture;\n"),
        file("high.rs", "pub fn fixture() {}\n"),
    ];
    assert_eq!(
        violations(&files, &three()),
        vec!["src/low/mod.rs:11: `low` (layer 1) uses `high` (layer 3)".to_string()]
    );
}

#[test]
fn a_module_without_a_layer_is_named() {
    let files = [file("stray.rs", "pub fn f() {}\n")];
    assert_eq!(
        violations(&files, &three()),
        vec![
            "src/stray: the top-level module `stray` has no layer in docs/architecture.md"
                .to_string()
        ]
    );
}
