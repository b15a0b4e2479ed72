//! The S_agg figures docs/baselines.md prints for the shipped standing (section "The
//! incumbents under the second-round harness"), which `standing::tests::baselines` checks
//! against the standing itself: the tests of what `suite` and `report` print expect these, so
//! that a re-measured incumbent updates the doc and nothing else.

use std::path::Path;

/// S_agg over all phases, prefill and decode, as printed (three decimals).
#[derive(Debug, Clone)]
pub struct Printed {
    pub all: String,
    pub prefill: String,
    pub decode: String,
}

/// The strict S_agg figures and those under the benchmark's rule.
pub fn s_agg() -> (Printed, Printed) {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/baselines.md"))
            .unwrap();
    let start = text
        .find("## The incumbents under the second-round harness")
        .expect("docs/baselines.md has its second-round section");
    let section = &text[start..];
    let mut lines = section
        .match_indices("S_agg = **")
        .map(|(i, _)| parse(&section[i..]));
    (lines.next().unwrap(), lines.next().unwrap())
}

/// "S_agg = **0.310** (prefill 0.343, decode 0.316)".
fn parse(s: &str) -> Printed {
    let cut = |s: &str, before: &str, after: &str| -> String {
        let i = s.find(before).unwrap() + before.len();
        s[i..i + s[i..].find(after).unwrap()].to_string()
    };
    Printed {
        all: cut(s, "S_agg = **", "**"),
        prefill: cut(s, "(prefill ", ","),
        decode: cut(s, ", decode ", ")"),
    }
}
