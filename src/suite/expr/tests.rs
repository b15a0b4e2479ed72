//! Unit tests of the expression language.

use super::parse::MAX_DEPTH;
use super::*;

fn ev(s: &str) -> Value {
    let mut env = Env::new();
    env.insert("T".into(), Value::Int(7));
    env.insert("L".into(), Value::List(vec![Value::Int(3), Value::Int(5)]));
    eval_str(s, &env).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn arithmetic_is_exact_on_integers() {
    assert_eq!(ev("3*T*1024 + T"), Value::Int(3 * 7 * 1024 + 7));
    assert_eq!(ev("2 ** 62 * 4"), Value::Int(1i128 << 64));
    assert_eq!(ev("T / 7"), Value::Int(1));
    assert_eq!(ev("T / 2"), Value::Float(3.5));
    assert_eq!(ev("T // 2"), Value::Int(3));
    assert_eq!(ev("-T // 2"), Value::Int(-4));
    assert_eq!(ev("T % 4"), Value::Int(3));
    assert_eq!(ev("2·T − 1"), Value::Int(13));
    assert_eq!(ev("2 ^ 3 ^ 2"), Value::Int(512));
}

#[test]
fn lists_broadcast() {
    assert_eq!(ev("sum(L ** 2)"), Value::Int(34));
    assert_eq!(ev("sum(L * (L + 1))"), Value::Int(12 + 30));
    assert_eq!(ev("sum(ceil(L / 2))"), Value::Int(2 + 3));
    assert_eq!(ev("len(L) + L[1] + L[-1]"), Value::Int(12));
    assert_eq!(ev("max(L)"), Value::Int(5));
    assert_eq!(ev("min(T, 4, 9)"), Value::Int(4));
    assert_eq!(ev("numel([2, 3, T])"), Value::Int(42));
}

#[test]
fn floats_and_functions() {
    assert_eq!(ev("ceil(8 * (1 - (1 - 2/8) ** T))"), Value::Int(7));
    assert_eq!(ev("1e-6 * 2"), Value::Float(2e-6));
    assert_eq!(ev("sqrt(16)"), Value::Float(4.0));
}

#[test]
fn comparisons_and_if() {
    assert_eq!(ev("T <= 7"), Value::Bool(true));
    assert_eq!(ev("T > 7"), Value::Bool(false));
    assert_eq!(ev("if(T <= 1024, 4, 1) * 32"), Value::Int(128));
    assert_eq!(ev("if(T == 8, 1, 2 + 1)"), Value::Int(3));
    assert_eq!(ev("1 + 2 < 2 * 2"), Value::Bool(true));
    let mut env = Env::new();
    env.insert("dtype".into(), Value::Str("fp16".into()));
    assert_eq!(
        eval_str("if(dtype == 'fp16', 1, 0)", &env).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        eval_str("dtype != \"bf16\"", &env).unwrap(),
        Value::Bool(true)
    );
    assert!(parse("'open").is_err());
    assert!(parse("T = 3").is_err());
}

#[test]
fn errors_name_the_column() {
    let env = Env::new();
    let e = eval_str("2 * foo", &env).unwrap_err();
    assert_eq!(e.col, 4);
    assert!(e.msg.contains("unknown name `foo`"), "{}", e.msg);
    let e = parse("2 * (3 + ").unwrap_err();
    assert!(e.msg.contains("expected a value"), "{}", e.msg);
    let e = parse("2 $ 3").unwrap_err();
    assert_eq!(e.col, 2);
    let e = parse("2 3").unwrap_err();
    assert!(e.msg.contains("unexpected"), "{}", e.msg);
    let e = eval_str("bogus(1)", &env).unwrap_err();
    assert!(e.msg.contains("unknown function"), "{}", e.msg);
    let e = eval_str("1 / 0", &env).unwrap_err();
    assert!(e.msg.contains("division by zero"));
    assert!(parse("").is_err());
}

fn ev_err(s: &str) -> ExprError {
    let mut env = Env::new();
    env.insert("T".into(), Value::Int(7));
    eval_str(s, &env).unwrap_err()
}

#[test]
fn nesting_and_length_are_limited() {
    let parens = |n: usize| format!("{}T{}", "(".repeat(n), ")".repeat(n));
    assert_eq!(ev(&parens(MAX_DEPTH - 1)), Value::Int(7));
    assert!(
        ev_err(&parens(MAX_DEPTH))
            .msg
            .contains("nested more than 64")
    );
    // Far past the limit (a recursive parser would overflow its stack): refused by length.
    let e = ev_err(&parens(20_000));
    assert!(e.msg.contains("40001 characters; at most 4096"), "{e}");
    // Each kind of nesting counts: signs, exponents, calls, lists, indices, operator chains.
    for deep in [
        "-".repeat(100) + "T",
        vec!["2"; 100].join(" ** "),
        "ceil(".repeat(100) + "T" + &")".repeat(100),
        "[".repeat(100) + "T" + &"]".repeat(100),
        "[1]".to_string() + &"[0]".repeat(100),
        vec!["T"; 100].join(" + "),
        vec!["T"; 100].join(" * "),
    ] {
        let e = ev_err(&deep);
        assert!(e.msg.contains("more than 64 levels"), "{deep}: {e}");
    }
    assert_eq!(ev(&vec!["1"; 64].join(" + ")), Value::Int(64));
    assert_eq!(ev(&("-".repeat(62) + "T")), Value::Int(7));
    let long = format!("T{}", " ".repeat(MAX_LEN - 1));
    assert_eq!(ev(&long), Value::Int(7));
    assert!(ev_err(&format!("{long} ")).msg.contains("at most 4096"));
}

#[test]
fn integer_overflow_and_non_finite_integers_are_errors() {
    let min = "(-(2 ** 126) * 2)";
    for (src, why) in [
        (format!("-{min}"), "overflow in `-`"),
        (format!("{min} // -1"), "overflow in `//`"),
        (format!("{min} % -1"), "overflow in `%`"),
        (format!("{min} / -1"), "overflow in `/`"),
        ("2 ** 127".to_string(), "overflow in `**`"),
        ("ceil(sqrt(-1))".to_string(), "`ceil` gives NaN"),
        ("floor(exp(1000))".to_string(), "`floor` gives inf"),
        ("int(-exp(1000))".to_string(), "`int` gives -inf"),
        ("int(1e39)".to_string(), "not an integer"),
        ("sqrt(-1) // 1".to_string(), "`//` gives NaN"),
    ] {
        let e = ev_err(&src);
        assert!(e.msg.contains(why), "{src}: {e}");
    }
    assert_eq!(
        ev(&format!("{min} // 1")),
        Value::Int(i128::MIN),
        "the extreme itself is a value"
    );
    assert_eq!(ev("int(-2.5)"), Value::Int(-2));
}
