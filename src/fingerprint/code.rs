//! The fingerprint of a kernel's code, as against its text: sha256 (hex) of the source without
//! its comments — except `/* atrex:plan ... */` blocks, which the harness reads — without the
//! whitespace around each line and without blank lines. A header comment rewritten after a
//! run (a template's measured figures, its notes) leaves it as it was; any change to the code,
//! the launch plan, a define or a string literal changes it. `bench --json` and `measure
//! --json` write it as `code_sha256`, and the shipped standing is built only from documents
//! whose code is the file's (docs/standing.md).

use sha2::{Digest, Sha256};

/// sha256 (hex) of `source`'s code (see the module).
pub fn of_code(source: &str) -> String {
    let code = strip_comments(source);
    let mut h = Sha256::new();
    for line in code.lines().map(str::trim).filter(|l| !l.is_empty()) {
        h.update(line.as_bytes());
        h.update(b"\n");
    }
    super::hex(&h.finalize())
}

/// The source with its comments replaced by a space (a line comment keeps its newline, a block
/// comment its newlines), string and character literals and `atrex:plan` blocks kept as written.
fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' | b'\'' => {
                let q = b[i];
                out.push(q);
                i += 1;
                while i < b.len() && b[i] != q && b[i] != b'\n' {
                    if b[i] == b'\\' && i + 1 < b.len() {
                        out.push(b[i]);
                        i += 1;
                    }
                    out.push(b[i]);
                    i += 1;
                }
                if i < b.len() {
                    out.push(b[i]);
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                out.push(b' ');
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (body_end, end) = match src[i + 2..].find("*/") {
                    Some(e) => (i + 2 + e, i + 2 + e + 2),
                    None => (b.len(), b.len()),
                };
                let body = &src[i + 2..body_end];
                if body.trim_start().starts_with("atrex:plan") {
                    out.extend_from_slice(&b[i..end]);
                } else {
                    out.push(b' ');
                    out.extend(body.bytes().filter(|c| *c == b'\n'));
                }
                i = end;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::of_code;

    const K: &str = "/* atrex:template\nid = \"t\"\n[measured]\ns_op = 0.1\n*/\n// Measured: S_op 0.1\n/* atrex:plan\n[[launch]]\nkernel = \"k\"\ngrid = [\"T\"]\nblock = [\"128\"]\nargs = [\"out\"]\n*/\n#define N 4 // four\n__global__ void k(float* out) {\n    const char* s = \"// not a comment /* nor this */\";\n    out[threadIdx.x] = N; /* a note */\n}\n";

    #[test]
    fn header_and_comment_edits_keep_it() {
        let a = of_code(K);
        let figures = K.replace("s_op = 0.1", "s_op = 0.2").replace(
            "// Measured: S_op 0.1",
            "// Measured: S_op 0.2, on the H200\n// more notes",
        );
        assert_eq!(of_code(&figures), a);
        assert_eq!(of_code(&K.replace("/* a note */", "")), a);
        assert_eq!(of_code(&K.replace("    out[", "\tout[")), a, "indentation");
        assert_eq!(of_code(&K.replace("// four", "// 4")), a);
    }

    #[test]
    fn code_plan_define_and_string_edits_change_it() {
        let a = of_code(K);
        for (from, to) in [
            ("= N;", "= N + 1;"),
            ("block = [\"128\"]", "block = [\"256\"]"),
            ("#define N 4", "#define N 8"),
            ("not a comment", "not a remark"),
            ("nor this", "nor that"),
        ] {
            assert!(K.contains(from), "{from}");
            assert_ne!(of_code(&K.replace(from, to)), a, "{from} -> {to}");
        }
    }

    #[test]
    fn an_unterminated_comment_or_string_does_not_panic() {
        for s in [
            "/* open", "/* é", "\"open", "'", "a /", "x //", "/*/", "\"\\", "'é",
        ] {
            let _ = of_code(s);
        }
    }
}
