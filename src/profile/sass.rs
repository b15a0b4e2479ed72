//! A static summary of a kernel's SASS (`compile --sass`): per function, how many instructions
//! and of which opcodes — what a kernel author reads first when asking how much work the
//! compiler put around each wgmma (e.g. descriptor arithmetic on the uniform datapath), whether
//! a loop was unrolled, or whether a change removed the instructions it was meant to remove.
//!
//! Input: the text `cuobjdump -sass` prints — `Function : NAME` lines, then one line per
//! instruction, `/*OFFSET*/  [@P] OPCODE.MODIFIERS operands ;  /* encoding */`.

use serde::Serialize;

/// One function's static instruction counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionSummary {
    pub name: String,
    /// Instructions in its code (every line with an offset, NOPs included).
    pub instructions: usize,
    /// Opcodes without modifiers (`HGMMA.64x128x16.F32.BF16` → `HGMMA`), most frequent first
    /// (ties by name).
    pub opcodes: Vec<(String, usize)>,
    /// Warpgroup MMA instructions (HGMMA).
    pub wgmma: usize,
    /// Instructions on the uniform datapath (opcodes starting with `U`: ULDC, UMOV, UIADD3, …).
    pub uniform: usize,
}

/// Summarises `cuobjdump -sass` output, one entry per function in the order printed.
pub fn summarize(sass: &str) -> Vec<FunctionSummary> {
    let mut out: Vec<FunctionSummary> = Vec::new();
    let mut counts: Vec<std::collections::BTreeMap<String, usize>> = Vec::new();
    for line in sass.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("Function : ") {
            out.push(FunctionSummary {
                name: name.trim().to_string(),
                instructions: 0,
                opcodes: Vec::new(),
                wgmma: 0,
                uniform: 0,
            });
            counts.push(Default::default());
            continue;
        }
        let (Some(f), Some(c)) = (out.last_mut(), counts.last_mut()) else {
            continue;
        };
        let Some(op) = opcode(t) else {
            continue;
        };
        f.instructions += 1;
        if op == "HGMMA" {
            f.wgmma += 1;
        }
        if op.starts_with('U') {
            f.uniform += 1;
        }
        *c.entry(op.to_string()).or_default() += 1;
    }
    for (f, c) in out.iter_mut().zip(counts) {
        let mut v: Vec<(String, usize)> = c.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        f.opcodes = v;
    }
    out
}

/// The opcode (without modifiers) of an instruction line, None for any other line.
fn opcode(t: &str) -> Option<&str> {
    let rest = t.strip_prefix("/*")?;
    let (off, rest) = rest.split_once("*/")?;
    if off.is_empty() || !off.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut toks = rest.split_whitespace();
    let mut tok = toks.next()?;
    if tok.starts_with('@') {
        tok = toks.next()?;
    }
    let op = tok.split('.').next()?.trim_end_matches(';');
    (!op.is_empty() && op.chars().next()?.is_ascii_uppercase()).then_some(op)
}

/// One line per function: its size, its wgmma and uniform-datapath counts, the top opcodes.
pub fn describe(f: &FunctionSummary, top: usize) -> String {
    let share = |n: usize| {
        if f.instructions == 0 {
            0.0
        } else {
            100.0 * n as f64 / f.instructions as f64
        }
    };
    let ops: Vec<String> = f
        .opcodes
        .iter()
        .take(top)
        .map(|(o, n)| format!("{o} {n}"))
        .collect();
    format!(
        "{}: {} instructions, {} HGMMA, {} uniform-datapath ({:.0} %); {}",
        f.name,
        f.instructions,
        f.wgmma,
        f.uniform,
        share(f.uniform),
        ops.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXCERPT: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/sass/sm90a-attention-excerpt.sass"
    ));

    /// cuobjdump's output for two functions (NVRTC 13.0, sm_90a: part of the unified_attention
    /// template around a wgmma, the start of silu_and_mul_tma), counted independently.
    #[test]
    fn each_function_is_counted_by_opcode() {
        let s = summarize(EXCERPT);
        assert_eq!(s.len(), 2, "{s:?}");
        assert_eq!(s[0].name, "unified_attention_wgmma");
        assert_eq!(s[0].instructions, 58);
        assert_eq!(s[0].wgmma, 5);
        assert_eq!(s[0].uniform, 14);
        assert_eq!(s[0].opcodes[0], ("R2UR".to_string(), 8));
        assert_eq!(s[0].opcodes[1], ("IMAD".to_string(), 7));
        assert_eq!(s[1].name, "silu_and_mul_tma");
        assert_eq!(s[1].instructions, 15);
        assert_eq!(s[1].uniform, 4);
        let total: usize = s[1].opcodes.iter().map(|(_, n)| n).sum();
        assert_eq!(total, 15);
    }

    /// Predicated instructions count under their opcode; the encoding lines, headers and
    /// anything before the first function are not instructions.
    #[test]
    fn predicates_encodings_and_headers_are_not_opcodes() {
        assert_eq!(opcode("/*e920*/  @!P0  BRA 0x2c20 ;"), Some("BRA"));
        assert_eq!(
            opcode("/*f5f0*/   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR24], RZ, !UPT ;"),
            Some("HGMMA")
        );
        assert_eq!(opcode("/* 0x000ff00000000800 */"), None);
        assert_eq!(opcode(".headerflags @\"EF_CUDA_SM90\""), None);
        let s = summarize("/*0000*/ EXIT ;\n\t\tFunction : k\n/*0000*/ EXIT ;\n");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].instructions, 1);
        assert_eq!(
            describe(&s[0], 3),
            "k: 1 instructions, 0 HGMMA, 0 uniform-datapath (0 %); EXIT 1"
        );
    }
}
