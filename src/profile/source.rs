//! Where a kernel's warps wait, per SASS instruction: Nsight Compute's source page
//! (`ncu --import REPORT --csv --page source --print-source sass`) read into hot instructions,
//! waits by barrier, stall reasons and the executed opcode mix (docs/profiler.md, "Where the
//! warps wait").
//!
//! The page has, per profiled kernel, a `"Kernel Name","NAME"` line, a header row (`Address`,
//! `Source`, `Warp Stall Sampling (All Samples)`, `Instructions Executed`, `stall_<reason>`
//! columns, …) and one row per instruction. Samples count every resident warp, waiting or not:
//! a warp spinning on an mbarrier collects samples that cost nothing if it has nothing else to
//! do, which is why waits are reported by barrier rather than folded into one figure.

use super::PageError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The hot instructions kept per kernel.
pub const HOT: usize = 12;

/// One kernel's samples by instruction, summarised.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SourceProfile {
    pub kernel: String,
    /// Warp samples over the whole kernel (every resident warp, waiting or not).
    pub samples: u64,
    /// The instructions with the most samples, most first.
    pub hot: Vec<HotInstruction>,
    /// Samples where warps wait on something: mbarrier waits (with their retry branch) by
    /// barrier operand, wgmma completion waits, named barriers; most first.
    pub waits: Vec<Wait>,
    /// Samples by stall reason (`long_sb`, `wait`, `barrier`, …), most first.
    pub stalls: Vec<(String, u64)>,
    /// Executed warp instructions by opcode (`FMUL`, `MUFU`, `BRA`, …), most first.
    pub opcodes: Vec<(String, u64)>,
    /// Executed warp instructions in all.
    pub executed: u64,
}

/// One SASS instruction and where its samples stalled.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HotInstruction {
    /// Position in the kernel's SASS (0 = first instruction).
    pub index: usize,
    pub sass: String,
    pub samples: u64,
    /// Warp-level executions.
    pub executed: u64,
    /// Its largest stall reasons (at most three).
    pub stalls: Vec<(String, u64)>,
}

/// Samples spent waiting at one kind of synchronisation.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Wait {
    /// `mbarrier [R25+URZ+0x30010]`, `wgmma (WARPGROUP.DEPBAR)`, `named barrier (BAR.SYNC)`.
    pub what: String,
    pub samples: u64,
    /// How often a warp passed the wait instruction (for an mbarrier: try-wait polls).
    pub executed: u64,
}

/// One instruction row.
struct Row {
    sass: String,
    samples: u64,
    executed: u64,
    stalls: Vec<(String, u64)>,
}

/// A count of the page (samples, executions); blank or `n/a` is 0.
fn count(s: &str) -> u64 {
    super::ncu::number(s).map_or(0, |v| v.max(0.0) as u64)
}

/// The opcode of a SASS line: the first word after a predicate, up to its first dot.
pub fn opcode(sass: &str) -> &str {
    let mut words = sass.split_whitespace();
    let mut w = words.next().unwrap_or("");
    if w.starts_with('@') {
        w = words.next().unwrap_or("");
    }
    w.split('.').next().unwrap_or("")
}

/// The bracketed address operand of an instruction (`[R25+URZ+0x30010]`).
fn bracket(sass: &str) -> Option<&str> {
    let a = sass.find('[')?;
    let b = sass[a..].find(']')? + a;
    Some(&sass[a..=b])
}

/// Parses the source page: one summary per profiled kernel, in the page's order. An error
/// names what is missing; a page without a kernel block gives an empty list.
pub fn parse_source_csv(text: &str) -> Result<Vec<SourceProfile>, PageError> {
    let mut out = Vec::new();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let mut kernel: Option<String> = None;
    let mut columns: Option<Columns> = None;
    let mut rows: Vec<Row> = Vec::new();
    for rec in reader.records() {
        let rec = rec.map_err(PageError::Source)?;
        let first = rec.get(0).unwrap_or("").trim();
        if first == "Kernel Name" {
            if let Some(k) = kernel.take() {
                out.push(summarise(k, std::mem::take(&mut rows)));
            }
            kernel = Some(rec.get(1).unwrap_or("").trim().to_string());
            columns = None;
            continue;
        }
        if first == "Address" {
            columns = Some(Columns::of(&rec)?);
            continue;
        }
        let (Some(cols), Some(_)) = (&columns, &kernel) else {
            continue;
        };
        rows.push(cols.row(&rec));
    }
    if let Some(k) = kernel.take() {
        out.push(summarise(k, rows));
    }
    Ok(out)
}

/// Where the columns this summary needs are.
struct Columns {
    source: usize,
    samples: usize,
    executed: usize,
    stalls: Vec<(usize, String)>,
}

impl Columns {
    fn of(header: &csv::StringRecord) -> Result<Columns, PageError> {
        let find = |name: &str| {
            header
                .iter()
                .position(|h| h.trim() == name)
                .ok_or_else(|| PageError::NoColumn(name.to_string()))
        };
        let stalls = header
            .iter()
            .enumerate()
            .filter_map(|(i, h)| {
                let h = h.trim();
                let reason = h.strip_prefix("stall_")?;
                (!h.contains("Not Issued")).then(|| (i, reason.to_string()))
            })
            .collect();
        Ok(Columns {
            source: find("Source")?,
            samples: find("Warp Stall Sampling (All Samples)")?,
            executed: find("Instructions Executed")?,
            stalls,
        })
    }

    fn row(&self, rec: &csv::StringRecord) -> Row {
        let get = |i: usize| rec.get(i).unwrap_or("");
        let mut stalls: Vec<(String, u64)> = self
            .stalls
            .iter()
            .map(|(i, r)| (r.clone(), count(get(*i))))
            .filter(|(_, v)| *v > 0)
            .collect();
        stalls.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Row {
            sass: get(self.source).trim().to_string(),
            samples: count(get(self.samples)),
            executed: count(get(self.executed)),
            stalls,
        }
    }
}

fn sorted(m: BTreeMap<String, u64>) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = m.into_iter().filter(|(_, n)| *n > 0).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// The branch that retries the try-wait at `i`: within the next eight instructions, a `BRA`
/// predicated on the negation of the predicate the try-wait wrote.
fn retry_branch(rows: &[Row], i: usize) -> Option<&Row> {
    let mut words = rows[i].sass.split_whitespace();
    let mut w = words.next()?;
    if w.starts_with('@') {
        w = words.next()?;
    }
    debug_assert!(w.starts_with("SYNCS"));
    let pred = words.next()?.trim_end_matches(',');
    let guard = format!("@!{pred}");
    rows[i + 1..]
        .iter()
        .take(8)
        .find(|n| opcode(&n.sass) == "BRA" && n.sass.split_whitespace().next() == Some(&guard))
}

fn summarise(kernel: String, rows: Vec<Row>) -> SourceProfile {
    let samples = rows.iter().map(|r| r.samples).sum();
    let executed = rows.iter().map(|r| r.executed).sum();
    let mut stalls = BTreeMap::new();
    let mut opcodes = BTreeMap::new();
    for r in &rows {
        for (k, v) in &r.stalls {
            *stalls.entry(k.clone()).or_insert(0) += v;
        }
        *opcodes.entry(opcode(&r.sass).to_string()).or_insert(0) += r.executed;
    }
    let mut waits: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        let op = opcode(&r.sass);
        let what = if r.sass.contains("SYNCS.PHASECHK") {
            // The try-wait and the branch that retries it (`@!P0 BRA` on the predicate it
            // wrote, which the compiler may place a few instructions later).
            let retry = retry_branch(&rows, i).map(|n| n.samples).unwrap_or(0);
            let w = waits
                .entry(format!(
                    "mbarrier {}",
                    bracket(&r.sass).unwrap_or("(unknown address)")
                ))
                .or_insert((0, 0));
            w.0 += r.samples + retry;
            w.1 += r.executed;
            continue;
        } else if op == "WARPGROUP" && r.sass.contains("DEPBAR") {
            "wgmma (WARPGROUP.DEPBAR)".to_string()
        } else if op == "BAR" && r.sass.contains("BAR.SYNC") {
            "named barrier (BAR.SYNC)".to_string()
        } else {
            continue;
        };
        let w = waits.entry(what).or_insert((0, 0));
        w.0 += r.samples;
        w.1 += r.executed;
    }
    let mut waits: Vec<Wait> = waits
        .into_iter()
        .filter(|(_, (s, _))| *s > 0)
        .map(|(what, (samples, executed))| Wait {
            what,
            samples,
            executed,
        })
        .collect();
    waits.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.what.cmp(&b.what)));
    let mut order: Vec<usize> = (0..rows.len()).filter(|i| rows[*i].samples > 0).collect();
    order.sort_by(|a, b| rows[*b].samples.cmp(&rows[*a].samples).then(a.cmp(b)));
    let hot = order
        .into_iter()
        .take(HOT)
        .map(|i| HotInstruction {
            index: i,
            sass: rows[i].sass.clone(),
            samples: rows[i].samples,
            executed: rows[i].executed,
            stalls: rows[i].stalls.iter().take(3).cloned().collect(),
        })
        .collect();
    SourceProfile {
        kernel,
        samples,
        hot,
        waits,
        stalls: sorted(stalls),
        opcodes: sorted(opcodes),
        executed,
    }
}

impl SourceProfile {
    /// A share of the kernel's samples, in percent.
    fn pct(&self, n: u64) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            100.0 * n as f64 / self.samples as f64
        }
    }

    /// The summary as text lines (the `profile --source` section).
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "where the warps wait: {} · {} samples, {} warp instructions executed",
            self.kernel, self.samples, self.executed
        )];
        out.push("  waits (samples at the wait and its retry branch):".into());
        for w in self.waits.iter().take(8) {
            out.push(format!(
                "    {:5.1}%  {}  ({} passes)",
                self.pct(w.samples),
                w.what,
                w.executed
            ));
        }
        out.push("  hot instructions:".into());
        for h in &self.hot {
            let st: Vec<String> = h.stalls.iter().map(|(r, v)| format!("{r} {v}")).collect();
            out.push(format!(
                "    {:5.1}%  #{:<6} ×{:<9} {}  [{}]",
                self.pct(h.samples),
                h.index,
                h.executed,
                h.sass,
                st.join(", ")
            ));
        }
        let st: Vec<String> = self
            .stalls
            .iter()
            .take(6)
            .map(|(r, v)| format!("{r} {:.0}%", self.pct(*v)))
            .collect();
        out.push(format!("  stall reasons: {}", st.join(", ")));
        let total = self.executed.max(1) as f64;
        let ops: Vec<String> = self
            .opcodes
            .iter()
            .take(10)
            .map(|(o, v)| format!("{o} {:.0}%", 100.0 * *v as f64 / total))
            .collect();
        out.push(format!("  executed by opcode: {}", ops.join(", ")));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ncu 2025 (CUDA 13) on an H200: unified_attention's template on shape 12, a slice of the
    /// source page (the consumers' item start, waits and epilogue; the producer's waits).
    const FIXTURE: &str =
        include_str!("../../tests/fixtures/ncu/h200-unified_attention-shape12-source.csv");

    #[test]
    fn the_source_page_is_read_into_waits_hot_instructions_and_opcodes() {
        let v = parse_source_csv(FIXTURE).unwrap();
        assert_eq!(v.len(), 1);
        let s = &v[0];
        assert_eq!(s.kernel, "unified_attention_wgmma");
        assert_eq!(s.samples, 135_368);
        // The converter warps' wait for V to land: the try-wait and its retry branch.
        let v_load = s
            .waits
            .iter()
            .find(|w| w.what == "mbarrier [R25+URZ+0x30010]")
            .unwrap();
        assert_eq!(v_load.samples, 81 + 49_966 + 12 + 277);
        assert_eq!(s.waits[0].what, "mbarrier [R25+URZ+0x30010]");
        // The last tile's wait for V: its retry branch comes a few instructions later.
        let v_ready = s
            .waits
            .iter()
            .find(|w| w.what == "mbarrier [UR15+0x30020]")
            .unwrap();
        assert_eq!(v_ready.samples, 63 + 4_282);
        let depbar = s
            .waits
            .iter()
            .find(|w| w.what == "wgmma (WARPGROUP.DEPBAR)")
            .unwrap();
        assert_eq!(depbar.samples, 6_577 + 5_744 + 6_610);
        // The hottest instruction is that retry branch, stalled on the long scoreboard.
        assert_eq!(s.hot.len(), HOT);
        assert_eq!(s.hot[0].samples, 49_966);
        assert!(s.hot[0].sass.contains("BRA"), "{:?}", s.hot[0]);
        assert_eq!(s.hot[0].stalls[0].0, "long_sb");
        assert!(s.hot.windows(2).all(|w| w[0].samples >= w[1].samples));
        // Stall reasons and opcodes are sorted and add up.
        assert!(s.stalls.windows(2).all(|w| w[0].1 >= w[1].1));
        assert_eq!(s.stalls[0].0, "long_sb");
        let by_op: u64 = s.opcodes.iter().map(|(_, n)| n).sum();
        assert_eq!(by_op, s.executed);
        assert!(s.opcodes.iter().any(|(o, _)| o == "STG"));
        assert!(s.opcodes.iter().any(|(o, _)| o == "HGMMA"));
    }

    #[test]
    fn the_text_names_the_waits_and_the_hot_instructions() {
        let s = &parse_source_csv(FIXTURE).unwrap()[0];
        let text = s.lines().join("\n");
        assert!(
            text.contains("where the warps wait: unified_attention_wgmma · 135368 samples"),
            "{text}"
        );
        assert!(
            text.contains(" 37.2%  mbarrier [R25+URZ+0x30010]"),
            "{text}"
        );
        assert!(text.contains("wgmma (WARPGROUP.DEPBAR)"), "{text}");
        assert!(text.contains("stall reasons: long_sb"), "{text}");
    }

    #[test]
    fn opcodes_skip_predicates_and_modifiers() {
        assert_eq!(opcode("@!P0  BRA 0x7f7b7b7e0f70"), "BRA");
        assert_eq!(
            opcode("SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R25+URZ+0x30010], R8"),
            "SYNCS"
        );
        assert_eq!(opcode("@!UP0 UTMALDG.3D [UR8], [UR6]"), "UTMALDG");
        assert_eq!(opcode(""), "");
        assert_eq!(bracket("LDS R0, [UR11]"), Some("[UR11]"));
    }

    #[test]
    fn several_kernels_and_bad_pages() {
        let two = format!(
            "{FIXTURE}{}",
            FIXTURE.replace("unified_attention_wgmma", "second")
        );
        let v = parse_source_csv(&two).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].kernel, "second");
        assert_eq!(v[0].samples, v[1].samples);
        assert!(parse_source_csv("").unwrap().is_empty());
        assert!(
            parse_source_csv("==PROF== nothing profiled\n")
                .unwrap()
                .is_empty()
        );
        let e = parse_source_csv("\"Kernel Name\",\"k\",\n\"Address\",\"Source\"\n").unwrap_err();
        assert!(e.to_string().contains("Warp Stall Sampling"), "{e}");
    }
}
