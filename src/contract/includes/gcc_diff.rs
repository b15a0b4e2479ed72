//! The lexer against gcc's preprocessor: hostile sources built from lexing tricks, each naming
//! headers that exist; every header `g++ -E -H` includes must be one the scan finds, and a
//! source that makes gcc include a header outside the allowed folder must be refused.

use super::tests::tempdir;
use super::*;

/// Spellings of `#include`.
const DIRECTIVES: &[&str] = &[
    "#include",
    "%:include",
    "# include",
    "#/**/include",
    "#inc\\\nlude",
    "#\\\ninclude",
    "%\\\n:include",
    "#\\ \ninclude",
    "#  /* a\n b */ include",
    "\t#include",
    "#in\\\nc\\\nlude",
    "%: /**/ include",
];

/// Fragments: `{D}` a directive spelling, `{H}` and `{G}` header names as written (`"…"` or
/// `<…>`), `{A}` a header name in angle brackets, `{n}` a number for unique identifiers.
const FRAGMENTS: &[&str] = &[
    "{D} {H}\n",
    "const char* r{n} = R\"x(\n{D} {H}\n)x\";\n",
    "const char* r{n} = R\"(\" /* )\";\n{D} {H}\n// */\n",
    "auto r{n} = R\"d(\\\n)d\\\n\"\n{D} {H}\n)d\";\n",
    "int n{n} = 1'2; const char* s{n} = \"a'b /*\";\n{D} {H}\n// */\n",
    "int m{n} = 0x1'ff'u; /* ' */\n{D} {H}\n",
    "#define F{n}(x) x\nF{n}(1,\n{D} {H}\n)\n",
    "#if 0\n{D} {H}\n#endif\n",
    "const char* s{n} = \"{D} {A}\";\n",
    "char c{n} = '\"'; /* \" */\n{D} {H}\n",
    "int \\u00e9{n} = 1; /* \\u0041 */\n{D} {H}\n",
    "/* {D} {H}\n*/ {D} {G}\n",
    "// c \\\n{D} {H}\n",
    "// c \\ \n{D} {H}\n",
    "auto w{n} = LR\"q(\n{D} {H}\n)q\"; auto u{n} = u8R\"(\n{D} {G}\n)\";\n",
    "auto z{n} = xR\"(\";\n{D} {H}\n// )\"\n",
    "#if __has_include({H})\n{D} {G}\n#endif\n",
    "const char* t{n} = \"abc\\\n{D} {A}\";\n",
    "#define EMPTY{n}\nEMPTY{n} {D} {H}\n",
    "int k{n} = 1'''2 ' /*\n{D} {H}\n// */\n",
    "#if 0\nR\"x(\n#endif\n{D} {H}\n)x\"\n#endif\n",
    "{D} {H}\r\n",
    "{D} {A} /* \n{D} {G}\n */\n",
    "#define P{n} %:%:\n%:%:include {H}\n",
    "char q{n} = '\\''; const char* p{n} = \"\\\"/*\";\n{D} {H}\n//*/\n",
    "#define S{n}(x) #x\nconst char* m{n} = S{n}(\n{D} {H}\n);\n",
    "int x{n} = 1'2'3; // it's\n{D} {H}\n",
    "auto y{n} = u8'a' + U'\\'' + L'\"'; /*\n*/ {D} {H}\n",
    "template <int N> struct A{n} {}; A{n}<1'0> a{n};\n{D} {H}\n",
    "<%:include {H} %>\n",
    "const char* v{n} = R\\\n\"x(\n{D} {H}\n)x\";\n",
    "int j{n} = 1'2 /* '\n{D} {H}\n// */;\n",
    "const char* e{n} = \"\\\\\"; /*\n{D} {H}\n*/\n",
];

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// A header name as written: mostly an allowed one (`evil_K.h` in the include folder), else
/// one outside it (`abs_K.h`) named by an absolute path or through `..`.
fn header(rng: &mut Rng, root: &Path, k: usize, angled: bool) -> String {
    let name = match rng.below(10) {
        0 => format!("{}/abs_{k}.h", root.display()),
        1 => format!("../abs_{k}.h"),
        _ => format!("evil_{k}.h"),
    };
    if angled || rng.below(2) == 0 {
        format!("<{name}>")
    } else {
        format!("\"{name}\"")
    }
}

fn source(rng: &mut Rng, root: &Path) -> String {
    let mut src = String::new();
    for n in 0..3 + rng.below(4) {
        let d = DIRECTIVES[rng.below(DIRECTIVES.len())];
        let frag = FRAGMENTS[rng.below(FRAGMENTS.len())]
            .replace("{D}", d)
            .replace("{H}", &header(rng, root, n, false))
            .replace("{G}", &header(rng, root, n + 8, false))
            .replace("{A}", &header(rng, root, n + 16, true))
            .replace("{n}", &n.to_string());
        src.push_str(&frag);
        if rng.below(3) == 0 {
            src.push_str(&format!("int plain{n} = {n};\n"));
        }
    }
    src
}

/// The file names of the headers gcc includes (`-H` prints them on stderr after dots).
fn gcc_includes(dir: &Path, src: &str) -> Vec<String> {
    let file = dir.join("src/s.cu");
    std::fs::write(&file, src).unwrap();
    let out = std::process::Command::new("g++")
        .args(["-std=c++17", "-E", "-H", "-x", "c++", "-I"])
        .arg(dir.join("inc"))
        .arg(&file)
        .args(["-o", "/dev/null"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| {
            let rest = l.trim_start_matches('.');
            (rest.len() < l.len() && rest.starts_with(' ')).then(|| {
                Path::new(rest.trim())
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
            })?
        })
        .collect()
}

#[test]
fn lexer_finds_every_include_gcc_makes() {
    if std::process::Command::new("g++")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("SKIPPED: g++ not found");
        return;
    }
    let dir = tempdir::Dir::new();
    let root = &dir.0;
    std::fs::create_dir_all(root.join("inc")).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    for k in 0..24 {
        std::fs::write(root.join(format!("inc/evil_{k}.h")), "\n").unwrap();
        std::fs::write(root.join(format!("abs_{k}.h")), "\n").unwrap();
    }
    let allowed = Allowed::new([root.join("inc")]);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut failures, mut accepted, mut gcc_total, mut extra) = (Vec::new(), 0, 0, 0);
    let sources = 300;
    for _ in 0..sources {
        let src = source(&mut rng, root);
        let by_gcc = gcc_includes(root, &src);
        let (found, refused) = findings(&src);
        let names: Vec<String> = found
            .iter()
            .filter_map(|f| match &f.what {
                lexer::What::Include(Some(n))
                | lexer::What::Trailing(n)
                | lexer::What::Probe(_, Some(n)) => Path::new(n)
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        let verdict = check(&src, &allowed);
        gcc_total += by_gcc.len();
        extra += names.iter().filter(|n| !by_gcc.contains(n)).count();
        accepted += usize::from(verdict.is_ok());
        for h in &by_gcc {
            if refused.is_empty() && !names.contains(h) {
                failures.push(format!("gcc includes {h}, the lexer misses it:\n{src}"));
            }
            if h.starts_with("abs_") && verdict.is_ok() {
                failures.push(format!("gcc includes {h} from outside, accepted:\n{src}"));
            }
        }
    }
    println!(
        "{sources} sources: gcc included {gcc_total} headers; the lexer found {extra} more \
         (hidden from gcc), accepted {accepted} sources"
    );
    assert!(
        failures.is_empty(),
        "{} failures; the first:\n{}",
        failures.len(),
        failures.join("\n=====\n")
    );
    assert!(gcc_total > sources, "the corpus includes too little");
    assert!(accepted * 10 > sources, "only {accepted} sources accepted");
}
