use super::*;

fn axis(name: &str, values: &[&str]) -> Axis {
    Axis {
        name: name.into(),
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

/// A shape result with S = `s` (None: no timing), passed or not.
fn result(shape: u32, s: Option<f64>, pass: bool) -> ShapeResult {
    ShapeResult {
        shape,
        verdict: if pass {
            Verdict::Pass
        } else {
            Verdict::Incorrect
        },
        checks: vec![],
        bench_ok: pass,
        strict_ok: pass,
        seeds_checked: 1,
        timing: None,
        sol_ms: 0.01,
        s,
        message: None,
        device: None,
        worker: None,
    }
}

#[test]
fn an_axis_is_a_name_and_two_different_values_or_more() {
    assert_eq!(
        parse_axis(" BN2 = 128, 256 ").unwrap(),
        axis("BN2", &["128", "256"])
    );
    assert_eq!(
        parse_axis("MODE=\"a\",\"b\",\"c\"").unwrap(),
        axis("MODE", &["\"a\"", "\"b\"", "\"c\""])
    );
    for bad in ["BN2", "BN2=128", "=1,2", "BN2=1,,2", "BN2=1,1", "BN2=1,"] {
        assert_eq!(
            parse_axis(bad),
            Err(SweepError::NotAnAxis(bad.into())),
            "{bad}"
        );
    }
    assert!(
        parse_axis("BN2")
            .unwrap_err()
            .to_string()
            .contains("expected KEY=V1,V2,…")
    );
}

#[test]
fn combinations_are_the_product_with_the_first_axis_slowest() {
    let c = combinations(&[axis("A", &["1", "2"]), axis("B", &["x", "y", "z"])], &[]).unwrap();
    let labels: Vec<String> = c.iter().map(label).collect();
    assert_eq!(labels, ["1,x", "1,y", "1,z", "2,x", "2,y", "2,z"]);
    assert_eq!(define_args(&c[4]), ["A=2", "B=y"]);
}

#[test]
fn a_sweep_refuses_a_name_twice_a_defined_name_and_too_many_runs() {
    assert_eq!(
        combinations(&[axis("A", &["1", "2"]), axis("A", &["3", "4"])], &[]),
        Err(SweepError::Twice("A".into()))
    );
    assert_eq!(
        combinations(&[axis("A", &["1", "2"])], &["A".into()]),
        Err(SweepError::AlsoDefined("A".into()))
    );
    let eight: Vec<String> = (0..8).map(|v| v.to_string()).collect();
    let wide = |n: &str| Axis {
        name: n.into(),
        values: eight.clone(),
    };
    assert_eq!(
        combinations(&[wide("A"), wide("B")], &[]).unwrap().len(),
        64
    );
    assert_eq!(
        combinations(&[wide("A"), wide("B"), axis("C", &["1", "2"])], &[]),
        Err(SweepError::TooMany(128))
    );
}

#[test]
fn each_shape_takes_its_highest_passing_s() {
    let a = [
        result(0, Some(0.4), true),
        result(1, Some(0.3), true),
        result(2, Some(0.9), false),
    ];
    let b = [
        result(0, Some(0.5), true),
        result(1, Some(0.3), true),
        result(2, None, false),
    ];
    let best = best_per_shape(&[&a, &b], &[0, 1, 2, 3]);
    let picks: Vec<(u32, Option<usize>, Option<f64>)> = best
        .shapes
        .iter()
        .map(|b| (b.shape, b.combination, b.s))
        .collect();
    // Shape 0: b is higher; 1: a tie goes to the first; 2: a failed shape's S does not count;
    // 3: no result at all.
    assert_eq!(
        picks,
        [
            (0, Some(1), Some(0.5)),
            (1, Some(0), Some(0.3)),
            (2, None, None),
            (3, None, None)
        ]
    );
    // The median of 0.5, 0.3, 0 and 0, as S_op counts shapes that did not pass.
    assert!((best.s_op - 0.15).abs() < 1e-12, "{}", best.s_op);
    let all_pass = best_per_shape(&[&a, &b], &[0, 1]);
    assert!((all_pass.s_op - 0.4).abs() < 1e-12, "{}", all_pass.s_op);
}
