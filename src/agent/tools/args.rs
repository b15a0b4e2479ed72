//! A tool call's arguments, checked: the JSON the model sent becomes a typed `Call`, or an
//! error that says what is wrong (sent back to the model as the tool's result).

use super::ToolUse;
use crate::agent::{CATEGORIES, normalize_category};
use crate::contract::protocol::Mode;
use serde_json::{Map, Value};

/// The kernel a tool works on.
#[derive(Debug, Clone, PartialEq)]
pub enum Code {
    /// Neither `source` nor `diff`: the incumbent.
    Incumbent,
    /// The complete kernel file.
    Source(String),
    /// A unified diff against the incumbent.
    Diff(String),
}

impl Code {
    /// The code in a few words: `incumbent`, `source 42 lines`, `diff +3 −1`.
    pub fn summary(&self) -> String {
        match self {
            Code::Incumbent => "incumbent".into(),
            Code::Source(s) => format!("source {} lines", s.lines().count()),
            Code::Diff(d) => {
                let (mut add, mut del) = (0, 0);
                for l in d.lines() {
                    if l.starts_with("+++") || l.starts_with("---") {
                        continue;
                    }
                    if l.starts_with('+') {
                        add += 1;
                    } else if l.starts_with('-') {
                        del += 1;
                    }
                }
                format!("diff +{add} −{del}")
            }
        }
    }
}

/// A checked tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Compile {
        code: Code,
    },
    Run {
        code: Code,
        /// None: every shape of the operator.
        shapes: Option<Vec<u32>>,
        mode: Mode,
    },
    Profile {
        code: Code,
        /// None: the shape that moves the most bytes.
        shape: Option<u32>,
    },
    Lookup {
        query: String,
    },
    Read {
        id: String,
    },
    Propose {
        hypothesis: String,
        category: &'static str,
        /// `Source` or `Diff`.
        code: Code,
    },
}

/// The tools, in the order the model is told about them.
pub const TOOL_NAMES: &[&str] = &["compile", "run", "profile", "lookup", "read", "propose"];

impl Call {
    pub fn name(&self) -> &'static str {
        match self {
            Call::Compile { .. } => "compile",
            Call::Run { .. } => "run",
            Call::Profile { .. } => "profile",
            Call::Lookup { .. } => "lookup",
            Call::Read { .. } => "read",
            Call::Propose { .. } => "propose",
        }
    }

    /// Compile, run and profile use the GPU (and its budget).
    pub fn uses_gpu(&self) -> bool {
        matches!(
            self,
            Call::Compile { .. } | Call::Run { .. } | Call::Profile { .. }
        )
    }

    /// The arguments in one line, for the session and the agent pane.
    pub fn summary(&self) -> String {
        match self {
            Call::Compile { code } => code.summary(),
            Call::Run { code, shapes, mode } => format!(
                "{}, shapes {}, {}",
                code.summary(),
                match shapes {
                    None => "all".to_string(),
                    Some(v) => v
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(" "),
                },
                if *mode == Mode::Quick {
                    "quick"
                } else {
                    "full"
                }
            ),
            Call::Profile { code, shape } => format!(
                "{}, shape {}",
                code.summary(),
                shape
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "largest".into())
            ),
            Call::Lookup { query } => format!("\"{}\"", one_line(query, 60)),
            Call::Read { id } => one_line(id, 60),
            Call::Propose { category, code, .. } => format!("{category}, {}", code.summary()),
        }
    }
}

/// At most `n` characters of the first line of `s`.
pub fn one_line(s: &str, n: usize) -> String {
    let l = s.lines().next().unwrap_or("").trim();
    if l.chars().count() <= n {
        l.to_string()
    } else {
        format!("{}…", l.chars().take(n).collect::<String>())
    }
}

/// The arguments of a call the model made, in one line, when they cannot be checked.
pub fn raw_summary(input: &str) -> String {
    one_line(&input.replace(['\n', '\r'], " "), 80)
}

/// What is wrong with a call's arguments: sent back to the model, which can correct them.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArgError {
    #[error(transparent)]
    Oversized(#[from] super::bound::Oversized),
    #[error("unknown tool `{0}` (the tools: {all})", all = TOOL_NAMES.join(", "))]
    UnknownTool(String),
    /// serde_json's words for it.
    #[error("the arguments are not valid JSON ({0})")]
    NotJson(String),
    #[error("the arguments must be a JSON object")]
    NotObject,
    /// `known`: the tool's arguments, quoted and joined.
    #[error("unknown argument `{key}` (this tool takes {known})")]
    UnknownArgument { key: String, known: String },
    #[error("`{key}` must be a string, not {kind}")]
    NotString { key: String, kind: &'static str },
    #[error("`{0}` is required")]
    Required(String),
    #[error("`mode` must be \"quick\" or \"full\", not \"{0}\"")]
    Mode(String),
    #[error("give `source` or `diff`, not both")]
    SourceAndDiff,
    #[error(
        "`source` is not a complete kernel file: it has no `/* atrex:plan` launch plan (send the whole file, or a `diff` against the incumbent)"
    )]
    NotAKernelFile,
    #[error("`diff` has no `@@` hunk (a unified diff against the incumbent)")]
    NoHunk,
    #[error("a shape is a shape id (a number), not {0}")]
    ShapeNotANumber(&'static str),
    /// `known`: the operator's shape ids, as a range where they are one.
    #[error("the operator has no shape {id} (its shapes: {known})")]
    NoShape { id: u64, known: String },
    #[error("`shapes` must be a list of shape ids (or left out for every shape), not {0}")]
    ShapesNotAList(&'static str),
    #[error("`shapes` is empty (leave it out for every shape)")]
    NoShapes,
    #[error("unknown category `{0}` (one of {all})", all = CATEGORIES.join(", "))]
    UnknownCategory(String),
    #[error(
        "propose needs the revision: `source` (the complete kernel file) or `diff` (a unified diff against the incumbent)"
    )]
    NoRevision,
}

/// Checks a tool call against the tools and the operator's shapes; names and arguments over
/// their bounds (`bound::refusal`) are refused before anything is parsed.
pub fn parse(u: &ToolUse, shapes: &[u32]) -> Result<Call, ArgError> {
    if let Some(e) = super::bound::refusal(u) {
        return Err(e.into());
    }
    if !TOOL_NAMES.contains(&u.name.as_str()) {
        return Err(ArgError::UnknownTool(u.name.clone()));
    }
    let text = if u.input.trim().is_empty() {
        "{}"
    } else {
        u.input.as_str()
    };
    let v: Value = serde_json::from_str(text).map_err(|e| ArgError::NotJson(e.to_string()))?;
    let Value::Object(o) = v else {
        return Err(ArgError::NotObject);
    };
    let a = Args(&o);
    let call = match u.name.as_str() {
        "compile" => {
            a.only(&["source", "diff"])?;
            Call::Compile { code: a.code()? }
        }
        "run" => {
            a.only(&["source", "diff", "shapes", "mode"])?;
            let shapes = match o.get("shapes") {
                None | Some(Value::Null) => None,
                Some(v) => Some(shape_list(v, shapes)?),
            };
            let mode = match a.string("mode")?.as_deref() {
                None | Some("quick") => Mode::Quick,
                Some("full") => Mode::Full,
                Some(m) => return Err(ArgError::Mode(m.to_string())),
            };
            Call::Run {
                code: a.code()?,
                shapes,
                mode,
            }
        }
        "profile" => {
            a.only(&["source", "diff", "shape"])?;
            let shape = match o.get("shape") {
                None | Some(Value::Null) => None,
                Some(v) => Some(shape_id(v, shapes)?),
            };
            Call::Profile {
                code: a.code()?,
                shape,
            }
        }
        "lookup" => {
            a.only(&["query"])?;
            Call::Lookup {
                query: a.required("query")?,
            }
        }
        "read" => {
            a.only(&["id"])?;
            Call::Read {
                id: a.required("id")?,
            }
        }
        _ => {
            a.only(&["hypothesis", "category", "source", "diff"])?;
            let hypothesis = a.required("hypothesis")?;
            let cat = a.required("category")?;
            let category =
                normalize_category(&cat).ok_or_else(|| ArgError::UnknownCategory(cat.clone()))?;
            let code = a.code()?;
            if code == Code::Incumbent {
                return Err(ArgError::NoRevision);
            }
            Call::Propose {
                hypothesis,
                category,
                code,
            }
        }
    };
    Ok(call)
}

struct Args<'a>(&'a Map<String, Value>);

impl Args<'_> {
    /// Every key is one of `known`.
    fn only(&self, known: &[&str]) -> Result<(), ArgError> {
        match self.0.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(ArgError::UnknownArgument {
                key: k.clone(),
                known: known
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
            None => Ok(()),
        }
    }

    fn string(&self, k: &str) -> Result<Option<String>, ArgError> {
        match self.0.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(ArgError::NotString {
                key: k.to_string(),
                kind: kind(other),
            }),
        }
    }

    fn required(&self, k: &str) -> Result<String, ArgError> {
        match self.string(k)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            _ => Err(ArgError::Required(k.to_string())),
        }
    }

    /// `source` or `diff` (not both); neither: the incumbent.
    fn code(&self) -> Result<Code, ArgError> {
        let source = self.string("source")?.filter(|s| !s.trim().is_empty());
        let diff = self.string("diff")?.filter(|s| !s.trim().is_empty());
        match (source, diff) {
            (Some(_), Some(_)) => Err(ArgError::SourceAndDiff),
            (Some(s), None) => {
                if !s.contains(crate::contract::plan::PLAN_START) {
                    return Err(ArgError::NotAKernelFile);
                }
                Ok(Code::Source(s))
            }
            (None, Some(d)) => {
                if !d.lines().any(|l| l.starts_with("@@")) {
                    return Err(ArgError::NoHunk);
                }
                Ok(Code::Diff(d))
            }
            (None, None) => Ok(Code::Incumbent),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn known_shapes(shapes: &[u32]) -> String {
    match (shapes.first(), shapes.last()) {
        (Some(a), Some(b)) if shapes.len() == (b - a + 1) as usize => format!("{a}..={b}"),
        _ => shapes
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn shape_id(v: &Value, shapes: &[u32]) -> Result<u32, ArgError> {
    let id = v.as_u64().ok_or(ArgError::ShapeNotANumber(kind(v)))?;
    match u32::try_from(id).ok().filter(|i| shapes.contains(i)) {
        Some(i) => Ok(i),
        None => Err(ArgError::NoShape {
            id,
            known: known_shapes(shapes),
        }),
    }
}

fn shape_list(v: &Value, shapes: &[u32]) -> Result<Vec<u32>, ArgError> {
    let Value::Array(items) = v else {
        return Err(ArgError::ShapesNotAList(kind(v)));
    };
    if items.is_empty() {
        return Err(ArgError::NoShapes);
    }
    let mut out = Vec::new();
    for i in items {
        let id = shape_id(i, shapes)?;
        if !out.contains(&id) {
            out.push(id);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, input: &str) -> Result<Call, ArgError> {
        parse(
            &ToolUse {
                id: "c1".into(),
                name: name.into(),
                input: input.into(),
            },
            &[0, 1, 2, 3],
        )
    }

    #[test]
    fn good_arguments_become_calls() {
        assert_eq!(
            call("run", r#"{"shapes": [3, 1, 3], "mode": "full"}"#).unwrap(),
            Call::Run {
                code: Code::Incumbent,
                shapes: Some(vec![3, 1]),
                mode: Mode::Full
            }
        );
        assert_eq!(
            call("compile", "").unwrap(),
            Call::Compile {
                code: Code::Incumbent
            }
        );
        let p = call(
            "propose",
            r#"{"hypothesis": "h", "category": "Launch config", "diff": "@@ -1,1 +1,1 @@\n-a\n+b\n"}"#,
        )
        .unwrap();
        assert!(matches!(
            p,
            Call::Propose {
                category: "launch-config",
                code: Code::Diff(_),
                ..
            }
        ));
        assert_eq!(p.summary(), "launch-config, diff +1 −1");
    }

    #[test]
    fn bad_arguments_say_what_is_wrong() {
        let cases = [
            ("run", "{\"shapes\": \"all\"}", "`shapes` must be a list"),
            ("run", "{\"shapes\": [9]}", "no shape 9 (its shapes: 0..=3)"),
            ("run", "{\"mode\": \"slow\"}", "`mode` must be"),
            ("run", "{\"source\": \"int x;\"}", "no `/* atrex:plan`"),
            (
                "compile",
                "{\"source\": 3}",
                "`source` must be a string, not a number",
            ),
            ("compile", "{\"src\": \"x\"}", "unknown argument `src`"),
            ("profile", "{\"shape\": \"big\"}", "not a string"),
            ("lookup", "{}", "`query` is required"),
            ("read", "[1]", "must be a JSON object"),
            ("run", "{\"shapes\": [1,", "not valid JSON"),
            (
                "propose",
                "{\"hypothesis\": \"h\", \"category\": \"magic\"}",
                "unknown category",
            ),
            (
                "propose",
                "{\"hypothesis\": \"h\", \"category\": \"fusion\"}",
                "needs the revision",
            ),
            ("diff", "{}", "unknown tool `diff`"),
        ];
        for (name, input, want) in cases {
            let e = call(name, input).unwrap_err().to_string();
            assert!(e.contains(want), "{name} {input}: {e}");
        }
    }
}
