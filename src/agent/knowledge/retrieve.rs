//! Retrieval: the documents of the knowledge base ranked for a query (architecture, operator
//! family and name, bottlenecks, symptoms, the incumbent's techniques, the operator card's
//! `related`), and the symptoms a measurement and a profile show.
//!
//! Invariant: ranking is a pure function of the documents and the query; ties go by id, so the
//! order is stable.

use super::{DEMONSTRATION, Doc, Measured};

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
    m: &crate::agent::MeasureSummary,
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
    use crate::agent::knowledge::{
        FAMILIES, Meta, TECHNIQUES, arch_family, docs, family_of, techniques_in,
    };

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
}
