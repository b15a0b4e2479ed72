//! The operator suite: problems/*.toml loaded at run time, from the workspace or the copy
//! embedded in the binary.
//!
//! Layout: `source` (where files come from, the workspace; the embedded problems and knowledge
//! base), `load` (problem.toml parsing, load errors), `problem` (the operator model, W and Q),
//! `phase` (phase filters), `dtype` (element formats), `draws` (structured draws), `expr`,
//! `hardware`, `roofline`, `import`; the `Suite` itself is here. A kernel of the suite as a
//! job's source is `contract::kernels`'.

mod draws;
pub(crate) mod dtype;
pub(crate) mod expr;
pub(crate) mod hardware;
pub mod import;
mod load;
mod phase;
mod problem;
pub mod roofline;
mod source;

pub use draws::{DrawSpec, Inapplicable, PASS_KINDS, Pass, PassError, fp8_code};
pub(crate) use load::toml_error;
pub use load::{LoadError, line_of, parse_problem};
pub use phase::{Phase, PhaseFilter};
pub use problem::{
    DTYPES, ParamDecl, Problem, Shape, SrcExpr, TensorSpec, Tolerance, WorkQ, dtype_size,
};
pub use source::{EMBEDDED_KNOWLEDGE, EMBEDDED_PROBLEMS, ReadError, SuiteSource, Workspace};

use hardware::HardwareProfile;
use load::RawSuite;
use std::collections::{BTreeMap, BTreeSet};

/// The loaded suite.
#[derive(Debug, Clone)]
pub struct Suite {
    pub name: String,
    pub version: String,
    pub source: SuiteSource,
    /// In file order of suite.toml.
    pub problems: Vec<Problem>,
    pub hardware: Vec<HardwareProfile>,
}

/// A hardware key (`--hardware`, the settings' `hardware`) that no profile of the suite has.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("unknown hardware `{key}` (known: {})", known.join(", "))]
pub struct UnknownHardware {
    pub key: String,
    pub known: Vec<String>,
}

crate::error::text_at_the_edge!(UnknownHardware);

impl Suite {
    /// Loads the suite from a source, validating every file.
    pub fn load(source: SuiteSource) -> Result<Suite, LoadError> {
        let file = source.display_path("suite.toml");
        let bad = |file: &str, operator: Option<String>, msg: String| LoadError {
            file: file.to_string(),
            operator,
            field: None,
            line: None,
            msg,
        };
        let text = source
            .read_checked("suite.toml")
            .map_err(|e| bad(&file, None, e.to_string()))?
            .ok_or_else(|| bad(&file, None, "missing file".into()))?;
        let raw: RawSuite = toml::from_str(&text).map_err(|e| toml_error(&file, None, &text, e))?;
        let mut problems = Vec::new();
        let mut seen_names = BTreeSet::new();
        let mut seen_ids: BTreeMap<String, String> = BTreeMap::new();
        for op in &raw.operators {
            let name = op.get_ref().clone();
            let line = line_of(&text, op.span().start);
            if !seen_names.insert(name.clone()) {
                return Err(LoadError {
                    file: file.clone(),
                    operator: Some(name),
                    field: Some("operators".into()),
                    line: Some(line),
                    msg: "duplicate operator".into(),
                });
            }
            let rel = format!("{name}/problem.toml");
            let pfile = source.display_path(&rel);
            let ptext = source
                .read_checked(&rel)
                .map_err(|e| bad(&pfile, Some(name.clone()), e.to_string()))?
                .ok_or_else(|| {
                    bad(
                        &pfile,
                        Some(name.clone()),
                        format!("missing file (listed in suite.toml line {line})"),
                    )
                })?;
            let mut p = parse_problem(&pfile, &name, &ptext)?;
            let grel = format!("{name}/inputs.cu");
            p.generator = source.read_checked(&grel).map_err(|e| {
                bad(
                    &source.display_path(&grel),
                    Some(name.clone()),
                    e.to_string(),
                )
            })?;
            if let Some(other) = seen_ids.insert(p.id.clone(), name.clone()) {
                return Err(LoadError {
                    file: pfile,
                    operator: Some(name),
                    field: Some("id".into()),
                    line: Some(1),
                    msg: format!("duplicate operator id {} (also {other})", p.id),
                });
            }
            problems.push(p);
        }
        let mut hardware = crate::suite::hardware::load_all(&source)?;
        let calibrated = crate::suite::hardware::calibrated_variants(&hardware);
        hardware.extend(calibrated);
        let suite = Suite {
            name: raw.name,
            version: raw.version.unwrap_or_default(),
            source,
            problems,
            hardware,
        };
        // Every W dtype must have a peak in every hardware profile.
        for p in &suite.problems {
            for (d, e) in &p.flops {
                for hw in &suite.hardware {
                    if !hw.peak_flops.contains_key(d) {
                        return Err(LoadError {
                            file: hw.file.clone(),
                            operator: Some(p.name.clone()),
                            field: Some("peak_flops".into()),
                            line: None,
                            msg: format!(
                                "no peak for dtype `{d}`, which {} uses in work.flops (line {})",
                                p.name, e.line
                            ),
                        });
                    }
                }
            }
        }
        Ok(suite)
    }

    pub fn problem(&self, name: &str) -> Option<&Problem> {
        self.problems
            .iter()
            .find(|p| p.name == name || p.id == name)
    }

    /// Σ raw importance over all operators.
    pub fn importance_total(&self) -> f64 {
        self.problems.iter().map(|p| p.importance).sum()
    }

    /// Weights (raw importance normalized over the operators admitted by the filter), keyed by name.
    pub fn weights(&self, phase: PhaseFilter) -> BTreeMap<String, f64> {
        let total: f64 = self
            .problems
            .iter()
            .filter(|p| phase.admits(&p.phases))
            .map(|p| p.importance)
            .sum();
        self.problems
            .iter()
            .filter(|p| phase.admits(&p.phases))
            .map(|p| {
                (
                    p.name.clone(),
                    if total > 0.0 {
                        p.importance / total
                    } else {
                        0.0
                    },
                )
            })
            .collect()
    }

    /// Operators admitted by the filter, in descending weight (ties by name).
    pub fn by_weight(&self, phase: PhaseFilter) -> Vec<&Problem> {
        let mut v: Vec<&Problem> = self
            .problems
            .iter()
            .filter(|p| phase.admits(&p.phases))
            .collect();
        v.sort_by(|a, b| {
            b.importance
                .total_cmp(&a.importance)
                .then(a.name.cmp(&b.name))
        });
        v
    }

    /// The hardware profile of a key or name (either case).
    pub fn hardware(&self, key: &str) -> Result<&HardwareProfile, UnknownHardware> {
        self.hardware
            .iter()
            .find(|h| h.key.eq_ignore_ascii_case(key) || h.name.eq_ignore_ascii_case(key))
            .ok_or_else(|| UnknownHardware {
                key: key.to_string(),
                known: self.hardware.iter().map(|h| h.key.clone()).collect(),
            })
    }

    pub fn shape_count(&self) -> usize {
        self.problems.iter().map(|p| p.shapes.len()).sum()
    }
}
