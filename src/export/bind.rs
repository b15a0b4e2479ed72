//! How an exported forward recovers the shape from its arguments.
//!
//! The harness knows every parameter of a shape; a benchmark's `forward` gets only the
//! constructor's arguments and the input tensors. A binding is the ordered list of steps that
//! computes every name the launch plan and the outputs need from what the forward has: the
//! constructor's arguments (`init` parameters), an input's dimension solved for the one unknown
//! in its shape expression (`2*d` = `x.shape[1]` gives `d = x.shape[1] // 2`), an input's dtype
//! (`=dtype` tensors), a list an input holds (`holds = "seq_lens"`: read back to the host),
//! a `let` computed from names already known, a parameter's declared default.
//!
//! Invariants: a step only uses names bound by earlier steps; `verify` checks on every shape of
//! the suite that the steps give each needed name exactly the value the harness uses; a name the
//! forward cannot know is refused with the reason, never guessed. The observed dimensions are
//! the names `x.shape[i]`, which no expression of a problem can spell.

use super::ExportError;
use crate::contract::plan::{Arg, Plan};
use crate::suite::expr::{Env, Expr, Value};
use crate::suite::{Problem, Shape};
use std::collections::{BTreeMap, BTreeSet};

/// One step of a binding.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A constructor argument (an `init` or `init+input` parameter).
    Init { name: String },
    /// The parameter's declared default.
    Default { name: String, value: Value },
    /// Solved from dimension `dim` of input `tensor` (`inverse` reads `x.shape[i]`).
    Dim {
        name: String,
        tensor: usize,
        dim: usize,
        inverse: Expr,
    },
    /// The dtype label of input `tensor` (a `=name` dtype).
    Dtype { name: String, tensor: usize },
    /// The list input `tensor` holds, read back to the host.
    Holds { name: String, tensor: usize },
    /// A `let` name from its definition.
    Let {
        name: String,
        expr: Expr,
        src: String,
    },
}

impl Step {
    pub fn name(&self) -> &str {
        match self {
            Step::Init { name }
            | Step::Default { name, .. }
            | Step::Dim { name, .. }
            | Step::Dtype { name, .. }
            | Step::Holds { name, .. }
            | Step::Let { name, .. } => name,
        }
    }

    /// The names (not observations) the step reads.
    fn deps(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        match self {
            Step::Dim { inverse, .. } => free_vars(inverse, &mut out),
            Step::Let { expr, .. } => free_vars(expr, &mut out),
            _ => {}
        }
        out.retain(|n| !is_observed(n));
        out
    }
}

/// A dimension of an input to compare with what the binding computed.
#[derive(Debug, Clone, PartialEq)]
pub struct DimCheck {
    pub tensor: usize,
    pub dim: usize,
    pub expr: Expr,
    pub src: String,
}

/// The steps, in order, and what the forward checks of its inputs afterwards.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    pub steps: Vec<Step>,
    /// The names the plan and the outputs read.
    pub needed: BTreeSet<String>,
    /// Every input dimension whose expression the bound names determine.
    pub checks: Vec<DimCheck>,
    /// Inputs whose `=expr` dtype the bound names determine.
    pub dtype_checks: Vec<usize>,
}

impl Binding {
    /// The inputs read back to the host on every call.
    pub fn holds(&self) -> Vec<usize> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                Step::Holds { tensor, .. } => Some(*tensor),
                _ => None,
            })
            .collect()
    }
}

/// The name of an observed dimension.
pub fn observed(tensor: &str, dim: usize) -> String {
    format!("{tensor}.shape[{dim}]")
}

fn is_observed(name: &str) -> bool {
    name.contains(".shape[")
}

/// Every variable an expression reads.
pub fn free_vars(e: &Expr, out: &mut BTreeSet<String>) {
    match e {
        Expr::Lit(_) => {}
        Expr::Var(n, _) => {
            out.insert(n.clone());
        }
        Expr::Neg(x, _) => free_vars(x, out),
        Expr::Bin(_, a, b, _) | Expr::Index(a, b, _) => {
            free_vars(a, out);
            free_vars(b, out);
        }
        Expr::Call(_, xs, _) | Expr::List(xs) => xs.iter().for_each(|x| free_vars(x, out)),
    }
}

fn occurrences(e: &Expr, name: &str) -> usize {
    match e {
        Expr::Lit(_) => 0,
        Expr::Var(n, _) => usize::from(n == name),
        Expr::Neg(x, _) => occurrences(x, name),
        Expr::Bin(_, a, b, _) | Expr::Index(a, b, _) => occurrences(a, name) + occurrences(b, name),
        Expr::Call(_, xs, _) | Expr::List(xs) => xs.iter().map(|x| occurrences(x, name)).sum(),
    }
}

fn bin(op: &'static str, a: Expr, b: Expr) -> Expr {
    Expr::Bin(op, Box::new(a), Box::new(b), 0)
}

/// Solves `e = obs` for `unknown`, which occurs once in `e`, through `+ - * /` with known sides
/// and negation. `x * c` gives `obs // c`: a lossy inverse, which the check of that dimension
/// catches at run time.
pub fn invert(e: &Expr, unknown: &str, obs: Expr) -> Option<Expr> {
    match e {
        Expr::Var(n, _) if n == unknown => Some(obs),
        Expr::Neg(x, _) => invert(x, unknown, Expr::Neg(Box::new(obs), 0)),
        Expr::Bin(op, a, b, _) => {
            let left = occurrences(a, unknown) == 1;
            let (x, k) = if left { (a, b) } else { (b, a) };
            if occurrences(k, unknown) != 0 {
                return None;
            }
            let k = (**k).clone();
            let obs = match (*op, left) {
                ("+", _) => bin("-", obs, k),
                ("-", true) => bin("+", obs, k),
                ("-", false) => bin("-", k, obs),
                ("*", _) => bin("//", obs, k),
                ("/", true) => bin("*", obs, k),
                _ => return None,
            };
            invert(x, unknown, obs)
        }
        _ => None,
    }
}

/// The names the launch plan and the outputs read (defines excluded: they are the plan's own).
pub fn needed(p: &Problem, plan: &Plan) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for l in &plan.launches {
        for e in l.grid.iter().chain(&l.block).chain(l.smem.iter()) {
            free_vars(&e.expr, &mut out);
        }
        for c in l.cluster.iter().flatten() {
            free_vars(&c.expr, &mut out);
        }
        // A name that only a launch's `when` reads is needed as much as a grid's.
        if let Some(w) = &l.when {
            free_vars(&w.expr, &mut out);
        }
        for a in &l.args {
            if let Arg::Scalar { expr, .. } = a {
                free_vars(expr, &mut out);
            }
        }
    }
    for t in &plan.tensor_maps {
        for e in t
            .dims
            .iter()
            .chain(&t.strides)
            .chain(&t.boxes)
            .chain(&t.element_strides)
        {
            free_vars(&e.expr, &mut out);
        }
    }
    for s in &plan.scratch {
        free_vars(&s.size.expr, &mut out);
    }
    for key in plan.defines.keys() {
        out.remove(key);
    }
    for o in &p.outputs {
        for d in &o.shape {
            free_vars(&d.expr, &mut out);
        }
        if let Some(src) = o.dtype.strip_prefix('=')
            && let Ok(e) = crate::suite::expr::parse(src.trim())
        {
            free_vars(&e, &mut out);
        }
    }
    out
}

struct Builder<'a> {
    p: &'a Problem,
    steps: Vec<Step>,
    known: BTreeSet<String>,
}

impl Builder<'_> {
    fn add(&mut self, s: Step) {
        self.known.insert(s.name().to_string());
        self.steps.push(s);
    }

    /// Lets and input dimensions until nothing new is learnt: after every `let` that the known
    /// names determine, the simplest dimension that determines one more name — first one that
    /// gives a parameter (unknown `let` names replaced by their definitions, so that the lets
    /// computed from it check the other dimensions), else one that gives a `let` name itself.
    fn fixpoint(&mut self) {
        loop {
            self.lets();
            let Some(step) = self.dim(true).or_else(|| self.dim(false)) else {
                return;
            };
            self.add(step);
        }
    }

    fn lets(&mut self) {
        loop {
            let before = self.known.len();
            for (name, e) in &self.p.lets {
                let mut fv = BTreeSet::new();
                free_vars(&e.expr, &mut fv);
                if !self.known.contains(name) && fv.is_subset(&self.known) {
                    self.add(Step::Let {
                        name: name.clone(),
                        expr: e.expr.clone(),
                        src: e.src.clone(),
                    });
                }
            }
            if self.known.len() == before {
                return;
            }
        }
    }

    /// The unknown `let` names of an expression replaced by their definitions.
    fn inline(&self, e: &Expr, depth: usize) -> Expr {
        match e {
            Expr::Var(n, _) if !self.known.contains(n) && depth < 64 => {
                match self.p.lets.iter().find(|(l, _)| l == n) {
                    Some((_, d)) => self.inline(&d.expr, depth + 1),
                    None => e.clone(),
                }
            }
            Expr::Neg(x, c) => Expr::Neg(Box::new(self.inline(x, depth)), *c),
            Expr::Bin(op, a, b, c) => Expr::Bin(
                op,
                Box::new(self.inline(a, depth)),
                Box::new(self.inline(b, depth)),
                *c,
            ),
            Expr::Index(a, b, c) => Expr::Index(
                Box::new(self.inline(a, depth)),
                Box::new(self.inline(b, depth)),
                *c,
            ),
            Expr::Call(f, xs, c) => Expr::Call(
                f.clone(),
                xs.iter().map(|x| self.inline(x, depth)).collect(),
                *c,
            ),
            Expr::List(xs) => Expr::List(xs.iter().map(|x| self.inline(x, depth)).collect()),
            Expr::Lit(_) | Expr::Var(..) => e.clone(),
        }
    }

    /// The simplest dimension (smallest inverse, then input order) that determines one unknown.
    fn dim(&self, params: bool) -> Option<Step> {
        let mut best: Option<(usize, Step)> = None;
        for (ti, t) in self.p.inputs.iter().enumerate() {
            for (j, d) in t.shape.iter().enumerate() {
                let e = if params {
                    self.inline(&d.expr, 0)
                } else {
                    d.expr.clone()
                };
                let mut fv = BTreeSet::new();
                free_vars(&e, &mut fv);
                let unknown: Vec<&String> = fv.difference(&self.known).collect();
                let [u] = unknown[..] else { continue };
                if params && !self.p.params.contains_key(u) || occurrences(&e, u) != 1 {
                    continue;
                }
                let Some(inverse) = invert(&e, u, Expr::Var(observed(&t.name, j), 0)) else {
                    continue;
                };
                let cost = nodes(&inverse);
                if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                    best = Some((
                        cost,
                        Step::Dim {
                            name: u.clone(),
                            tensor: ti,
                            dim: j,
                            inverse,
                        },
                    ));
                }
            }
        }
        best.map(|(_, s)| s)
    }
}

fn nodes(e: &Expr) -> usize {
    1 + match e {
        Expr::Lit(_) | Expr::Var(..) => 0,
        Expr::Neg(x, _) => nodes(x),
        Expr::Bin(_, a, b, _) | Expr::Index(a, b, _) => nodes(a) + nodes(b),
        Expr::Call(_, xs, _) | Expr::List(xs) => xs.iter().map(nodes).sum(),
    }
}

/// Builds the binding of an operator for a plan, or says which needed name the forward cannot
/// know and why.
pub fn bind(p: &Problem, plan: &Plan) -> Result<Binding, ExportError> {
    let needed = needed(p, plan);
    let mut b = Builder {
        p,
        steps: Vec::new(),
        known: BTreeSet::new(),
    };
    for (name, d) in &p.params {
        if d.source == "init" {
            b.add(Step::Init { name: name.clone() });
        }
    }
    for (i, t) in p.inputs.iter().enumerate() {
        if let Some(h) = &t.holds
            && !b.known.contains(h)
        {
            b.add(Step::Holds {
                name: h.clone(),
                tensor: i,
            });
        }
        if let Some(src) = t.dtype.strip_prefix('=')
            && let Ok(Expr::Var(name, _)) = crate::suite::expr::parse(src.trim())
            && p.params.contains_key(&name)
            && !b.known.contains(&name)
        {
            b.add(Step::Dtype { name, tensor: i });
        }
    }
    b.fixpoint();
    // Constructor arguments that are also inputs: the tensors first, the constructor after.
    for (name, d) in &p.params {
        if d.source == "init+input" && !b.known.contains(name) {
            b.add(Step::Init { name: name.clone() });
        }
    }
    b.fixpoint();
    for (name, d) in &p.params {
        if let Some(v) = &d.default
            && !b.known.contains(name)
        {
            b.add(Step::Default {
                name: name.clone(),
                value: v.clone(),
            });
        }
    }
    b.fixpoint();
    if let Some(missing) = needed.iter().find(|n| !b.known.contains(*n)) {
        return Err(ExportError::Unrecoverable {
            name: missing.clone(),
            why: why_unknown(p, &b.known, missing, 0),
        });
    }
    // Only what the needed names depend on.
    let index: BTreeMap<&str, &Step> = b.steps.iter().map(|s| (s.name(), s)).collect();
    let mut keep: BTreeSet<String> = BTreeSet::new();
    let mut todo: Vec<String> = needed.iter().cloned().collect();
    while let Some(n) = todo.pop() {
        if keep.insert(n.clone())
            && let Some(s) = index.get(n.as_str())
        {
            todo.extend(s.deps());
        }
    }
    let steps: Vec<Step> = b
        .steps
        .iter()
        .filter(|s| keep.contains(s.name()))
        .cloned()
        .collect();
    let mut checks = Vec::new();
    let mut dtype_checks = Vec::new();
    for (ti, t) in p.inputs.iter().enumerate() {
        for (j, d) in t.shape.iter().enumerate() {
            let mut fv = BTreeSet::new();
            free_vars(&d.expr, &mut fv);
            if fv.is_subset(&keep) {
                checks.push(DimCheck {
                    tensor: ti,
                    dim: j,
                    expr: d.expr.clone(),
                    src: d.src.clone(),
                });
            }
        }
        if let Some(src) = t.dtype.strip_prefix('=')
            && let Ok(e) = crate::suite::expr::parse(src.trim())
        {
            let mut fv = BTreeSet::new();
            free_vars(&e, &mut fv);
            if fv.is_subset(&keep) {
                dtype_checks.push(ti);
            }
        }
    }
    Ok(Binding {
        steps,
        needed,
        checks,
        dtype_checks,
    })
}

/// Why a name cannot be computed from the forward's arguments.
fn why_unknown(p: &Problem, known: &BTreeSet<String>, name: &str, depth: usize) -> String {
    if let Some(d) = p.params.get(name) {
        return match (d.source.as_str(), d.ty.as_str()) {
            ("recorded", _) => format!(
                "the parameter `{name}` is recorded from one random draw of the benchmark's inputs, which the forward does not see"
            ),
            (_, "int_list") => format!(
                "the list parameter `{name}` is no input's dimension, and no input declares `holds = \"{name}\"` (docs/problem-format.md)"
            ),
            _ => format!(
                "the parameter `{name}` is neither a constructor argument nor solvable from the inputs' dimensions"
            ),
        };
    }
    if let Some((_, e)) = p.lets.iter().find(|(n, _)| n == name) {
        let mut fv = BTreeSet::new();
        free_vars(&e.expr, &mut fv);
        if let Some(m) = fv.iter().find(|n| !known.contains(*n))
            && depth < 16
        {
            return format!(
                "`{name} = {}` needs `{m}`: {}",
                e.src,
                why_unknown(p, known, m, depth + 1)
            );
        }
    }
    format!(
        "`{name}` is neither a parameter nor a `let` name of {}",
        p.name
    )
}

/// The environment the steps give for a shape, from what its inputs would look like.
pub fn apply(p: &Problem, b: &Binding, shape: &Shape) -> Result<Env, super::ShapeError> {
    use super::ShapeError;
    let truth = p.env(shape)?;
    let mut env = Env::new();
    for t in &p.inputs {
        let dims = p.tensor_dims(t, &truth)?;
        for (j, d) in dims.iter().enumerate() {
            env.insert(observed(&t.name, j), Value::Int(*d as i128));
        }
    }
    for s in &b.steps {
        let v = match s {
            Step::Init { name } => truth
                .get(name)
                .cloned()
                .ok_or_else(|| ShapeError::NoValue {
                    shape: shape.id,
                    name: name.clone(),
                })?,
            Step::Default { value, .. } => value.clone(),
            Step::Dim { inverse, .. } => inverse.eval(&env)?,
            Step::Let { expr, .. } => expr.eval(&env)?,
            Step::Dtype { tensor, .. } => Value::Str(p.tensor_dtype(&p.inputs[*tensor], &truth)?),
            Step::Holds { name, .. } => {
                truth
                    .get(name)
                    .cloned()
                    .ok_or_else(|| ShapeError::NoValue {
                        shape: shape.id,
                        name: name.clone(),
                    })?
            }
        };
        env.insert(s.name().to_string(), v);
    }
    Ok(env)
}

/// Checks on every shape of the operator that the binding gives each needed name the value the
/// harness uses, and that every check of an input's dimensions passes on the benchmark's inputs.
pub fn verify(p: &Problem, b: &Binding) -> Result<(), ExportError> {
    for shape in &p.shapes {
        let fail = |msg: String| ExportError::Binding {
            shape: shape.id,
            msg,
        };
        let truth = p.env(shape).map_err(|e| fail(e.to_string()))?;
        let env = apply(p, b, shape).map_err(|e| fail(e.to_string()))?;
        for n in &b.needed {
            if env.get(n) != truth.get(n) {
                return Err(fail(format!(
                    "`{n}` comes out as {} where the harness uses {}",
                    env.get(n)
                        .map(|v| v.to_string())
                        .unwrap_or("nothing".into()),
                    truth
                        .get(n)
                        .map(|v| v.to_string())
                        .unwrap_or("nothing".into())
                )));
            }
        }
        for c in &b.checks {
            let t = &p.inputs[c.tensor];
            let want = Value::Int(
                p.tensor_dims(t, &truth).map_err(|e| fail(e.to_string()))?[c.dim] as i128,
            );
            let got = c.expr.eval(&env).map_err(|e| fail(e.to_string()))?;
            if got.as_int() != want.as_int() {
                return Err(fail(format!(
                    "the check of `{}` dimension {} (`{}`) gives {got}, the input has {want}",
                    t.name, c.dim, c.src
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
