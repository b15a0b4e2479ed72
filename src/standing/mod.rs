//! The workspace's standing (docs/standing.md): per hardware profile, each operator's incumbent
//! — its kernel, where it came from and its latest full measurement — so that a new session, the
//! TUI's first screen, `suite` and `bench --all` know where the suite stands.
//!
//! Layout: `format` (the file, its version and checks, older versions converted), `store`
//! (paths, atomic writes, backups, recording), `stale` (an operator's fingerprints and
//! staleness; the fingerprints themselves are `crate::fingerprint`'s), `build` (records from
//! measurements and from bench JSON), `accept` (an accepted revision into a record), `shipped`
//! (the H200 standing built into the binary), `error` (a record not written, a record's kernel
//! not read). `Store` reads everything
//! once; `Store::view` judges it for a hardware profile and GPU without reading anything.

pub mod accept;
pub mod build;
pub mod error;
pub mod format;
pub mod shipped;
pub mod stale;
pub mod store;

#[cfg(test)]
mod tests;

pub use format::{MeasuredOn, Origin, Record, ShapeMeasured, StandingFile};
pub use stale::{OpPrint, Stale};
pub use store::Update;

use crate::suite::WorkQ;
use crate::suite::hardware::HardwareProfile;
use crate::suite::roofline::{self, ByRule, Rule};
use crate::suite::{PhaseFilter, Problem, Suite, SuiteSource, Workspace};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Which file a record comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// The workspace's own standing file.
    Workspace,
    /// The standing built into the binary.
    Shipped,
}

impl Layer {
    pub fn name(self) -> &'static str {
        match self {
            Layer::Workspace => "workspace",
            Layer::Shipped => "shipped",
        }
    }
}

/// One operator's incumbent as judged now.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub record: Record,
    pub layer: Layer,
    /// Why it is stale; empty when it stands.
    pub stale: Vec<Stale>,
    /// The kernel's text, when it can be read.
    pub source: Option<String>,
}

impl Entry {
    pub fn fresh(&self) -> bool {
        self.stale.is_empty()
    }

    /// S_op when the record stands (a stale record counts 0, shown as such).
    pub fn s_op(&self) -> Option<f64> {
        self.fresh().then_some(self.record.measurement.s_op)
    }

    /// S_op under `rule` when the record stands. A record written before it kept the
    /// benchmark-compatible S_op has it computed from its shapes (`p`: the operator).
    pub fn s_op_under(&self, rule: Rule, p: &Problem) -> Option<f64> {
        let m = &self.record.measurement;
        self.fresh().then(|| match rule {
            Rule::Strict => m.s_op,
            Rule::Benchmark => m
                .s_op_benchmark
                .unwrap_or_else(|| build::s_op_over(p, &m.shapes, true)),
        })
    }

    /// Whether the record measured exactly `source`: the kernel it names reads as `source` now
    /// and its source fingerprint is that text's (then the record's measurement is that
    /// source's, wherever the text came from).
    pub fn measured(&self, source: &str) -> bool {
        self.source.as_deref() == Some(source)
            && !self.stale.iter().any(|s| matches!(s, Stale::SourceChanged))
    }

    /// "stale: source changed, shapes changed".
    pub fn stale_label(&self) -> String {
        self.stale
            .iter()
            .map(|s| s.label())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// How many of a phase view's operators have a standing record, stale or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    pub measured: usize,
    pub stale: usize,
    pub missing: usize,
}

/// The standing of one hardware profile: the workspace's records over the shipped ones, each
/// judged against the suite, the GPU and the hardware profile in use.
#[derive(Debug, Clone, PartialEq)]
pub struct Standing {
    /// The hardware profile in use for T_SOL.
    pub hardware: String,
    /// The workspace's file for this profile (which may not exist yet).
    pub file: PathBuf,
    /// Where and when the entries that come from the shipped standing were measured ("measured
    /// 2026-11-30 – 2026-12-02 on NVIDIA H200 (driver 13.0, atrex-tui 0.1.0)"), when some do.
    pub shipped: Option<String>,
    /// Files that were reported and ignored (path and why).
    pub problems: Vec<String>,
    pub entries: BTreeMap<String, Entry>,
}

impl Standing {
    /// A standing with no records.
    pub fn empty(hardware: &str) -> Standing {
        Standing {
            hardware: hardware.to_string(),
            file: PathBuf::new(),
            shipped: None,
            problems: Vec::new(),
            entries: BTreeMap::new(),
        }
    }

    pub fn entry(&self, op: &str) -> Option<&Entry> {
        self.entries.get(op)
    }

    /// S_op of every operator whose record stands.
    #[cfg(test)]
    pub fn s_ops(&self) -> BTreeMap<String, f64> {
        self.entries
            .iter()
            .filter_map(|(op, e)| e.s_op().map(|s| (op.clone(), s)))
            .collect()
    }

    /// S_agg over a phase view: stale and missing operators count 0.
    #[cfg(test)]
    pub fn s_agg(&self, suite: &Suite, phase: PhaseFilter) -> f64 {
        roofline::s_agg(suite, phase, &self.s_ops())
    }

    /// S_op under `rule` of every operator of the suite whose record stands.
    pub fn s_ops_under(&self, suite: &Suite, rule: Rule) -> BTreeMap<String, f64> {
        suite
            .problems
            .iter()
            .filter_map(|p| {
                let s = self.entries.get(&p.name)?.s_op_under(rule, p)?;
                Some((p.name.clone(), s))
            })
            .collect()
    }

    /// S_agg over a phase view under the strict level and under the benchmark's rule.
    pub fn s_agg_by_rule(&self, suite: &Suite, phase: PhaseFilter) -> ByRule {
        roofline::s_agg_by_rule(
            suite,
            phase,
            &self.s_ops_under(suite, Rule::Strict),
            &self.s_ops_under(suite, Rule::Benchmark),
        )
    }

    /// Measured, stale and missing operators of a phase view.
    pub fn tally(&self, suite: &Suite, phase: PhaseFilter) -> Tally {
        let mut t = Tally::default();
        for p in suite.by_weight(phase) {
            match self.entries.get(&p.name) {
                Some(e) if e.fresh() => t.measured += 1,
                Some(_) => t.stale += 1,
                None => t.missing += 1,
            }
        }
        t
    }

    /// Where the records come from: "shipped, measured 2026-11-30 – 2026-12-02 on NVIDIA H200
    /// (…)", "standing/H200.json", or both.
    pub fn describe(&self) -> String {
        let own = self.entries.values().any(|e| e.layer == Layer::Workspace);
        let name = Path::new("standing").join(self.file.file_name().unwrap_or_default());
        match (own, &self.shipped) {
            (true, Some(s)) => format!("{} over the shipped standing ({s})", name.display()),
            (true, None) => name.display().to_string(),
            (false, Some(s)) => format!("shipped, {s}"),
            (false, None) => "none yet".into(),
        }
    }

    /// A short line for a header: "shipped, measured 2026-11-30 – 2026-12-02 on NVIDIA H200"
    /// (the days and GPUs of the shipped records it holds), "standing/H200.json",
    /// "standing/H200.json + shipped", "none yet".
    pub fn short(&self) -> String {
        let own = self.entries.values().any(|e| e.layer == Layer::Workspace);
        let shipped = MeasuredOn::of(
            self.entries
                .values()
                .filter(|e| e.layer == Layer::Shipped)
                .map(|e| &e.record),
        );
        let name = Path::new("standing").join(self.file.file_name().unwrap_or_default());
        match (own, shipped) {
            (false, None) => "none yet".into(),
            (false, Some(m)) => format!("shipped, {}", m.short()),
            (true, None) => name.display().to_string(),
            (true, Some(_)) => format!("{} + shipped", name.display()),
        }
    }

    /// The kernel a new session starts from for `op` (the incumbent's source, when it can be
    /// read) and a line saying where it comes from.
    pub fn start(&self, op: &str) -> Option<(String, String)> {
        let e = self.entries.get(op)?;
        let src = e.source.clone()?;
        Some((
            src,
            format!(
                "the standing's incumbent ({}, {})",
                e.record.origin.label(),
                e.layer.name()
            ),
        ))
    }
}

/// Everything a standing is made from, read once: the workspace's file of every hardware
/// profile of the suite, the shipped standing, the kernels they name and the suite's
/// fingerprints. `view` judges it for a profile and a GPU without reading anything.
#[derive(Debug, Clone)]
pub struct Store {
    pub ws: PathBuf,
    pub suite: String,
    files: BTreeMap<String, StandingFile>,
    problems: Vec<String>,
    shipped: Option<StandingFile>,
    kernels: BTreeMap<String, Result<String, String>>,
    /// What records are judged against (fingerprints, every shape's W and Q).
    judge: Judge,
}

/// What the suite says a record is judged against: each operator's fingerprints and every
/// shape's work (W and Q), from which a profile's T_SOL follows. Computed once — when the store
/// is made, or for `Store::later` when first needed — and shared by the store's clones.
#[derive(Debug, Clone)]
struct Judge {
    /// The suite to compute from when first needed (`Store::later`).
    from: Option<Arc<Suite>>,
    facts: Arc<OnceLock<Facts>>,
}

#[derive(Debug)]
struct Facts {
    prints: BTreeMap<String, OpPrint>,
    /// Every shape's W and Q, by operator (a shape whose work cannot be computed is left out).
    works: BTreeMap<String, BTreeMap<u32, WorkQ>>,
    /// The suite's hardware profiles, for T_SOL.
    profiles: Vec<HardwareProfile>,
}

impl Facts {
    fn of(suite: &Suite) -> Facts {
        Facts {
            prints: OpPrint::all(suite),
            works: suite
                .problems
                .iter()
                .map(|p| {
                    let w = p
                        .shapes
                        .iter()
                        .filter_map(|s| Some((s.id, p.work(s).ok()?)))
                        .collect();
                    (p.name.clone(), w)
                })
                .collect(),
            profiles: suite.hardware.clone(),
        }
    }

    /// An operator's T_SOL (ms) per shape on a profile of the suite (None: no such profile), as
    /// `roofline::shape_sols` computes it.
    fn sols(&self, hardware: &str, op: &str) -> Option<BTreeMap<u32, f64>> {
        let hw = self.profiles.iter().rev().find(|h| h.key == hardware)?;
        Some(
            self.works
                .get(op)
                .map(|ws| {
                    ws.iter()
                        .filter_map(|(id, w)| Some((*id, roofline::sol(w, hw).ok()?.sol_ms())))
                        .collect()
                })
                .unwrap_or_default(),
        )
    }
}

impl Judge {
    fn now(suite: &Suite) -> Judge {
        Judge {
            from: None,
            facts: Arc::new(OnceLock::from(Facts::of(suite))),
        }
    }

    fn later(suite: Arc<Suite>) -> Judge {
        Judge {
            from: Some(suite),
            facts: Arc::new(OnceLock::new()),
        }
    }

    fn facts(&self) -> &Facts {
        self.facts.get_or_init(|| {
            Facts::of(
                self.from
                    .as_deref()
                    .expect("a judge without its facts keeps its suite"),
            )
        })
    }
}

impl Store {
    /// Reads the workspace's standing files (a bad one is reported in `problems` and ignored),
    /// the shipped standing (when it is for this suite) and every kernel they name.
    pub fn load(ws: &Workspace, suite: &Suite) -> Store {
        Store::load_over(ws, suite, shipped::load(&suite.name))
    }

    /// As `load`, over `shipped` in place of the standing built into the binary (a fixture's).
    pub fn load_over(
        ws: &Workspace,
        suite: &Suite,
        shipped: Result<Option<StandingFile>, String>,
    ) -> Store {
        let mut s = Store::bare(&ws.dir, suite, shipped);
        let mut keys: Vec<String> = suite
            .hardware
            .iter()
            .map(|h| store::file_key(&h.key))
            .collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            match store::load(&ws.dir, &suite.source, &suite.name, &key) {
                Ok(Some(f)) => {
                    s.files.insert(key, f);
                }
                Ok(None) => {}
                Err(bad) => s.problems.push(bad.to_string()),
            }
        }
        s.read_kernels(&ws.dir, &suite.source);
        s
    }

    /// A store of the given shipped standing and no workspace files (nothing read).
    pub fn bare(ws: &Path, suite: &Suite, shipped: Result<Option<StandingFile>, String>) -> Store {
        Store::with_judge(ws, &suite.name, shipped, Judge::now(suite))
    }

    fn with_judge(
        ws: &Path,
        suite: &str,
        shipped: Result<Option<StandingFile>, String>,
        judge: Judge,
    ) -> Store {
        let mut problems = Vec::new();
        let shipped = shipped.unwrap_or_else(|e| {
            problems.push(e);
            None
        });
        Store {
            ws: ws.to_path_buf(),
            suite: suite.to_string(),
            files: BTreeMap::new(),
            problems,
            shipped,
            kernels: BTreeMap::new(),
            judge,
        }
    }

    /// An empty store (as `empty`) whose fingerprints and works are computed from the suite only
    /// when a record is first judged: the app's placeholder until its standing is read.
    pub fn later(ws: &Path, suite: Arc<Suite>) -> Store {
        let name = suite.name.clone();
        Store::with_judge(ws, &name, Ok(None), Judge::later(suite))
    }

    /// A store with nothing in it (no shipped standing either).
    #[cfg(test)]
    pub fn empty(ws: &Path, suite: &Suite) -> Store {
        Store::bare(ws, suite, Ok(None))
    }

    /// Reads the kernels the records name.
    pub fn read_kernels(&mut self, ws: &Path, source: &SuiteSource) {
        let names: Vec<String> = self
            .files
            .values()
            .chain(self.shipped.iter())
            .flat_map(|f| f.operators.values().map(|r| r.kernel.clone()))
            .collect();
        for k in names {
            if let std::collections::btree_map::Entry::Vacant(e) = self.kernels.entry(k) {
                // Kept as the staleness judgement words it (`stale::Now::source`).
                let text = store::read_kernel(ws, source, e.key()).map_err(|e| e.to_string());
                e.insert(text);
            }
        }
    }

    /// An operator's fingerprints as the suite defines it now.
    pub fn print(&self, op: &str) -> Option<&OpPrint> {
        self.judge.facts().prints.get(op)
    }

    /// Files reported and ignored.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// The workspace's own records of a hardware profile, if any.
    #[cfg(test)]
    pub fn own(&self, hardware: &str) -> Option<&StandingFile> {
        self.files.get(&store::file_key(hardware))
    }

    /// The standing of a hardware profile (`hardware`: the profile in use for T_SOL) as judged
    /// on a GPU (`gpu`: None when there is none, and then the GPU is not judged).
    pub fn view(&self, hardware: &str, gpu: Option<&str>) -> Standing {
        let mut entries = BTreeMap::new();
        let own = self.files.get(&store::file_key(hardware));
        let layers = [
            (self.shipped.as_ref(), Layer::Shipped),
            (own, Layer::Workspace),
        ];
        for (file, layer) in layers {
            let Some(file) = file else { continue };
            for (op, r) in &file.operators {
                // Computed when the first record is judged.
                let facts = self.judge.facts();
                let sols = facts.sols(hardware, op);
                let src = self
                    .kernels
                    .get(&r.kernel)
                    .cloned()
                    .unwrap_or_else(|| Err("not read".into()));
                let stale = stale::staleness(
                    r,
                    &stale::Now {
                        source: src.as_deref().map_err(|e| e.as_str()),
                        op: facts.prints.get(op),
                        gpu,
                        hardware,
                        sol_ms: sols.as_ref(),
                    },
                );
                entries.insert(
                    op.clone(),
                    Entry {
                        record: r.clone(),
                        layer,
                        stale,
                        source: src.ok(),
                    },
                );
            }
        }
        let shipped_note = MeasuredOn::of(
            entries
                .values()
                .filter(|e| e.layer == Layer::Shipped)
                .map(|e| &e.record),
        )
        .map(|m| m.note());
        Standing {
            hardware: hardware.to_string(),
            file: store::file_for(&self.ws, hardware),
            shipped: shipped_note,
            problems: self.problems.clone(),
            entries,
        }
    }

    /// Takes a record into the workspace's layer in memory (what `store::record` writes).
    pub fn apply(&mut self, hardware: &str, u: &Update) {
        let key = store::file_key(hardware);
        let f = self
            .files
            .entry(key.clone())
            .or_insert_with(|| StandingFile::new(&self.suite, &key));
        f.operators.insert(u.op.clone(), u.record.clone());
        self.kernels
            .insert(u.record.kernel.clone(), Ok(u.source.clone()));
    }
}
