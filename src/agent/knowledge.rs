//! The knowledge base (knowledge/, embedded in the binary), in layers: hardware notes, reference
//! cards (the instructions and driver calls Hopper kernels are built from), operator-family
//! cards, technique cards, anti-patterns, one card per suite operator, and kernel templates —
//! each with TOML front matter. Retrieval ranks them by architecture, operator (family and
//! name), measured bottleneck, profiler symptoms and the techniques the incumbent already uses;
//! `related` links documents to each other.

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

/// What retrieval looks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    /// Architecture family ("hopper").
    pub arch: String,
    /// Operator family ("row-reduction").
    pub family: String,
    /// The operator's name (templates for it rank first among templates).
    pub operator: String,
    /// Bottlenecks of the shapes ("memory"…), most frequent first.
    pub bottlenecks: Vec<String>,
    /// Symptoms measured on the incumbent ("low-bandwidth", "register-spills"…).
    pub symptoms: Vec<String>,
    /// Techniques the incumbent already uses (`techniques_in`): cards explaining them rank
    /// higher, since the next revision builds on them.
    pub techniques: Vec<String>,
    /// Documents the operator's own card names in `related` (`related_to_operator`): the card
    /// curates what applies to its operator.
    pub related: Vec<String>,
}

/// The `related` ids of an operator's card (empty when it has none).
pub fn related_to_operator(docs: &[Doc], op: &str) -> Vec<String> {
    docs.iter()
        .filter(|d| d.meta.kind == "operator" && d.meta.operator == op)
        .flat_map(|d| d.meta.related.iter().cloned())
        .collect()
}

fn has(list: &[String], x: &str) -> bool {
    list.iter().any(|l| l == x)
}

/// Symptoms read from the compiled code (ptxas), not from timings.
const DIAGNOSED: &[&str] = &["wgmma-serialized", "register-spills"];

/// The relevance of a document to a query (0 or less: irrelevant).
pub fn score(d: &Doc, q: &Query) -> f64 {
    let m = &d.meta;
    let arch_ok = has(&m.architectures, &q.arch) || has(&m.architectures, "any");
    if !arch_ok {
        return 0.0;
    }
    let mut s = 0.0;
    s += if has(&m.architectures, &q.arch) {
        2.0
    } else {
        0.5
    };
    match m.kind.as_str() {
        // The hardware notes of this architecture always make the cut.
        "hardware" if m.primary => {
            return if has(&m.architectures, &q.arch) {
                100.0
            } else {
                0.0
            };
        }
        // The card of the operator itself: always retrieved for it, right after the
        // architecture's note; never for another operator.
        "operator" => {
            return if m.operator == q.operator { 50.0 } else { 0.0 };
        }
        "template" => {
            if m.operator != q.operator {
                return 0.0;
            }
            s += 8.0;
            // The best-known kernels first; worked examples that do not beat the baseline
            // (or were not measured) below the technique cards.
            let earns = m.category != DEMONSTRATION
                && m.measured.as_ref().is_some_and(Measured::beats_baseline);
            s += if earns { 4.0 } else { -6.0 };
        }
        _ => {}
    }
    if has(&m.families, &q.family) {
        s += 4.0;
    } else if has(&m.families, "any") {
        s += 2.0;
    } else {
        s -= 3.0;
    }
    for (i, b) in q.bottlenecks.iter().enumerate() {
        if has(&m.bottlenecks, b) {
            s += if i == 0 { 3.0 } else { 1.0 };
        }
    }
    for sym in &q.symptoms {
        if has(&m.symptoms, sym) {
            // Measured evidence weighs more than the operator's family, and a defect the
            // compiler diagnosed in the code itself more than a figure.
            s += if DIAGNOSED.contains(&sym.as_str()) {
                16.0
            } else {
                6.0
            };
        }
    }
    // What the incumbent is built from. Reference cards explain the instructions a kernel
    // uses: they rank on it (up to three techniques), and below the technique cards of the
    // family otherwise; other cards count it a little (what to do next matters more to them).
    let shared = q
        .techniques
        .iter()
        .filter(|t| has(&m.techniques, t))
        .count();
    if m.kind == "reference" {
        if shared == 0 {
            let family_ok = has(&m.families, &q.family) || has(&m.families, "any");
            if !family_ok {
                return 0.0;
            }
            s -= 2.0;
        } else {
            s += 4.0 * shared.min(3) as f64;
        }
    } else {
        s += shared.min(2) as f64;
    }
    // Named by the operator's card (templates rank by their measured standing instead).
    if m.kind != "template" && has(&q.related, &m.id) {
        s += 3.0;
    }
    if m.kind == "anti-pattern" {
        // Learned from failures: worth more when the incumbent fails or regresses.
        if q.symptoms
            .iter()
            .any(|x| x == "incorrect" || x == "compile-error")
        {
            s += 2.0;
        }
    }
    s
}

/// The `k` most relevant documents, best first (ties by id, so the order is stable).
pub fn retrieve<'a>(docs: &'a [Doc], q: &Query, k: usize) -> Vec<(&'a Doc, f64)> {
    let mut v: Vec<(&Doc, f64)> = docs
        .iter()
        .map(|d| (d, score(d, q)))
        .filter(|(_, s)| *s > 0.0)
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.meta.id.cmp(&b.0.meta.id)));
    v.truncate(k);
    v
}

/// Retrieval symptoms of profiler findings: each rule as a symptom (`low_occupancy` →
/// `low-occupancy`), and a grid too small also counts as low occupancy.
pub fn symptoms_of_findings(rules: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |s: String| {
        if !out.contains(&s) {
            out.push(s);
        }
    };
    for r in rules {
        add(r.replace('_', "-"));
        if r == "grid_too_small" {
            add("low-occupancy".into());
        }
    }
    out
}

/// Symptoms derived from a measurement (and profiler findings when present).
pub fn symptoms_of(
    m: &super::MeasureSummary,
    sm_count: u32,
    grid_blocks: Option<u64>,
) -> Vec<String> {
    let mut out = Vec::new();
    if !m.compiled {
        out.push("compile-error".to_string());
        return out;
    }
    if m.verdict == "incorrect" {
        out.push("incorrect".into());
    }
    if m.spill_bytes.unwrap_or(0) > 0 {
        out.push("register-spills".into());
    }
    if m.registers.unwrap_or(0) > 128 {
        out.push("high-registers".into());
    }
    // ptxas C7518: the wgmma of the candidate run one after another.
    if m.compile_notes
        .iter()
        .any(|n| n.contains("wgmma") && n.contains("serialized"))
    {
        out.push("wgmma-serialized".into());
    }
    if let Some(s) = m.s_op {
        if s < 0.3 {
            out.push("far-from-sol".into());
        }
        if s < 0.6 {
            out.push("low-bandwidth".into());
        }
    }
    // Small shapes: latency-bound when T_SOL is a few microseconds.
    if m.shapes.iter().any(|s| s.sol_ms > 0.0 && s.sol_ms < 0.005) {
        out.push("launch-bound".into());
    }
    if let Some(g) = grid_blocks {
        if g < sm_count as u64 {
            out.push("low-occupancy".into());
        } else if g % sm_count as u64 != 0 && g < 4 * sm_count as u64 {
            out.push("tail-effect".into());
        }
    }
    if m.noise > 0.05 {
        out.push("noisy".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: &str, kind: &str, arch: &[&str], fam: &[&str], bn: &[&str], sym: &[&str]) -> Doc {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Doc {
            path: format!("{id}.md"),
            meta: Meta {
                id: id.into(),
                kind: kind.into(),
                architectures: v(arch),
                families: v(fam),
                bottlenecks: v(bn),
                symptoms: v(sym),
                ..Default::default()
            },
            body: String::new(),
        }
    }

    #[test]
    fn ranking_follows_architecture_family_bottleneck_and_symptoms() {
        let docs = vec![
            Doc {
                meta: Meta {
                    primary: true,
                    ..doc("hopper-notes", "hardware", &["hopper"], &["any"], &[], &[]).meta
                },
                ..doc("hopper-notes", "hardware", &["hopper"], &["any"], &[], &[])
            },
            Doc {
                meta: Meta {
                    primary: true,
                    ..doc("ampere-notes", "hardware", &["ampere"], &["any"], &[], &[]).meta
                },
                ..doc("ampere-notes", "hardware", &["ampere"], &["any"], &[], &[])
            },
            doc(
                "vec-loads",
                "technique",
                &["any"],
                &["row-reduction", "elementwise"],
                &["memory"],
                &["low-bandwidth"],
            ),
            doc(
                "wgmma",
                "technique",
                &["hopper"],
                &["gemm"],
                &["compute"],
                &[],
            ),
            doc(
                "one-warp-per-row",
                "technique",
                &["any"],
                &["row-reduction"],
                &["memory"],
                &["low-occupancy"],
            ),
            doc(
                "spills",
                "anti-pattern",
                &["any"],
                &["any"],
                &[],
                &["register-spills"],
            ),
            doc(
                "blackwell-only",
                "technique",
                &["blackwell"],
                &["row-reduction"],
                &["memory"],
                &["low-bandwidth"],
            ),
        ];
        let q = Query {
            arch: "hopper".into(),
            family: "row-reduction".into(),
            operator: "rms_norm".into(),
            bottlenecks: vec!["memory".into()],
            symptoms: vec!["low-bandwidth".into()],
            techniques: vec![],
            related: vec![],
        };
        let ids: Vec<&str> = retrieve(&docs, &q, 10)
            .iter()
            .map(|(d, _)| d.meta.id.as_str())
            .collect();
        assert_eq!(ids[0], "hopper-notes");
        assert_eq!(
            ids[1],
            "vec-loads",
            "{ids:?} {:?}",
            retrieve(&docs, &q, 10)
                .iter()
                .map(|(d, s)| (d.meta.id.clone(), *s))
                .collect::<Vec<_>>()
        );
        assert!(!ids.contains(&"ampere-notes") && !ids.contains(&"blackwell-only"));
        let pos = |x: &str| ids.iter().position(|i| *i == x);
        assert!(pos("one-warp-per-row") < pos("wgmma").or(Some(usize::MAX)));
        // A symptom changes the order: spills now outrank the occupancy card.
        let q2 = Query {
            symptoms: vec!["register-spills".into()],
            ..q.clone()
        };
        let ids2: Vec<&str> = retrieve(&docs, &q2, 10)
            .iter()
            .map(|(d, _)| d.meta.id.as_str())
            .collect();
        assert!(
            ids2.iter().position(|i| *i == "spills") < ids2.iter().position(|i| *i == "vec-loads"),
            "{ids2:?}"
        );
        assert_eq!(retrieve(&docs, &q, 2).len(), 2);
    }

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
                    .any(|d| d.meta.kind == "hardware" && has(&d.meta.architectures, a)),
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
    fn templates_target_suite_operators_and_real_retrieval_is_sensible() {
        let suite = crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).unwrap();
        let docs = docs();
        for d in docs.iter().filter(|d| d.meta.kind == "template") {
            let p = suite
                .problem(&d.meta.operator)
                .unwrap_or_else(|| panic!("{}: {}", d.path, d.meta.operator));
            // Buffer arguments name the operator's tensors (or scratch buffers).
            let plan = crate::contract::plan::parse(&d.body).unwrap();
            for l in &plan.launches {
                for a in &l.args {
                    if let crate::contract::plan::Arg::Buffer(b) = a {
                        let known = p.inputs.iter().chain(&p.outputs).any(|t| &t.name == b)
                            || plan.scratch.iter().any(|s| &s.name == b)
                            || plan.tensor_maps.iter().any(|m| &m.name == b);
                        assert!(known, "{}: `{b}` is not a tensor of {}", d.path, p.name);
                    }
                }
            }
        }
        // Every launch resolves on every shape, for every value of every tunable parameter.
        for d in docs.iter().filter(|d| d.meta.kind == "template") {
            let p = suite.problem(&d.meta.operator).unwrap();
            let plan = crate::contract::plan::parse(&d.body).unwrap();
            let mut configs = vec![plan.defines.clone()];
            for (k, vals) in &plan.tune {
                for v in vals {
                    let mut c = plan.defines.clone();
                    c.insert(k.clone(), v.clone());
                    configs.push(c);
                }
            }
            let buffers: Vec<String> = p
                .inputs
                .iter()
                .chain(&p.outputs)
                .map(|t| t.name.clone())
                .chain(plan.scratch.iter().map(|s| s.name.clone()))
                .collect();
            for sh in &p.shapes {
                let env = p.env(sh).unwrap();
                for c in &configs {
                    let e = plan.env(&env, c);
                    plan.resolve(&e, &|n: &str| buffers.iter().any(|b| b == n))
                        .unwrap_or_else(|e| panic!("{} shape {} {c:?}: {e}", d.path, sh.id));
                }
            }
        }
        let hw = suite.hardware("H200").unwrap();
        let p = suite.problem("rms_norm").unwrap();
        let q = Query {
            arch: arch_family(&hw.arch).into(),
            family: family_of(&p.name).into(),
            operator: p.name.clone(),
            bottlenecks: crate::agent::context::bottlenecks(p, hw),
            symptoms: vec!["low-bandwidth".into()],
            techniques: vec![],
            related: vec![],
        };
        let got = retrieve(&docs, &q, 6);
        let ids: Vec<&str> = got.iter().map(|(d, _)| d.meta.id.as_str()).collect();
        assert_eq!(ids[0], "hopper-h200", "{ids:?}");
        assert!(ids.iter().any(|i| i.starts_with("tpl-rms-norm")), "{ids:?}");
        assert!(ids.contains(&"vectorized-16b-access"), "{ids:?}");
        assert!(
            !ids.iter()
                .any(|i| i.contains("ampere") || i.contains("wgmma")),
            "{ids:?}"
        );
    }

    /// The query the agent's context builds for an operator and an incumbent source.
    fn query_for(
        suite: &crate::suite::Suite,
        docs: &[Doc],
        op: &str,
        source: &str,
        symptoms: &[&str],
    ) -> Query {
        let hw = suite.hardware("H200").unwrap();
        let p = suite.problem(op).unwrap();
        Query {
            arch: arch_family(&hw.arch).into(),
            family: family_of(op).into(),
            operator: op.into(),
            bottlenecks: crate::agent::context::bottlenecks(p, hw),
            symptoms: symptoms.iter().map(|s| s.to_string()).collect(),
            techniques: techniques_in(source),
            related: related_to_operator(docs, op),
        }
    }

    fn ids<'a>(got: &[(&'a Doc, f64)]) -> Vec<&'a str> {
        got.iter().map(|(d, _)| d.meta.id.as_str()).collect()
    }

    #[test]
    fn every_operator_has_one_card_that_ranks_for_it_and_only_for_it() {
        let suite = crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).unwrap();
        let docs = docs();
        for d in docs.iter().filter(|d| d.meta.kind == "operator") {
            assert!(
                suite.problem(&d.meta.operator).is_some(),
                "{}: `{}` is not a suite operator",
                d.path,
                d.meta.operator
            );
        }
        for p in &suite.problems {
            let fam = family_of(&p.name);
            assert!(FAMILIES.contains(&fam), "{}: family `{fam}`", p.name);
            let cards: Vec<&Doc> = docs
                .iter()
                .filter(|d| d.meta.kind == "operator" && d.meta.operator == p.name)
                .collect();
            assert_eq!(cards.len(), 1, "{}: {} operator cards", p.name, cards.len());
            let card = cards[0];
            assert!(
                has(&card.meta.families, fam),
                "{}: not tagged `{fam}`",
                card.path
            );
            let base = crate::contract::kernels::suite_kernel(&suite, p, "baseline.cu")
                .unwrap()
                .code;
            for symptoms in [
                &[][..],
                &["far-from-sol", "low-bandwidth", "launch-bound"][..],
            ] {
                let q = query_for(&suite, &docs, &p.name, &base, symptoms);
                let got = ids(&retrieve(&docs, &q, 6));
                assert_eq!(got[0], "hopper-h200", "{}: {got:?}", p.name);
                assert_eq!(got[1], card.meta.id, "{}: {got:?}", p.name);
            }
            // Never for another operator, even of the same family.
            for other in suite.problems.iter().filter(|o| o.name != p.name) {
                let q = query_for(&suite, &docs, &other.name, &base, &[]);
                assert_eq!(score(card, &q), 0.0, "{} for {}", card.meta.id, other.name);
            }
        }
    }

    #[test]
    fn reference_cards_are_retrievable_by_technique_and_family() {
        let docs = docs();
        let refs: Vec<&Doc> = docs.iter().filter(|d| d.meta.kind == "reference").collect();
        let fam = |d: &Doc| {
            d.meta
                .families
                .iter()
                .find(|f| *f != "any")
                .cloned()
                .unwrap_or_else(|| "gemm".into())
        };
        for c in &refs {
            // By technique: a Hopper kernel of the card's family that uses what it explains.
            for t in &c.meta.techniques {
                let q = Query {
                    arch: "hopper".into(),
                    family: fam(c),
                    bottlenecks: c.meta.bottlenecks.clone(),
                    techniques: vec![t.clone()],
                    ..Default::default()
                };
                let got = ids(&retrieve(&docs, &q, 6));
                assert!(
                    got.contains(&c.meta.id.as_str()),
                    "{} for `{t}`: {got:?}",
                    c.meta.id
                );
            }
            // By family: eligible for a Hopper kernel of each family it lists, and kept out of
            // the others unless the kernel uses what it explains.
            for f in FAMILIES {
                let q = Query {
                    arch: "hopper".into(),
                    family: f.to_string(),
                    bottlenecks: c.meta.bottlenecks.clone(),
                    ..Default::default()
                };
                let listed = has(&c.meta.families, f) || has(&c.meta.families, "any");
                assert_eq!(score(c, &q) > 0.0, listed, "{} for family {f}", c.meta.id);
            }
        }
        // Every technique a kernel can show is explained by some card.
        for (t, _) in TECHNIQUES {
            assert!(
                docs.iter().any(|d| has(&d.meta.techniques, t)),
                "no card explains `{t}`"
            );
        }
    }

    /// ptxas's C7518 note in a passing compile is the `wgmma-serialized` symptom, and that
    /// symptom brings the anti-pattern card that explains it to a wgmma attention kernel.
    #[test]
    fn a_serialised_wgmma_is_a_symptom_with_its_card() {
        let note = "ptxas: (C7518) Potential Performance Loss: wgmma.mma_async instructions are \
                    serialized due to program dependence on compiler-inserted WG.DP in divergent \
                    path in the function 'k'";
        let m = crate::agent::MeasureSummary {
            compiled: true,
            verdict: "pass".into(),
            s_op: Some(0.22),
            compile_notes: vec![note.into()],
            ..Default::default()
        };
        let sy = symptoms_of(&m, 132, None);
        assert!(sy.contains(&"wgmma-serialized".to_string()), "{sy:?}");
        let plain = crate::agent::MeasureSummary {
            compile_notes: vec![],
            ..m.clone()
        };
        assert!(!symptoms_of(&plain, 132, None).contains(&"wgmma-serialized".to_string()));

        let suite = crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).unwrap();
        let docs = docs();
        let src = docs
            .iter()
            .find(|d| d.path == "templates/unified_attention_wgmma.cu")
            .unwrap()
            .body
            .clone();
        let syms: Vec<&str> = sy.iter().map(|s| s.as_str()).collect();
        let q = query_for(&suite, &docs, "unified_attention", &src, &syms);
        let got = ids(&retrieve(&docs, &q, 6));
        assert!(got.contains(&"ap-wgmma-serialized"), "{got:?}");
        let q = query_for(&suite, &docs, "unified_attention", &src, &["far-from-sol"]);
        let got = ids(&retrieve(&docs, &q, 6));
        assert!(!got.contains(&"ap-wgmma-serialized"), "{got:?}");
    }

    #[test]
    fn the_incumbents_techniques_bring_their_reference_cards() {
        let suite = crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).unwrap();
        let docs = docs();
        let body = |name: &str| {
            docs.iter()
                .find(|d| d.path == format!("templates/{name}"))
                .unwrap()
                .body
                .clone()
        };
        // A warp-specialised wgmma/TMA incumbent of unified_attention: its operator card, its
        // template, and the reference cards of what it is built from.
        let q = query_for(
            &suite,
            &docs,
            "unified_attention",
            &body("unified_attention_wgmma.cu"),
            &["far-from-sol"],
        );
        let got = ids(&retrieve(&docs, &q, 6));
        assert_eq!(
            &got[..2],
            &["hopper-h200", "op-unified-attention"],
            "{got:?}"
        );
        assert!(got.contains(&"tpl-unified-attention-wgmma"), "{got:?}");
        let n_ref = got.iter().filter(|i| i.starts_with("ref-")).count();
        assert!(n_ref >= 2, "{got:?}");
        // Its FA2 baseline (mma.sync): the FlashAttention-3 card shows the way forward.
        let p = suite.problem("attention_forward").unwrap();
        let base = crate::contract::kernels::suite_kernel(&suite, p, "baseline.cu")
            .unwrap()
            .code;
        let q = query_for(&suite, &docs, "attention_forward", &base, &["far-from-sol"]);
        let got = ids(&retrieve(&docs, &q, 6));
        assert!(got.contains(&"fam-flash-attention-3"), "{got:?}");
        // A memory-bound row kernel gets no Hopper instruction reference.
        let p = suite.problem("rms_norm").unwrap();
        let base = crate::contract::kernels::suite_kernel(&suite, p, "baseline.cu")
            .unwrap()
            .code;
        let q = query_for(&suite, &docs, "rms_norm", &base, &["low-bandwidth"]);
        let got = ids(&retrieve(&docs, &q, 6));
        assert!(!got.iter().any(|i| i.starts_with("ref-")), "{got:?}");
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
