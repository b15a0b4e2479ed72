//! The tools as the model is told about them: names, descriptions and JSON schemas of their
//! arguments (the protocol adapters in `wire` wrap them for each backend).

use crate::agent::CATEGORIES;
use serde_json::{Value, json};

/// One tool's definition.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: &'static str,
    pub description: String,
    /// JSON schema of the arguments (an object).
    pub schema: Value,
}

fn code_props() -> Value {
    json!({
        "source": {
            "type": "string",
            "description": "The complete kernel file, its `/* atrex:plan ... */` launch plan included."
        },
        "diff": {
            "type": "string",
            "description": "A unified diff against the incumbent (`@@ -a,b +c,d @@` hunks with exact context lines), instead of `source`."
        }
    })
}

/// With `extra` properties added to `source` / `diff`.
fn with_code(extra: Value) -> Value {
    let mut p = code_props();
    if let (Some(p), Value::Object(e)) = (p.as_object_mut(), extra) {
        p.extend(e);
    }
    p
}

/// The six tools.
pub fn definitions() -> Vec<ToolDef> {
    let code_note = "Give `source` (the whole file) or `diff` (against the incumbent); neither means the incumbent.";
    vec![
        ToolDef {
            name: "compile",
            description: format!(
                "Compile a kernel with NVRTC in the harness (no launch). Returns the compiler's diagnostics on the source's lines and each kernel's resources (registers per thread, static shared memory, spilled bytes, max threads per block). {code_note}"
            ),
            schema: json!({"type": "object", "properties": code_props()}),
        },
        ToolDef {
            name: "run",
            description: format!(
                "Compile, check against the reference and time a kernel on some shapes. Returns per shape the verdict, the correctness errors (first bad element, max abs/rel error, mismatching elements), S = T_SOL / T, the median time and T_SOL, and what the kernel printed (device printf). `quick`: 1 seed, short timing; `full`: 5 seeds, adaptive timing. {code_note}"
            ),
            schema: json!({"type": "object", "properties": with_code(json!({
                "shapes": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "description": "Shape ids of the operator (see the operator's shape list); leave out for every shape."
                },
                "mode": {"type": "string", "enum": ["quick", "full"], "description": "Default quick."}
            }))}),
        },
        ToolDef {
            name: "profile",
            description: format!(
                "Profile a kernel on one shape under Nsight Compute. Returns the main kernel's figures (duration, DRAM and SM throughput, occupancy, registers, grid and block, top stall reasons) and the findings (low occupancy, uncoalesced access, bank conflicts, spills, ...). Slow (tens of seconds). {code_note}"
            ),
            schema: json!({"type": "object", "properties": with_code(json!({
                "shape": {"type": "integer", "description": "A shape id; default: the shape that moves the most bytes."}
            }))}),
        },
        ToolDef {
            name: "lookup",
            description: "Search the knowledge base (hardware notes and reference cards, technique cards, anti-patterns, kernel templates) by keywords. Returns document ids with titles; read one with `read`.".into(),
            schema: json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "Keywords, e.g. `vectorized loads bf16` or `bank conflicts`."}
            }, "required": ["query"]}),
        },
        ToolDef {
            name: "read",
            description: "Read one knowledge document (a technique card, an anti-pattern, a hardware note or a kernel template, whole) by its id.".into(),
            schema: json!({"type": "object", "properties": {
                "id": {"type": "string", "description": "A document id from the context's knowledge section or from `lookup`."}
            }, "required": ["id"]}),
        },
        ToolDef {
            name: "propose",
            description: "End the iteration with the next revision of the incumbent: ONE optimization idea. The harness then measures it on every shape (quick, then full when promising) and the engineer or the auto rule decides.".into(),
            schema: json!({"type": "object", "properties": with_code(json!({
                "hypothesis": {"type": "string", "description": "One sentence: what limits the incumbent and why the change helps."},
                "category": {"type": "string", "enum": CATEGORIES, "description": "The one optimization category the revision applies."}
            })), "required": ["hypothesis", "category"]}),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_defined_once_with_an_object_schema() {
        let d = definitions();
        let names: Vec<&str> = d.iter().map(|t| t.name).collect();
        assert_eq!(names, super::super::args::TOOL_NAMES);
        for t in &d {
            assert_eq!(t.schema["type"], "object", "{}", t.name);
            assert!(t.schema["properties"].is_object(), "{}", t.name);
        }
        assert_eq!(
            d[5].schema["properties"]["category"]["enum"]
                .as_array()
                .unwrap()
                .len(),
            CATEGORIES.len()
        );
    }
}
