//! The peers file: the built-in one reads and holds the figures of docs/baselines.md's peers
//! table; defects are refused naming the file and what is wrong; the workspace's file overrides
//! the built-in one, and one that cannot be used is a warning.

use super::*;
use crate::testing::{suite, tempdir};

fn built_in() -> PeersFile {
    Peers::built_in().unwrap()
}

/// The built-in file's text with `edit` applied to its JSON.
fn edited(edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut v: serde_json::Value = serde_json::from_str(TEXT).unwrap();
    edit(&mut v);
    serde_json::to_string_pretty(&v).unwrap()
}

fn err(text: &str) -> String {
    PeersFile::parse(Path::new("ws/peers-H200.json"), text)
        .unwrap_err()
        .to_string()
}

/// The figures measured on the H200 on 2026-12-03 (docs/baselines.md, "Peers on the same GPU").
#[test]
fn the_built_in_file_holds_the_measured_figures() {
    let f = built_in();
    assert_eq!(
        (f.version, f.suite.as_str(), f.hardware.as_str()),
        (1, "atrex-bench", "H200")
    );
    assert_eq!(
        (f.gpu.as_str(), f.date.as_str()),
        ("NVIDIA H200", "2026-12-03")
    );
    assert!(f.method.contains("cold L2") && f.method.contains("T_SOL"));
    assert_eq!(
        f.sources["vllm"].label(),
        "vLLM 0.33.0 (torch 2.11 + cu130)"
    );
    assert_eq!(f.sources["torch"].label(), "PyTorch 2.11 (cu130)");
    let figures: Vec<(&str, &str, f64, bool)> = f
        .operators
        .iter()
        .flat_map(|(op, o)| {
            o.peers
                .iter()
                .map(move |p| (op.as_str(), p.name.as_str(), p.s_op, p.passes))
        })
        .collect();
    assert_eq!(
        figures,
        [
            (
                "attention_forward",
                "torch SDPA, cuDNN backend",
                0.324,
                true
            ),
            (
                "attention_forward",
                "torch SDPA, flash backend",
                0.226,
                true
            ),
            (
                "block_scaled_mm",
                "vLLM Triton w8a8 block fp8",
                0.259,
                false
            ),
            ("block_scaled_mm", "cuBLAS fp8 per-tensor", 0.623, false),
            (
                "fp8_blockscale_fused_moe",
                "vLLM Triton fp8 block MoE",
                0.441,
                false
            ),
            ("fused_moe", "vLLM Triton fused_moe", 0.439, true),
            (
                "paged_attention_decode",
                "vLLM Triton paged_attention_2d",
                0.036,
                true
            ),
            (
                "unified_attention",
                "vLLM Triton unified attention",
                0.060,
                true
            ),
        ]
    );
    assert_eq!(
        f.operators["fused_moe"].peers[0].s_range,
        Some([0.26, 0.70])
    );
    assert!(
        f.operators["block_scaled_mm"].peers[0]
            .check
            .as_deref()
            .unwrap()
            .contains("1.3e-4")
    );
    assert!(
        f.operators["fp8_blockscale_fused_moe"].peers[0]
            .check
            .as_deref()
            .unwrap()
            .contains("2.3 %")
    );
    // Written as this build writes it: nothing is dropped on the way.
    let again: PeersFile = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
    assert_eq!(again, f);
}

/// The built-in figures are of the suite as it is: every operator is the suite's and was
/// measured on as many shapes as it has.
#[test]
fn the_built_in_file_fits_the_suite() {
    let p = Peers {
        file: built_in(),
        origin: NAME.into(),
    };
    assert_eq!(p.judge(suite()), Vec::<String>::new());
    for op in p.file.operators.keys() {
        assert_eq!(
            p.stale(suite(), op),
            None,
            "{op}: the suite's shapes changed since the peers were measured: measure them again"
        );
    }
}

#[test]
fn defects_are_refused_naming_the_file_and_what() {
    let cases: Vec<(String, &str)> = vec![
        ("{ not json".into(), "ws/peers-H200.json: not a peers file"),
        (
            edited(|v| v["operators"]["fused_moe"]["peers"][0]["source"] = "sglang".into()),
            "fused_moe, peer `vLLM Triton fused_moe`: source `sglang` is not among `sources` (cublas, torch, vllm)",
        ),
        (
            edited(|v| v["operators"]["fused_moe"]["peers"][0]["s_op"] = 1.5.into()),
            "s_op 1.5 is not an S (0 to 1)",
        ),
        (
            edited(|v| v["operators"]["fused_moe"]["peers"][0]["s_op"] = 0.8.into()),
            "s_op 0.8 outside s_range [0.26, 0.7]",
        ),
        (
            edited(|v| {
                v["operators"]["block_scaled_mm"]["peers"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("check");
            }),
            "block_scaled_mm, peer `vLLM Triton w8a8 block fp8`: fails the check (`passes` false) without saying why (`check`)",
        ),
        (
            edited(|v| {
                v["operators"]["fused_moe"]["peers"][0]["per_shape"] = serde_json::json!({"3": 0.9})
            }),
            "shape 3's S 0.9 outside s_range [0.26, 0.7]",
        ),
        (
            edited(|v| v["date"] = "3 Dec 2026".into()),
            "date `3 Dec 2026` is not YYYY-MM-DD",
        ),
        (
            edited(|v| v["operators"]["fused_moe"]["peers"][0]["pases"] = true.into()),
            "unknown field `pases`",
        ),
        (
            edited(|v| {
                v["operators"]["fused_moe"]["peers"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("passes");
            }),
            "missing field `passes`",
        ),
        (
            edited(|v| v["version"] = 2.into()),
            "ws/peers-H200.json: format version 2, newer than this atrex-tui reads (1): update atrex-tui",
        ),
    ];
    for (text, want) in cases {
        let e = err(&text);
        assert!(e.starts_with("ws/peers-H200.json: "), "{e}");
        assert!(e.contains(want), "{e}\n  wanted: {want}");
    }
    // A newer version is refused as such even when its content is of another shape.
    assert!(err(r#"{"version": 7, "peers": "elsewhere"}"#).contains("format version 7"));
    // A syntax error says where.
    assert!(err("{\n  \"version\": 1,\n  oops\n}").contains("line 3"));
}

#[test]
fn what_does_not_fit_the_suite_is_judged_when_compared() {
    let text = edited(|v| {
        let ops = v["operators"].as_object_mut().unwrap();
        let fm = ops["fused_moe"].clone();
        ops.insert("not_an_op".into(), fm);
        ops["fused_moe"]["peers"][0]["per_shape"] = serde_json::json!({"0": 0.3, "99": 0.4});
        ops["unified_attention"]["shapes"] = 24.into();
    });
    let p = Peers {
        file: PeersFile::parse(Path::new("x.json"), &text).unwrap(),
        origin: "x.json".into(),
    };
    assert_eq!(
        p.judge(suite()),
        [
            "x.json: fused_moe, peer `vLLM Triton fused_moe`: shape 99 is not in the suite",
            "x.json: `not_an_op` is not an operator of the suite (its peers are not shown)",
        ]
    );
    assert_eq!(
        p.stale(suite(), "unified_attention").as_deref(),
        Some("measured on 24 shapes; the suite has 25")
    );
    assert_eq!(
        p.stale(suite(), "rms_norm"),
        None,
        "no peers: nothing stale"
    );
}

#[test]
fn the_workspace_file_overrides_the_built_in_one() {
    let ws = tempdir("peers-ws");
    // None of its own: the built-in file on the H200, nothing on another profile.
    let (p, w) = load(&ws, suite(), "H200");
    assert_eq!((p.unwrap().origin.as_str(), w.len()), (NAME, 0));
    let (p, w) = load(&ws, suite(), "H100_SXM");
    assert!(p.is_none() && w.is_empty(), "{w:?}");

    // Its own, for the H200 and for another profile.
    let file = workspace_file(&ws, "H200");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(
        &file,
        edited(|v| v["operators"]["fused_moe"]["peers"][0]["s_op"] = 0.5.into()),
    )
    .unwrap();
    let (p, w) = load(&ws, suite(), "H200");
    let p = p.unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(p.origin, file.display().to_string());
    assert_eq!(p.file.operators["fused_moe"].peers[0].s_op, 0.5);
    let h100 = workspace_file(&ws, "H100_SXM");
    std::fs::write(&h100, edited(|v| v["hardware"] = "H100_SXM".into())).unwrap();
    let (p, w) = load(&ws, suite(), "H100_SXM");
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(p.unwrap().file.hardware, "H100_SXM");

    // One that cannot be used: a warning naming it, and the built-in figures instead.
    std::fs::write(&file, "{ corrupt").unwrap();
    let (p, w) = load(&ws, suite(), "H200");
    assert_eq!(p.unwrap().origin, NAME);
    assert!(
        w[0].starts_with(&format!("{}: not a peers file", file.display())),
        "{w:?}"
    );
    assert!(w[1].contains("the peers shown are those of"), "{w:?}");
    // Of another profile or suite: said, not shown.
    std::fs::write(&h100, TEXT).unwrap();
    let (p, w) = load(&ws, suite(), "H100_SXM");
    assert!(p.is_none());
    assert!(
        w[0].contains("peers on the profile `H200`, not `H100_SXM`"),
        "{w:?}"
    );
    std::fs::write(&file, edited(|v| v["suite"] = "mine".into())).unwrap();
    let (_, w) = load(&ws, suite(), "H200");
    assert!(
        w[0].contains("peers of the suite `mine`, not `atrex-bench`"),
        "{w:?}"
    );
    std::fs::remove_dir_all(&ws).ok();
}

/// docs/baselines.md's peers table states the file's figures: each peer, by name and S_op, in
/// its operator's row.
#[test]
fn the_baselines_peers_table_states_the_files_figures() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/baselines.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find("## Peers on the same GPU").expect("the section");
    let section = &text[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let f = built_in();
    assert!(section.contains(&f.date), "dated {}", f.date);
    for (op, o) in &f.operators {
        let row = section
            .lines()
            .find(|l| l.starts_with(&format!("| {op} |")))
            .unwrap_or_else(|| panic!("docs/baselines.md: no row for {op}"));
        for p in &o.peers {
            let figure = format!("{} {:.3}", p.name, p.s_op);
            assert!(
                row.contains(&figure),
                "docs/baselines.md, {op}: `{figure}` not in {row}"
            );
        }
    }
}
