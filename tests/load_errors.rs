//! Malformed problem files give errors naming the file, operator, field and line; never a panic.

use atrex_tui::suite::{LoadError, Suite, SuiteSource, parse_problem};
use std::path::PathBuf;

const GOOD: &str = r#"id = "atrex_900"
name = "toy"
dtype = "bf16"
phase = ["prefill"]
importance = 0.5
let = ["T = token_count"]

[params.token_count]
type = "int"

[[inputs]]
name = "x"
dtype = "bf16"
shape = ["T", "4"]
gen = "normal(1)"

[[outputs]]
name = "out"
dtype = "bf16"
shape = ["T", "4"]

[work]
flops = { bf16 = "3*T" }
read_bytes = "8*T"
write_bytes = "8*T"

[tolerance]
atol = 0.0
rtol = 0.01

[[shapes]]
id = 0
params = { token_count = 3 }

[[shapes]]
id = 1
params = { token_count = 5 }
"#;

fn parse(text: &str) -> Result<(), LoadError> {
    parse_problem("problems/toy/problem.toml", "toy", text).map(|_| ())
}

fn expect_err(text: &str, field: &str, line: usize, needle: &str) {
    let e = parse(text).expect_err("should fail");
    let shown = e.to_string();
    assert_eq!(e.file, "problems/toy/problem.toml", "{shown}");
    assert_eq!(e.operator.as_deref(), Some("toy"), "{shown}");
    assert_eq!(e.field.as_deref(), Some(field), "{shown}");
    assert_eq!(e.line, Some(line), "{shown}");
    assert!(shown.contains(needle), "`{needle}` not in: {shown}");
    assert!(shown.starts_with("problems/toy/problem.toml:"), "{shown}");
}

#[test]
fn the_good_file_loads() {
    parse(GOOD).unwrap();
}

#[test]
fn missing_field() {
    let t = GOOD.replace("dtype = \"bf16\"\nphase", "phase");
    let e = parse(&t).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("dtype"), "{e}");
    assert!(e.to_string().contains("missing field"), "{e}");
    assert_eq!(e.operator.as_deref(), Some("toy"));
}

#[test]
fn bad_expression() {
    expect_err(
        &GOOD.replace("read_bytes = \"8*T\"", "read_bytes = \"8*(T\""),
        "work.read_bytes",
        24,
        "bad expression",
    );
    expect_err(
        &GOOD.replace("flops = { bf16 = \"3*T\" }", "flops = { bf16 = \"3*Q\" }"),
        "work.flops.bf16",
        23,
        "unknown name `Q`",
    );
    expect_err(
        &GOOD.replace("let = [\"T = token_count\"]", "let = [\"T token_count\"]"),
        "let",
        6,
        "NAME = expression",
    );
}

#[test]
fn unknown_dtype() {
    expect_err(
        &GOOD.replace(
            "name = \"x\"\ndtype = \"bf16\"",
            "name = \"x\"\ndtype = \"bf17\"",
        ),
        "inputs.x.dtype",
        13,
        "unknown dtype `bf17`",
    );
    expect_err(
        &GOOD.replace("flops = { bf16 = \"3*T\" }", "flops = { fp4 = \"3*T\" }"),
        "work.flops.fp4",
        23,
        "unknown dtype `fp4`",
    );
}

#[test]
fn shape_missing_a_parameter() {
    let t = GOOD.replace(
        "id = 1\nparams = { token_count = 5 }",
        "id = 1\nparams = { }",
    );
    expect_err(
        &t,
        "shapes.params.token_count",
        35,
        "shape 1 is missing parameter `token_count`",
    );
    let t = GOOD.replace(
        "id = 1\nparams = { token_count = 5 }",
        "id = 1\nparams = { token_count = 5, tokens = 2 }",
    );
    expect_err(&t, "shapes.params.tokens", 35, "not declared");
}

#[test]
fn duplicate_ids() {
    expect_err(
        &GOOD.replace("id = 1\n", "id = 0\n"),
        "shapes.id",
        35,
        "duplicate shape id 0",
    );
    let t = GOOD.replace("[[outputs]]\nname = \"out\"", "[[outputs]]\nname = \"x\"");
    let e = parse(&t).unwrap_err();
    assert!(e.to_string().contains("name of an input"), "{e}");
}

fn temp_suite(files: &[(&str, &str)]) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "atrex-load-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    for (rel, text) in files {
        let p = d.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    d
}

const HW: &str = "name = \"T\"\nkey = \"T\"\nsm_count = 1\nl2_bytes = 1\nhbm_bytes_per_s = 1e12\n[peak_flops]\nbf16 = 1e12\n";

#[test]
fn duplicate_operator_ids_and_names_across_the_suite() {
    let other = GOOD.replace("name = \"toy\"", "name = \"toy2\"");
    let d = temp_suite(&[
        (
            "suite.toml",
            "name = \"s\"\noperators = [\"toy\", \"toy2\"]\n",
        ),
        ("toy/problem.toml", GOOD),
        ("toy2/problem.toml", &other),
        ("hardware/T.toml", HW),
    ]);
    let e = Suite::load(SuiteSource::Dir(d.clone())).unwrap_err();
    assert!(
        e.to_string().contains("duplicate operator id atrex_900"),
        "{e}"
    );
    let d = temp_suite(&[
        (
            "suite.toml",
            "name = \"s\"\noperators = [\n  \"toy\",\n  \"toy\",\n]\n",
        ),
        ("toy/problem.toml", GOOD),
        ("hardware/T.toml", HW),
    ]);
    let e = Suite::load(SuiteSource::Dir(d)).unwrap_err();
    assert_eq!(e.line, Some(4), "{e}");
    assert!(e.to_string().contains("duplicate operator"), "{e}");
}

#[test]
fn hardware_errors() {
    // A W dtype without a peak in a profile.
    let d = temp_suite(&[
        ("suite.toml", "name = \"s\"\noperators = [\"toy\"]\n"),
        (
            "toy/problem.toml",
            &GOOD.replace(
                "flops = { bf16 = \"3*T\" }",
                "flops = { fp8_e4m3 = \"3*T\" }",
            ),
        ),
        ("hardware/T.toml", HW),
    ]);
    let e = Suite::load(SuiteSource::Dir(d)).unwrap_err();
    assert!(
        e.to_string().contains("no peak for dtype `fp8_e4m3`"),
        "{e}"
    );
    // A bad profile names its field.
    let d = temp_suite(&[
        ("suite.toml", "name = \"s\"\noperators = [\"toy\"]\n"),
        ("toy/problem.toml", GOOD),
        ("hardware/T.toml", &HW.replace("bf16 = 1e12", "bf16 = -1.0")),
    ]);
    let e = Suite::load(SuiteSource::Dir(d)).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("peak_flops.bf16"), "{e}");
    assert!(e.file.ends_with("hardware/T.toml"));
    // Unknown hardware on lookup.
    let d = temp_suite(&[
        ("suite.toml", "name = \"s\"\noperators = [\"toy\"]\n"),
        ("toy/problem.toml", GOOD),
        ("hardware/T.toml", HW),
    ]);
    let s = Suite::load(SuiteSource::Dir(d)).unwrap();
    assert!(
        s.hardware("H999")
            .unwrap_err()
            .to_string()
            .contains("unknown hardware `H999` (known: T)")
    );
}

#[test]
fn garbage_never_panics() {
    let mut rng = 0x1234_5678_u64;
    for i in 0..300 {
        let mut bytes = GOOD.as_bytes().to_vec();
        for _ in 0..(1 + i % 5) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let pos = (rng as usize) % bytes.len();
            bytes[pos] = b"=[]{}\"0x,#\n*"[(rng >> 40) as usize % 12];
        }
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse(&text);
        let cut = (rng as usize) % GOOD.len();
        let _ = parse(&GOOD[..cut]);
    }
}

/// A problem file that exists but cannot be used says what is wrong with it, not "missing".
#[test]
fn unreadable_problem_files_say_what_is_wrong() {
    let base = [
        ("suite.toml", "name = \"s\"\noperators = [\"toy\"]\n"),
        ("hardware/T.toml", HW),
    ];
    // Invalid UTF-8 on line 3.
    let d = temp_suite(&base);
    let mut bytes = GOOD.as_bytes().to_vec();
    let at = GOOD.match_indices('\n').nth(1).unwrap().0 + 3;
    bytes[at] = 0xff;
    std::fs::create_dir_all(d.join("toy")).unwrap();
    std::fs::write(d.join("toy/problem.toml"), &bytes).unwrap();
    let e = Suite::load(SuiteSource::Dir(d)).unwrap_err().to_string();
    assert!(e.contains("not UTF-8 text") && e.contains("line 3"), "{e}");
    assert!(!e.contains("missing"), "{e}");
    // Random bytes.
    let d = temp_suite(&base);
    std::fs::create_dir_all(d.join("toy")).unwrap();
    let junk: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    std::fs::write(d.join("toy/problem.toml"), &junk).unwrap();
    let e = Suite::load(SuiteSource::Dir(d)).unwrap_err().to_string();
    assert!(e.contains("binary file"), "{e}");
    // A folder in its place.
    let d = temp_suite(&base);
    std::fs::create_dir_all(d.join("toy/problem.toml")).unwrap();
    let e = Suite::load(SuiteSource::Dir(d)).unwrap_err().to_string();
    assert!(
        e.contains("is a folder, not a file") && e.contains("toy"),
        "{e}"
    );
    // An inputs.cu that is not text.
    let d = temp_suite(&[base[0], base[1], ("toy/problem.toml", GOOD)]);
    std::fs::write(d.join("toy/inputs.cu"), [0u8, 0xfe, 0xff]).unwrap();
    let e = Suite::load(SuiteSource::Dir(d)).unwrap_err().to_string();
    assert!(e.contains("inputs.cu") && e.contains("not UTF-8"), "{e}");
}
