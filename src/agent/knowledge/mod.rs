//! The knowledge base (knowledge/, embedded in the binary), in layers: hardware notes, reference
//! cards (the instructions and driver calls Hopper kernels are built from), operator-family
//! cards, technique cards, anti-patterns, one card per suite operator, and kernel templates —
//! each with TOML front matter. Retrieval ranks them by architecture, operator (family and
//! name), measured bottleneck, profiler symptoms and the techniques the incumbent already uses;
//! `related` links documents to each other.
//!
//! Files: this one holds the documents (front matter, kinds, techniques, families) and their
//! loading from the embedded base, where a malformed document is a `DocError` naming its path;
//! `retrieve` ranks them for a query and reads symptoms from measurements.

mod retrieve;

pub use retrieve::{
    Query, related_to_operator, retrieve, score, symptoms_of, symptoms_of_findings,
};

use crate::suite::EMBEDDED_KNOWLEDGE;
use include_dir::Dir;
use serde::Deserialize;

/// Front matter of a document (`+++` TOML `+++` at the top of a .md file, or the
/// `/* atrex:template ... */` comment of a template .cu file).
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Meta {
    pub id: String,
    pub title: String,
    /// One of `KINDS`: hardware | reference | family | technique | anti-pattern | operator |
    /// template.
    pub kind: String,
    /// "hopper", "blackwell", "ada", "ampere", or "any".
    pub architectures: Vec<String>,
    /// Operator families (see `family_of`).
    pub families: Vec<String>,
    /// "memory", "compute", "balanced".
    pub bottlenecks: Vec<String>,
    /// Profiler / measurement symptoms (see `symptoms_of`).
    pub symptoms: Vec<String>,
    /// The optimization category it applies.
    pub category: String,
    pub expected_gain: String,
    pub pitfalls: Vec<String>,
    /// Templates and operator cards: the operator of the suite they are about.
    pub operator: String,
    /// Hardware features and instruction families the document explains (see `TECHNIQUES`);
    /// matched against what the incumbent's source already uses.
    pub techniques: Vec<String>,
    /// Ids of other documents worth reading with this one (every one must exist).
    pub related: Vec<String>,
    /// Hardware notes: the main note of its architecture (always retrieved for it).
    pub primary: bool,
    /// Templates: how the template stands against the operator's baseline (`[measured]`).
    pub measured: Option<Measured>,
}

/// The category of a template kept as a worked example rather than as the best-known kernel.
pub const DEMONSTRATION: &str = "technique demonstration";

/// The kinds of document, each in its own folder of `knowledge/` (the layers of the base).
pub const KINDS: &[(&str, &str)] = &[
    ("hardware", "hardware/"),
    ("reference", "reference/"),
    ("family", "families/"),
    ("technique", "techniques/"),
    ("anti-pattern", "anti-patterns/"),
    ("operator", "operators/"),
    ("template", "templates/"),
];

/// The techniques a document can be about, and the source text that shows a kernel uses one.
pub const TECHNIQUES: &[(&str, &[&str])] = &[
    ("wgmma", &["wgmma."]),
    (
        "tma",
        &["cp.async.bulk", "cp_async_bulk", "__grid_constant__"],
    ),
    ("mbarrier", &["mbarrier.", "mbarrier_", "cuda::barrier"]),
    (
        "cluster",
        &[
            "barrier.cluster",
            "mapa.",
            "%cluster_",
            "this_cluster",
            "__cluster_dims__",
        ],
    ),
    ("setmaxnreg", &["setmaxnreg"]),
    ("warp-specialization", &["setmaxnreg"]),
    (
        "named-barrier",
        &["bar.sync ", "bar.arrive ", "barrier.sync "],
    ),
    ("ldmatrix", &["ldmatrix", "stmatrix"]),
    ("mma-sync", &["mma.sync"]),
    (
        "cp-async",
        &[
            "cp.async.cg",
            "cp.async.ca",
            "cp.async.commit_group",
            "memcpy_async",
        ],
    ),
    ("fp8", &["__nv_fp8", "e4m3", "e5m2", "_to_fp8"]),
    (
        "cccl",
        &[
            "cuda/barrier",
            "cuda/ptx",
            "cuda/pipeline",
            "cuda::",
            "cooperative_groups",
        ],
    ),
];

/// The techniques a kernel source uses (names of `TECHNIQUES`), for retrieval.
pub fn techniques_in(source: &str) -> Vec<String> {
    TECHNIQUES
        .iter()
        .filter(|(_, needles)| needles.iter().any(|n| source.contains(n)))
        .map(|(t, _)| t.to_string())
        .collect()
}

/// A template's measured standing, the `[measured]` table of its header: S_op of the template
/// and of the operator's baseline, measured in the same mode on the same GPU on one date.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Measured {
    /// S_op of the template (absent when `mode` is "not measured").
    pub s_op: Option<f64>,
    /// S_op of the operator's baseline in the same mode.
    pub baseline_s_op: Option<f64>,
    /// The GPU, as the driver names it ("NVIDIA H200").
    pub gpu: String,
    /// YYYY-MM-DD.
    pub date: String,
    /// "full" (5 seeds, adaptive timing), "quick" (1 seed), or "not measured".
    pub mode: String,
}

impl Measured {
    /// Earns its place as a best-known kernel: S_op more than 1 % above the baseline's (the
    /// agent's own acceptance margin).
    pub fn beats_baseline(&self) -> bool {
        matches!((self.s_op, self.baseline_s_op), (Some(t), Some(b)) if t > b * 1.01)
    }

    /// What is wrong with the figures' shape, if anything.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let d = self.date.as_bytes();
        let date_ok = d.len() == 10
            && d[4] == b'-'
            && d[7] == b'-'
            && d.iter()
                .enumerate()
                .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
        if !date_ok {
            out.push(format!("date `{}` is not YYYY-MM-DD", self.date));
        }
        if self.gpu.trim().is_empty() {
            out.push("gpu is empty".into());
        }
        match self.mode.as_str() {
            "full" | "quick" => {
                for (name, v) in [("s_op", self.s_op), ("baseline_s_op", self.baseline_s_op)] {
                    match v {
                        Some(x) if (0.0..=1.0).contains(&x) => {}
                        Some(x) => out.push(format!("{name} {x} is not an S_op (0 to 1)")),
                        None => out.push(format!("{name} missing in mode `{}`", self.mode)),
                    }
                }
            }
            "not measured" => {
                if self.s_op.is_some() || self.baseline_s_op.is_some() {
                    out.push("figures given but mode is `not measured`".into());
                }
            }
            m => out.push(format!("mode `{m}` (full, quick or not measured)")),
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Doc {
    pub path: String,
    pub meta: Meta,
    pub body: String,
}

/// The architecture family of an `sm_XY` string.
pub fn arch_family(arch: &str) -> &'static str {
    let digits: String = arch.chars().filter(|c| c.is_ascii_digit()).collect();
    match digits.parse::<u32>().unwrap_or(0) {
        100..=129 => "blackwell",
        90..=99 => "hopper",
        89 => "ada",
        80..=88 => "ampere",
        _ => "unknown",
    }
}

/// The operator families (`family_of`) documents are tagged with (or "any").
pub const FAMILIES: &[&str] = &[
    "elementwise",
    "row-reduction",
    "quantization",
    "gather-scatter",
    "gemm",
    "attention",
    "moe",
    "topk",
    "scan-conv",
];

/// The operator family of a suite operator.
pub fn family_of(op: &str) -> &'static str {
    match op {
        "silu_and_mul" | "linear_sigmoid_mul_elementwise" => "elementwise",
        "rms_norm" | "fused_add_rms_norm" | "gated_rms_norm" | "l2_norm" | "layer_norm"
        | "fused_qk_rmsnorm" => "row-reduction",
        "fused_rmsnorm_quant" | "fp8_dynamic_per_token_quant" | "per_token_group_quant_fp8" => {
            "quantization"
        }
        "reshape_and_cache" | "mrope" | "fused_qkv_rope" => "gather-scatter",
        "block_scaled_mm" | "linear_sigmoid_mul" => "gemm",
        "attention_forward"
        | "unified_attention"
        | "paged_attention_decode"
        | "mla_decode_attention" => "attention",
        "fused_moe"
        | "fp8_blockscale_fused_moe"
        | "moe_align_block_size"
        | "moe_count_and_sort"
        | "moe_sum_reduce" => "moe",
        "moe_topk_gating_softmax" | "topk_filter" => "topk",
        "causal_conv1d"
        | "chunk_delta_rule_output"
        | "chunk_gated_delta_rule_state"
        | "gated_delta_rule_update" => "scan-conv",
        _ => "other",
    }
}

/// A document of the knowledge base that cannot be read; each names the document's path.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DocError {
    #[error("{path}: no `+++` front matter")]
    NoFrontMatter { path: String },
    #[error("{path}: front matter not closed")]
    FrontMatterOpen { path: String },
    #[error("{path}: no `/* atrex:template` comment")]
    NoTemplateComment { path: String },
    #[error("{path}: template comment not closed")]
    TemplateCommentOpen { path: String },
    /// Its front matter (TOML: a syntax error, an unknown or mistyped key).
    #[error("{path}: {source}")]
    Meta {
        path: String,
        source: toml::de::Error,
    },
}

fn meta_error(path: &str) -> impl FnOnce(toml::de::Error) -> DocError {
    let path = path.to_string();
    move |source| DocError::Meta { path, source }
}

fn parse_md(path: &str, text: &str) -> Result<Doc, DocError> {
    let rest = text
        .strip_prefix("+++\n")
        .ok_or_else(|| DocError::NoFrontMatter { path: path.into() })?;
    let end = rest
        .find("\n+++")
        .ok_or_else(|| DocError::FrontMatterOpen { path: path.into() })?;
    let meta: Meta = toml::from_str(&rest[..end]).map_err(meta_error(path))?;
    let body = rest[end + 4..].trim_start_matches('\n').to_string();
    Ok(Doc {
        path: path.to_string(),
        meta,
        body,
    })
}

fn parse_cu(path: &str, text: &str) -> Result<Doc, DocError> {
    const START: &str = "/* atrex:template";
    let s = text
        .find(START)
        .ok_or_else(|| DocError::NoTemplateComment { path: path.into() })?;
    let e = text[s..]
        .find("*/")
        .ok_or_else(|| DocError::TemplateCommentOpen { path: path.into() })?;
    let mut meta: Meta = toml::from_str(&text[s + START.len()..s + e]).map_err(meta_error(path))?;
    if meta.kind.is_empty() {
        meta.kind = "template".into();
    }
    Ok(Doc {
        path: path.to_string(),
        meta,
        body: text.to_string(),
    })
}

fn walk(dir: &Dir<'static>, out: &mut Vec<Result<Doc, DocError>>) {
    for f in dir.files() {
        let path = f.path().to_string_lossy().to_string();
        let Some(text) = f.contents_utf8() else {
            continue;
        };
        if path.ends_with(".md") && !path.ends_with("README.md") {
            out.push(parse_md(&path, text));
        } else if path.ends_with(".cu") {
            out.push(parse_cu(&path, text));
        }
    }
    for d in dir.dirs() {
        walk(d, out);
    }
}

/// Every document of the embedded knowledge base (errors for malformed ones).
pub fn load_all() -> Vec<Result<Doc, DocError>> {
    let mut out = Vec::new();
    walk(&EMBEDDED_KNOWLEDGE, &mut out);
    out
}

/// The well-formed documents.
pub fn docs() -> Vec<Doc> {
    load_all().into_iter().filter_map(|d| d.ok()).collect()
}

/// The document with this id.
pub fn find<'a>(docs: &'a [Doc], id: &str) -> Option<&'a Doc> {
    docs.iter().find(|d| d.meta.id == id)
}

/// Templates implementing an operator (the tuner's variants).
pub fn templates_for(op: &str) -> Vec<Doc> {
    docs()
        .into_iter()
        .filter(|d| d.meta.kind == "template" && d.meta.operator == op)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_knowledge_base_is_well_formed_and_large_enough() {
        // Every document parses (unknown front-matter keys are errors, so typos cannot hide).
        let all = load_all();
        for d in &all {
            assert!(d.is_ok(), "{d:?}");
        }
        let docs = docs();
        assert!(docs.len() >= 100, "{} documents in all", docs.len());
        let count = |k: &str| docs.iter().filter(|d| d.meta.kind == k).count();
        assert!(count("template") >= 12, "{} templates", count("template"));
        assert!(
            count("reference") >= 15,
            "{} reference cards",
            count("reference")
        );
        assert!(count("family") >= 5, "{} family cards", count("family"));
        assert!(
            count("technique") >= 25,
            "{} technique cards",
            count("technique")
        );
        // Layers: each kind lives in its own folder.
        for d in &docs {
            let folder = KINDS
                .iter()
                .find(|(k, _)| *k == d.meta.kind)
                .map(|(_, f)| *f)
                .unwrap_or_else(|| panic!("{}: unknown kind `{}`", d.path, d.meta.kind));
            assert!(
                d.path.starts_with(folder),
                "{}: a {} belongs in {folder}",
                d.path,
                d.meta.kind
            );
            assert!(
                !d.meta.id.is_empty() && !d.meta.title.is_empty(),
                "{}",
                d.path
            );
            assert!(
                !d.meta.architectures.is_empty(),
                "{}: no architectures",
                d.path
            );
            for a in &d.meta.architectures {
                assert!(
                    ["hopper", "blackwell", "ada", "ampere", "any"].contains(&a.as_str()),
                    "{}: architecture `{a}`",
                    d.path
                );
            }
            for f in &d.meta.families {
                assert!(
                    f == "any" || FAMILIES.contains(&f.as_str()),
                    "{}: family `{f}`",
                    d.path
                );
            }
            for b in &d.meta.bottlenecks {
                assert!(
                    ["memory", "compute", "balanced"].contains(&b.as_str()),
                    "{}: bottleneck `{b}`",
                    d.path
                );
            }
            for t in &d.meta.techniques {
                assert!(
                    TECHNIQUES.iter().any(|(name, _)| name == t),
                    "{}: technique `{t}` is not in TECHNIQUES",
                    d.path
                );
            }
        }
        for a in ["hopper", "blackwell", "ada", "ampere"] {
            assert!(
                docs.iter()
                    .any(|d| d.meta.kind == "hardware"
                        && d.meta.architectures.iter().any(|x| x == a)),
                "{a}"
            );
        }
        let mut ids: Vec<&str> = docs.iter().map(|d| d.meta.id.as_str()).collect();
        ids.sort();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n, "document ids are unique");
        // Every cross-reference resolves.
        for d in &docs {
            for r in &d.meta.related {
                assert!(
                    ids.binary_search(&r.as_str()).is_ok(),
                    "{}: related `{r}` does not exist",
                    d.path
                );
                assert_ne!(r, &d.meta.id, "{}: relates to itself", d.path);
            }
        }
        for d in docs.iter().filter(|d| d.meta.kind == "template") {
            assert!(!d.meta.operator.is_empty(), "{}", d.path);
            crate::contract::plan::parse(&d.body).unwrap_or_else(|e| panic!("{}: {e}", d.path));
        }
        for d in docs.iter().filter(|d| d.meta.kind == "technique") {
            assert!(
                !d.meta.families.is_empty() && !d.meta.bottlenecks.is_empty(),
                "{}",
                d.path
            );
            assert!(
                !d.meta.expected_gain.is_empty() && !d.meta.pitfalls.is_empty(),
                "{}",
                d.path
            );
        }
        // Reference, family and operator cards: retrievable (families, bottlenecks), with their
        // pitfalls and the documents to read with them.
        for d in docs
            .iter()
            .filter(|d| ["reference", "family", "operator"].contains(&d.meta.kind.as_str()))
        {
            assert!(
                !d.meta.families.is_empty() && !d.meta.bottlenecks.is_empty(),
                "{}",
                d.path
            );
            assert!(
                !d.meta.pitfalls.is_empty() && !d.meta.related.is_empty(),
                "{}",
                d.path
            );
        }
    }

    #[test]
    fn techniques_are_read_from_a_kernel_source() {
        let tpl = |name: &str| {
            docs()
                .into_iter()
                .find(|d| d.path == format!("templates/{name}"))
                .unwrap()
                .body
        };
        let t = techniques_in(&tpl("unified_attention_wgmma.cu"));
        for x in [
            "wgmma",
            "tma",
            "mbarrier",
            "setmaxnreg",
            "warp-specialization",
        ] {
            assert!(t.iter().any(|y| y == x), "{x} in {t:?}");
        }
        assert!(
            !t.iter().any(|y| y == "mma-sync" || y == "cluster"),
            "{t:?}"
        );
        let t = techniques_in(&tpl("silu_and_mul_tma.cu"));
        assert!(
            t.contains(&"tma".to_string()) && t.contains(&"cluster".to_string()),
            "{t:?}"
        );
        let t = techniques_in(&tpl("attention_forward_flash.cu"));
        assert!(
            t.contains(&"mma-sync".to_string()) && t.contains(&"cp-async".to_string()),
            "{t:?}"
        );
        assert!(techniques_in(&tpl("rms_norm_warp_per_row.cu")).is_empty());
    }

    #[test]
    fn every_template_states_its_measured_standing_and_earns_its_place_or_says_so() {
        let docs = docs();
        let templates: Vec<&Doc> = docs.iter().filter(|d| d.meta.kind == "template").collect();
        assert!(templates.len() >= 15, "{}", templates.len());
        for d in templates {
            let m = d
                .meta
                .measured
                .as_ref()
                .unwrap_or_else(|| panic!("{}: no [measured] table in its header", d.path));
            let problems = m.problems();
            assert!(problems.is_empty(), "{}: {problems:?}", d.path);
            assert!(
                m.beats_baseline() || d.meta.category == DEMONSTRATION,
                "{}: S_op {:?} does not beat the baseline's {:?} by 1 %: label it `{DEMONSTRATION}`",
                d.path,
                m.s_op,
                m.baseline_s_op
            );
            // The figure is also in the comment a reader sees, in the same words.
            if let Some(s) = m.s_op {
                let fig = format!("S_op {s:.3}");
                assert!(
                    d.body.contains(&fig),
                    "{}: the header comment does not say `{fig}`",
                    d.path
                );
            }
        }
    }

    #[test]
    fn measured_figures_are_checked_for_shape() {
        let ok = Measured {
            s_op: Some(0.244),
            baseline_s_op: Some(0.091),
            gpu: "NVIDIA H200".into(),
            date: "2026-11-30".into(),
            mode: "full".into(),
        };
        assert!(ok.problems().is_empty() && ok.beats_baseline());
        let tie = Measured {
            s_op: Some(0.1261),
            baseline_s_op: Some(0.1252),
            ..ok.clone()
        };
        assert!(!tie.beats_baseline(), "within 1 % is not a win");
        let bad = Measured {
            s_op: Some(1.7),
            baseline_s_op: None,
            date: "30/11/2026".into(),
            mode: "fast".into(),
            ..ok.clone()
        };
        let p = bad.problems();
        assert_eq!(p.len(), 2, "{p:?}");
        let bad = Measured {
            s_op: Some(1.7),
            baseline_s_op: None,
            ..ok.clone()
        };
        assert_eq!(bad.problems().len(), 2, "{:?}", bad.problems());
        let none = Measured {
            s_op: None,
            baseline_s_op: None,
            mode: "not measured".into(),
            ..ok
        };
        assert!(none.problems().is_empty() && !none.beats_baseline());
        // A template that loses to its baseline ranks below a technique card of its family.
        let parse = |t: &str| parse_cu("t.cu", t).unwrap();
        let head = |cat: &str, s: f64| {
            format!(
                "/* atrex:template\nid = \"t\"\noperator = \"rms_norm\"\narchitectures = [\"hopper\"]\nfamilies = [\"row-reduction\"]\ncategory = \"{cat}\"\n[measured]\ns_op = {s}\nbaseline_s_op = 0.2\ngpu = \"G\"\ndate = \"2026-11-30\"\nmode = \"quick\"\n*/"
            )
        };
        let q = Query {
            arch: "hopper".into(),
            family: "row-reduction".into(),
            operator: "rms_norm".into(),
            bottlenecks: vec![],
            symptoms: vec![],
            techniques: vec![],
            related: vec![],
        };
        let winner = parse(&head("parallelism", 0.3));
        let loser = parse(&head("parallelism", 0.1));
        let demo = parse(&head(DEMONSTRATION, 0.3));
        assert!(score(&winner, &q) > score(&loser, &q));
        assert!(score(&winner, &q) > score(&demo, &q));
        assert_eq!(score(&loser, &q), score(&demo, &q));
    }

    #[test]
    fn families_and_architectures() {
        assert_eq!(arch_family("sm_90a"), "hopper");
        assert_eq!(arch_family("sm_100a"), "blackwell");
        assert_eq!(arch_family("sm_89"), "ada");
        assert_eq!(arch_family("sm_80"), "ampere");
        assert_eq!(family_of("rms_norm"), "row-reduction");
        assert_eq!(family_of("fused_moe"), "moe");
    }
}
