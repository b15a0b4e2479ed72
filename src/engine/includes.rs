//! The include rule: a kernel may include the CUDA toolkit's headers and nothing else.
//!
//! NVRTC opens whatever path an `#include` names and echoes the file in its log on an error, and
//! compile logs go to the session and to language models: without this rule a candidate could
//! read any host file. Before NVRTC sees a source, every include of it is checked here:
//! the name must be written out (`<name>` or `"name"`, no macro), relative, without `..`, and
//! name a file inside the toolkit's include folder (symbolic links resolved) or one of NVRTC's
//! built-in headers. `__has_include` follows the same rule; `#include_next`, `#import`,
//! `#embed` and trigraphs are refused. NVRTC also runs with `--no-source-include`, so a quoted
//! include is never looked up beside the worker. A refusal is a compile error on the
//! candidate's line that names the rule and shows nothing of the file.

use std::path::{Path, PathBuf};

/// Headers NVRTC provides itself (found without an include folder).
const BUILTIN: &[&str] = &[
    "cuda_fp16.h",
    "cuda_fp16.hpp",
    "cuda_bf16.h",
    "cuda_bf16.hpp",
    "cuda_fp8.h",
    "cuda_fp8.hpp",
    "cuda_fp6.h",
    "cuda_fp6.hpp",
    "cuda_fp4.h",
    "cuda_fp4.hpp",
];

/// A refused include: the line (1-based, in the source as given) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub line: usize,
    pub msg: String,
}

/// The folders includes may come from.
#[derive(Debug, Clone, Default)]
pub struct Allowed {
    dirs: Vec<PathBuf>,
}

impl Allowed {
    pub fn new(dirs: impl IntoIterator<Item = PathBuf>) -> Allowed {
        Allowed {
            dirs: dirs
                .into_iter()
                .filter_map(|d| std::fs::canonicalize(d).ok())
                .collect(),
        }
    }

    fn permits(&self, name: &str) -> Result<(), String> {
        if name.is_empty() {
            return Err("an empty include name".into());
        }
        if name.starts_with('/') || name.starts_with('~') || name.contains('\\') {
            return Err(format!("`{name}` is not a relative name"));
        }
        if Path::new(name)
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(format!("`{name}` leaves the include folder"));
        }
        for d in &self.dirs {
            if let Ok(p) = std::fs::canonicalize(d.join(name))
                && p.starts_with(d)
                && p.is_file()
            {
                return Ok(());
            }
        }
        if BUILTIN.contains(&name) {
            return Ok(());
        }
        Err(format!("`{name}` is not a header of the CUDA toolkit"))
    }
}

fn refusal(line: usize, why: String) -> Refusal {
    Refusal {
        line,
        msg: format!(
            "include refused: {why}; kernels may include only the CUDA toolkit's headers \
             (e.g. <cuda_bf16.h>), written out as <name> or \"name\""
        ),
    }
}

/// The source with comments removed and line continuations joined, as (line, text) pairs of
/// logical lines; string and character literals are kept as they are.
fn logical_lines(src: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start = 1usize;
    let mut line = 1usize;
    let b: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut in_block = false;
    let mut quote: Option<char> = None;
    while i < b.len() {
        let c = b[i];
        // Line continuation (phase 2), everywhere.
        if c == '\\'
            && (b.get(i + 1) == Some(&'\n')
                || (b.get(i + 1) == Some(&'\r') && b.get(i + 2) == Some(&'\n')))
        {
            i += if b[i + 1] == '\r' { 3 } else { 2 };
            line += 1;
            continue;
        }
        if c == '\n' {
            if let Some(q) = quote
                && q != 'R'
            {
                quote = None;
            }
            if !in_block {
                out.push((start, std::mem::take(&mut cur)));
                start = line + 1;
            }
            line += 1;
            i += 1;
            if in_block {
                // A block comment spanning lines ends the logical line where it started.
                out.push((start, std::mem::take(&mut cur)));
                start = line;
            }
            continue;
        }
        if in_block {
            if c == '*' && b.get(i + 1) == Some(&'/') {
                in_block = false;
                cur.push(' ');
                i += 2;
            } else {
                i += 1;
            }
            continue;
        }
        if let Some(q) = quote {
            cur.push(c);
            if c == '\\' && i + 1 < b.len() {
                cur.push(b[i + 1]);
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if c == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                // A continuation inside a line comment continues the comment.
                if b[i] == '\\' && b.get(i + 1) == Some(&'\n') {
                    line += 1;
                    i += 2;
                    continue;
                }
                i += 1;
            }
            continue;
        }
        if c == '/' && b.get(i + 1) == Some(&'*') {
            in_block = true;
            cur.push(' ');
            i += 2;
            continue;
        }
        if c == '"' || c == '\'' {
            quote = Some(c);
        }
        cur.push(c);
        i += 1;
    }
    out.push((start, cur));
    out
}

/// The include name of a directive's operand, when written out.
fn literal_name(rest: &str) -> Option<&str> {
    let r = rest.trim();
    if let Some(x) = r.strip_prefix('<') {
        let end = x.find('>')?;
        x[end + 1..].trim().is_empty().then(|| &x[..end])
    } else if let Some(x) = r.strip_prefix('"') {
        let end = x.find('"')?;
        x[end + 1..].trim().is_empty().then(|| &x[..end])
    } else {
        None
    }
}

/// Checks every include of a source. Ok when all are permitted.
pub fn check(src: &str, allowed: &Allowed) -> Result<(), Refusal> {
    for (line, text) in logical_lines(src) {
        for tri in [
            "??=", "??/", "??'", "??(", "??)", "??!", "??<", "??>", "??-",
        ] {
            if text.contains(tri) {
                return Err(refusal(line, format!("the trigraph `{tri}`")));
            }
        }
        let t = text.trim_start();
        let rest = if let Some(r) = t.strip_prefix('#') {
            Some(r)
        } else {
            t.strip_prefix("%:")
        };
        if let Some(rest) = rest {
            let rest = rest.trim_start();
            let word: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let operand = &rest[word.len()..];
            match word.as_str() {
                "include" => match literal_name(operand) {
                    Some(name) => allowed.permits(name).map_err(|w| refusal(line, w))?,
                    None => {
                        return Err(refusal(
                            line,
                            "the include name is not written out (a macro or malformed name)"
                                .into(),
                        ));
                    }
                },
                "include_next" | "import" | "embed" => {
                    return Err(refusal(line, format!("#{word} is not allowed")));
                }
                _ => {}
            }
        }
        // __has_include(...) anywhere in the line.
        let mut from = 0;
        while let Some(at) = text[from..].find("__has_include") {
            let after = &text[from + at + "__has_include".len()..];
            let after = after.strip_prefix("_next").unwrap_or(after);
            let arg = after.trim_start().strip_prefix('(').and_then(|a| {
                let a = a.trim_start();
                let close = if a.starts_with('<') { '>' } else { '"' };
                let end = a[1..].find(close)? + 2;
                a[end..].trim_start().starts_with(')').then(|| &a[..end])
            });
            match arg.and_then(literal_name) {
                Some(name) => allowed.permits(name).map_err(|w| refusal(line, w))?,
                None => {
                    return Err(refusal(
                        line,
                        "the __has_include name is not written out".into(),
                    ));
                }
            }
            from += at + "__has_include".len();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toolkit() -> (tempdir::Dir, Allowed) {
        let d = tempdir::Dir::new();
        std::fs::create_dir_all(d.0.join("inc/cuda/std")).unwrap();
        std::fs::write(d.0.join("inc/cuda_bf16.h"), "// bf16").unwrap();
        std::fs::write(d.0.join("inc/cuda/std/cstdint"), "//").unwrap();
        std::fs::write(d.0.join("secret.txt"), "root:x:0:0").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(d.0.join("secret.txt"), d.0.join("inc/link.h")).unwrap();
        let a = Allowed::new([d.0.join("inc")]);
        (d, a)
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "atrex-includes-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                ));
                let _ = std::fs::remove_dir_all(&p);
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn toolkit_headers_pass() {
        let (_d, a) = toolkit();
        let ok = "#include <cuda_bf16.h>\n  #  include \"cuda/std/cstdint\"\n#include <cuda_fp8.h>\n\
                  #if __has_include(<cuda_bf16.h>)\n#endif\n// #include \"/etc/passwd\"\n\
                  /* #include \"/etc/passwd\" */\nconst char* s = \"#include </etc/passwd>\";\n";
        assert_eq!(check(ok, &a), Ok(()));
    }

    #[test]
    fn host_files_are_refused_on_their_line() {
        let (d, a) = toolkit();
        let secret = d.0.join("secret.txt").display().to_string();
        let cases: Vec<(String, usize)> = vec![
            (format!("int x;\n#include \"{secret}\"\n"), 2),
            ("#include </etc/passwd>\n".into(), 1),
            ("#include \"../secret.txt\"\n".into(), 1),
            ("#include \"cuda/../../secret.txt\"\n".into(), 1),
            ("#include <link.h>\n".into(), 1),
            ("#define F \"/etc/passwd\"\n#include F\n".into(), 2),
            ("%:include \"/etc/passwd\"\n".into(), 1),
            ("#/**/include \"/etc/passwd\"\n".into(), 1),
            ("#inc\\\nlude \"/etc/passwd\"\n".into(), 1),
            ("int a;\n/* x\n*/ #include \"/etc/hostname\"\n".into(), 3),
            ("#include_next <cuda_bf16.h>\n".into(), 1),
            ("#embed \"/etc/passwd\"\n".into(), 1),
            ("??=include \"/etc/passwd\"\n".into(), 1),
            ("#if __has_include(\"/etc/shadow\")\n#endif\n".into(), 1),
            ("#include \"secret.txt\"\n".into(), 1),
        ];
        for (src, line) in cases {
            let r = check(&src, &a).expect_err(&src);
            assert_eq!(r.line, line, "{src}: {r:?}");
            assert!(
                r.msg.contains("only the CUDA toolkit's headers"),
                "{}",
                r.msg
            );
            assert!(!r.msg.contains("root:x"), "{}", r.msg);
        }
    }
}
