use super::*;

pub(super) fn toolkit() -> (tempdir::Dir, Allowed) {
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

pub(super) mod tempdir {
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
            r.to_string().contains("only the CUDA toolkit's headers"),
            "{}",
            r
        );
        assert!(!r.to_string().contains("root:x"), "{r}");
    }
}

/// Refused on the given line, with the rule's message and nothing of the file.
fn refused_on(src: &str, a: &Allowed, line: usize) {
    let r = check(src, a).expect_err(src);
    assert_eq!(r.line, line, "{src:?}: {r:?}");
    assert!(
        r.to_string().contains("only the CUDA toolkit's headers"),
        "{}",
        r
    );
    assert!(!r.to_string().contains("root:x"), "{r}");
}

#[test]
fn hostile_lexing_tricks_are_refused() {
    let (_d, a) = toolkit();
    let cases: &[(&str, usize)] = &[
        // A raw string holding `" /*`: a line scan sees a comment hide the include.
        (
            "const char* s = R\"(\" /* )\";\n#include \"/etc/passwd\"\n// */\n",
            2,
        ),
        // A digit separator read as a character literal makes `"a'b /*"` open a comment.
        (
            "int n = 1'2; const char* s = \"a'b /*\";\n#include \"/etc/passwd\"\n// */\n",
            2,
        ),
        // An include among a macro's arguments is still an include.
        ("#define F(x) x\nF(1,\n#include \"/etc/passwd\"\n)\n", 3),
        // A splice with trailing spaces, read both ways.
        ("#\\  \ninclude \"/etc/passwd\"\n", 1),
        ("// note \\ \n#include \"/etc/passwd\"\n", 2),
        ("%\\\n:include </etc/passwd>\n", 1),
        ("#\t/* a\n b */ include \"/etc/passwd\"\n", 1),
        ("\u{feff}#include \"/etc/passwd\"\n", 1),
        ("#include \"/etc/passwd\"\r\n", 1),
        ("int x;\r#include \"/etc/passwd\"\n", 1),
        ("#\\u0069nclude \"/etc/passwd\"\n", 1),
        ("int a;\nconst char* s = R\"x(\n#include <cuda_bf16.h>\n", 2),
        (
            "const char* s = R\"abcdefghijklmnopq(x)abcdefghijklmnopq\";\n",
            1,
        ),
        ("int a; /* never closed\n#include <cuda_bf16.h>\n", 1),
        ("/* ??/ */\n", 1),
        ("const char* q = \"??(\";\n", 1),
        ("#if __has_include_next(\"/etc/passwd\")\n#endif\n", 1),
        ("#define H(x) __has_include(x)\n", 1),
        ("#import <cuda_bf16.h>\n", 1),
        ("int a;\n#include <cuda_bf16.h> junk\n", 2),
    ];
    for (src, line) in cases {
        refused_on(src, &a, *line);
    }
}

#[test]
fn harmless_lexing_tricks_pass() {
    let (_d, a) = toolkit();
    let ok = [
        // Directives faked inside raw strings, with prefixes and delimiters.
        "const char* s = R\"(\n#include \"/etc/passwd\"\n)\";\n",
        "auto w = LR\"q(\n#include </etc/shadow>\n)q\"; auto u = u8R\"(#embed \"x\")\";\n",
        // Digit separators and character literals.
        "int n = 1'000'000; long m = 0x1'ff'ffu; char c = '\"'; char d = '\\'';\n",
        // Splices inside a raw string are kept: `)d\<newline>"` does not end it.
        "auto r = R\"d(\\\n)d\\\n\"\n#include \"/etc/passwd\"\n)d\";\n",
        // Asking whether the probe exists is no probe.
        "#ifdef __has_include\n#endif\n#if defined(__has_include) && defined __has_include_next\n#endif\n",
        // `%:%:` is `##`, `<%` is `{`: neither starts a directive.
        "#define CAT(a, b) a %:%: b\nCAT(x, y) %:%: include \"/etc/passwd\"\n",
        "void f() <% %> int g<%:include \"/etc/passwd\" %>\n",
        // Universal characters in identifiers; trigraph-like text in comments and raw strings.
        "int caf\\u00e9 = 1; int na\u{ef}ve = 2; // what??!\nauto t = R\"(??=)\";\n",
        // Comments and splices around a permitted include.
        "#/* a */in\\\nclude /* b\n c */ <cuda_bf16.h> // d\n",
        "\u{feff}#include <cuda_bf16.h>\r\n#include \"cuda/std/cstdint\"\r\n",
        "const char* s = \"a\\\n#include </etc/passwd>\";\n",
    ];
    for src in ok {
        assert_eq!(check(src, &a), Ok(()), "{src:?}");
    }
}

#[test]
fn every_dialect_is_scanned() {
    // Each reading hides the include from another one: the union finds it.
    let (_d, a) = toolkit();
    // gcc reads `1'''2` as one number, the standard as `1`, `''`, `'2 '`.
    refused_on(
        "int k = 1'''2 ' /*\n#include \"/etc/passwd\"\n// */\n",
        &a,
        2,
    );
    // Before C++14 a `'` in a number starts a character literal.
    refused_on(
        "int k = 1'2; auto s = \"'\"; /*\n#include \"/etc/passwd\"\n// */\n",
        &a,
        2,
    );
    let found = |src: &str| findings(src).0.len();
    assert_eq!(found("#include <cuda_bf16.h>\n"), 1);
    assert_eq!(found("int x; // #include \"/etc/passwd\"\n"), 0);
}

#[test]
fn shipped_kernels_are_read_without_refusal() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seen = 0;
    for dir in ["problems", "knowledge/templates", "tests/kernels"] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                if !p.extension().is_some_and(|x| x == "cu" || x == "cuh") {
                    continue;
                }
                let src = std::fs::read_to_string(&p).unwrap();
                let (found, refused) = findings(&src);
                assert_eq!(refused, vec![], "{}", p.display());
                let hostile = p.to_string_lossy().contains("hostile");
                for f in found {
                    let ok = match &f.what {
                        lexer::What::Include(Some(n)) | lexer::What::Probe(_, Some(n)) => {
                            !n.starts_with('/') && !n.contains("..")
                        }
                        _ => false,
                    };
                    assert!(ok || hostile, "{}:{}: {:?}", p.display(), f.line, f.what);
                }
                seen += 1;
            }
        }
    }
    assert!(seen > 20, "only {seen} kernels found");
}
