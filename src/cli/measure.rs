//! `atrex-tui measure`: the headless form of a hand edit — record a kernel file as a human
//! revision in a session, measure it (and the baseline first, if the session has none), and
//! decide.

use crate::bench_doc::Run;
use crate::contract::protocol::*;
use crate::contract::runner::Runner;
use crate::pool::PoolOptions;
use crate::pool::config::Choice;
use crate::session::{
    Author, DecidedBy, Decision, Model, SessionEvent, SessionLock, SessionWriter,
};
use crate::suite::Problem;
use crate::suite::hardware::HardwareProfile;
use crate::suite::{Suite, Workspace};
use std::path::{Path, PathBuf};

/// What to do after measuring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Decide {
    /// Leave the decision pending.
    None,
    Accept,
    Reject,
    /// Accept when every shape passes strict correctness and S_op beats the incumbent's by more
    /// than 1 %; reject otherwise.
    Auto,
}

#[allow(clippy::too_many_arguments)]
pub fn run(
    suite: &Suite,
    ws: &Workspace,
    op: &str,
    kernel: &Path,
    defines: &[String],
    session: Option<&Path>,
    rationale: &str,
    decide: Decide,
    quick: bool,
    workers: &Choice,
    as_json: bool,
) -> Result<i32, String> {
    let p = suite
        .problem(op)
        .ok_or_else(|| format!("unknown operator `{op}` (see `atrex-tui suite`)"))?;
    if quick && matches!(decide, Decide::Auto | Decide::Accept) {
        return Err("accepting a revision needs the full 5-seed strict check: drop --quick".into());
    }
    let source = read_kernel(kernel, defines)?;
    // The session's lock is taken before anything else (one writer per file, held until the
    // command ends), then a session to continue is checked (read only).
    let lock = session.map(crate::session::SessionLock::take).transpose()?;
    if let Some(f) = session.filter(|f| f.exists()) {
        SessionWriter::check_continuable(f)?;
    }
    let rt = crate::pool::runtime()?;
    rt.block_on(async {
        let started = match super::pool::start(workers, PoolOptions::default(), as_json).await {
            Ok(s) => s,
            Err(code) => return Ok(code),
        };
        let client = started.pool.clone();
        let dev = started.dev.clone();
        let (driver, nvrtc) = (started.driver.clone(), started.nvrtc.clone());
        let hw = crate::suite::hardware::profile_for_device(&suite.hardware, &dev.name);
        // Open or create the session.
        let (path, writer, model, fresh) = open_session(suite, ws, session, lock)?;
        let mut rec = crate::session::Recording::new(model, Some(writer));
        rec.append(SessionEvent::RunStart {
            tool_version: env!("CARGO_PKG_VERSION").into(),
            resumed: !fresh,
            gpu: Some(dev.name.clone()),
            driver: Some(driver.clone()),
            nvrtc: nvrtc.clone(),
            hardware: hw.map(|h| h.key.clone()),
            suite: suite.name.clone(),
            suite_version: suite.version.clone(),
        })?;
        let mode = if quick { Mode::Quick } else { Mode::Full };
        let progress = !as_json;
        let has_baseline = rec
            .model
            .ops
            .get(&p.name)
            .map(|o| o.revisions.iter().any(|r| r.recorded))
            .unwrap_or(false);
        // The session starts from the standing's incumbent (else the suite's baseline).
        let store = crate::standing::Store::load(ws, suite);
        for w in store.problems() {
            eprintln!("atrex-tui: {w}");
        }
        if !has_baseline {
            let start = hw
                .map(|h| store.view(&h.key, Some(&dev.name)))
                .and_then(|v| v.start(&p.name));
            record_baseline(&mut rec, &client, suite, p, mode, hw, progress, start).await?;
        }
        let incumbent = rec.model.ops.get(&p.name).and_then(|o| o.incumbent);
        let incumbent_s = rec.model.ops.get(&p.name).and_then(|o| o.incumbent_s());
        let rev = rec.revision(
            p,
            Author::Human,
            incumbent,
            rationale,
            &source,
            Some("file"),
        )?;
        let s = rec
            .measure(&client, suite, p, rev, mode, hw, progress)
            .await?;
        let decision = decision_for(decide, s, incumbent_s);
        if let Some((d, by)) = decision {
            if d == Decision::Accepted && s.is_none() {
                return Err(format!(
                    "{} v{rev} did not pass every shape: it cannot be accepted",
                    p.name
                ));
            }
            rec.decide(p, rev, d, by)?;
        }
        let mut standing = None;
        if matches!(decision, Some((Decision::Accepted, _))) {
            standing = Some(keep(
                ws, suite, p, hw, &dev.name, &driver, &nvrtc, &path, &rec, rev,
            ));
        }
        let verdict = rec
            .model
            .ops
            .get(&p.name)
            .and_then(|o| o.rev(rev))
            .map(|r| r.verdict().label())
            .unwrap_or_default();
        let measured = rec.model.ops.get(&p.name).and_then(|o| o.rev(rev));
        let shapes = measured
            .map(|r| r.measurement.results.values().collect())
            .unwrap_or_default();
        // When the measurement started, as the session recorded it.
        let date = measured
            .and_then(|r| r.measurement.made.as_ref())
            .map(|m| crate::utc::at(m.t as i64))
            .unwrap_or_else(crate::utc::now);
        let result = MeasureResult {
            path: &path,
            p,
            kernel,
            source: &source,
            rev,
            incumbent,
            verdict: &verdict,
            s,
            incumbent_s,
            decision,
            standing: standing.as_ref(),
            run: RunInfo {
                dev: &dev,
                driver: &driver,
                nvrtc: nvrtc.as_deref(),
                hardware: hw.map(|h| h.key.as_str()),
                mode,
                shapes,
                date,
            },
        };
        if as_json {
            print_json(&result)?;
        } else {
            print_text(&result);
        }
        Ok(if s.is_some() { 0 } else { 1 })
    })
}

/// The kernel file's text with `--define`s applied to its plan.
fn read_kernel(kernel: &Path, defines: &[String]) -> Result<String, String> {
    let code = std::fs::read_to_string(kernel).map_err(|e| format!("{}: {e}", kernel.display()))?;
    let source = crate::contract::protocol::Source {
        name: kernel.display().to_string(),
        code,
        defines: Default::default(),
    };
    Ok(super::defines::apply(source, defines)?.code)
}

/// Opens the session to continue (printing its load warnings) or creates a new one, with its
/// lock (`lock`: taken by the caller, else here); returns its path, writer, state and whether it is fresh.
fn open_session(
    suite: &Suite,
    ws: &Workspace,
    session: Option<&Path>,
    lock: Option<SessionLock>,
) -> Result<(PathBuf, SessionWriter, Model, bool), String> {
    let locked = |f: &Path, lock: Option<SessionLock>| match lock {
        Some(l) => Ok(l),
        None => SessionLock::take(f),
    };
    Ok(match session {
        Some(f) if f.exists() => {
            let (writer, loaded) = SessionWriter::continue_locked(f, locked(f, lock)?)?;
            for w in &loaded.warnings {
                eprintln!("atrex-tui: {w}");
            }
            let model = Model::from_records(suite, &loaded.records);
            (f.to_path_buf(), writer, model, false)
        }
        Some(f) => (
            f.to_path_buf(),
            SessionWriter::create_locked(f, locked(f, lock)?)?,
            Model::new(suite),
            true,
        ),
        None => {
            let f = crate::session::store::new_session_path(&ws.sessions_dir());
            (
                f.clone(),
                SessionWriter::create(&f)?,
                Model::new(suite),
                true,
            )
        }
    })
}

/// Records, measures and accepts revision 0: the standing's incumbent (`start`: its source and
/// where it comes from), else the suite's baseline.
#[allow(clippy::too_many_arguments)]
async fn record_baseline(
    rec: &mut crate::session::Recording,
    client: &dyn Runner,
    suite: &Suite,
    p: &Problem,
    mode: Mode,
    hw: Option<&HardwareProfile>,
    progress: bool,
    start: Option<(String, String)>,
) -> Result<(), String> {
    let (code, why, author) = match start {
        Some((code, why)) => (code, why, Author::Incumbent),
        None => (
            crate::contract::kernels::suite_kernel(suite, p, "baseline.cu")?.code,
            "the suite's baseline".to_string(),
            Author::Baseline,
        ),
    };
    let v0 = rec.revision(p, author, None, &why, &code, None)?;
    rec.measure(client, suite, p, v0, mode, hw, progress)
        .await?;
    rec.decide(p, v0, Decision::Accepted, DecidedBy::Auto)?;
    Ok(())
}

/// The decision asked for; `auto` accepts an S_op more than 1 % above the incumbent's.
fn decision_for(
    decide: Decide,
    s: Option<f64>,
    incumbent_s: Option<f64>,
) -> Option<(Decision, DecidedBy)> {
    match decide {
        Decide::None => None,
        Decide::Accept => Some((Decision::Accepted, DecidedBy::Human)),
        Decide::Reject => Some((Decision::Rejected, DecidedBy::Human)),
        Decide::Auto => {
            let better = match (s, incumbent_s) {
                (Some(new), Some(old)) => new > old * 1.01,
                (Some(_), None) => true,
                _ => false,
            };
            Some((
                if better {
                    Decision::Accepted
                } else {
                    Decision::Rejected
                },
                DecidedBy::Auto,
            ))
        }
    }
}

/// What a measurement ended with, for printing.
struct MeasureResult<'a> {
    path: &'a Path,
    p: &'a Problem,
    kernel: &'a Path,
    /// The source measured (its fingerprints go into the document).
    source: &'a str,
    rev: u32,
    incumbent: Option<u32>,
    verdict: &'a str,
    s: Option<f64>,
    incumbent_s: Option<f64>,
    decision: Option<(Decision, DecidedBy)>,
    /// What recording the accepted revision in the standing gave: the file, or why not.
    standing: Option<&'a Result<PathBuf, String>>,
    /// Where and how it was measured, and each shape's result: with the fields above, a
    /// `bench --json` document's (docs/measurements takes either).
    run: RunInfo<'a>,
}

/// The machine and mode of a measurement, and its per-shape results.
struct RunInfo<'a> {
    dev: &'a DeviceInfo,
    driver: &'a str,
    nvrtc: Option<&'a str>,
    hardware: Option<&'a str>,
    mode: Mode,
    shapes: Vec<&'a ShapeResult>,
    /// When the measurement started (UTC).
    date: String,
}

/// Records an accepted revision in the workspace's standing; says so on stderr.
#[allow(clippy::too_many_arguments)]
fn keep(
    ws: &Workspace,
    suite: &Suite,
    p: &Problem,
    hw: Option<&HardwareProfile>,
    gpu: &str,
    driver: &str,
    nvrtc: &Option<String>,
    session: &Path,
    rec: &crate::session::Recording,
    rev: u32,
) -> Result<PathBuf, String> {
    let Some(hw) = hw else {
        let e = format!("no hardware profile matches `{gpu}`: the standing is not updated");
        eprintln!("atrex-tui: {e}");
        return Err(e);
    };
    let keeper = crate::standing::accept::Keeper {
        ws: ws.clone(),
        suite: suite.name.clone(),
        problem: p.clone(),
        print: crate::standing::OpPrint::of(suite, p),
        bench: crate::standing::accept::Bench {
            gpu: gpu.to_string(),
            driver: driver.to_string(),
            nvrtc: nvrtc.clone(),
            hardware: hw.key.clone(),
        },
        session: crate::standing::accept::session_label(&ws.dir, session),
    };
    let w = keeper.accept(&rec.model, rev);
    eprintln!("{}", keeper.report(rev, &w));
    // Named from the workspace, like the session: the document speaks of the project, not of
    // the machine it ran on.
    w.map(|w| PathBuf::from(crate::standing::accept::session_label(&ws.dir, &w.file)))
        .map_err(String::from)
}

/// What `measure --json` prints: the session's view of the measurement (revision, decision,
/// standing) beside the run's fields of a bench document (machine, mode, each shape's result;
/// docs/bench-json.md), so that docs/measurements takes either.
#[derive(serde::Serialize)]
struct MeasureDoc {
    session: String,
    #[serde(flatten)]
    run: Run,
    rev: u32,
    parent: Option<u32>,
    /// The revision's verdict as the app shows it (`S 0.339`, `incorrect`, …).
    verdict: String,
    s_op: Option<f64>,
    incumbent_s_op_before: Option<f64>,
    decision: Option<Decision>,
    standing: Option<Kept>,
}

/// What recording an accepted revision in the standing gave.
#[derive(serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum Kept {
    /// The standing file written.
    File(String),
    /// Why it was not.
    Error(String),
}

/// Prints the result as one pretty JSON document.
fn print_json(r: &MeasureResult<'_>) -> Result<(), String> {
    println!("{}", crate::bench_doc::to_json_pretty(&json_doc(r)));
    Ok(())
}

/// The result as a JSON document.
fn json_doc(r: &MeasureResult<'_>) -> MeasureDoc {
    MeasureDoc {
        session: r.path.display().to_string(),
        run: Run {
            operator: r.p.name.clone(),
            kernel: r.kernel.display().to_string(),
            source_sha256: Some(crate::fingerprint::of_source(r.source)),
            code_sha256: Some(crate::fingerprint::of_code(r.source)),
            gpu: r.run.dev.clone(),
            driver: r.run.driver.to_string(),
            nvrtc: r.run.nvrtc.map(str::to_string),
            hardware: r.run.hardware.map(str::to_string),
            mode: r.run.mode,
            date: Some(r.run.date.clone()),
            tool_version: Some(env!("CARGO_PKG_VERSION").to_string()),
            shapes: r.run.shapes.iter().map(|s| (*s).clone()).collect(),
        },
        rev: r.rev,
        parent: r.incumbent,
        verdict: r.verdict.to_string(),
        s_op: r.s,
        incumbent_s_op_before: r.incumbent_s,
        decision: r.decision.map(|d| d.0),
        standing: r.standing.map(|s| match s {
            Ok(f) => Kept::File(f.display().to_string()),
            Err(e) => Kept::Error(e.clone()),
        }),
    }
}

/// Prints the result as one line of text.
fn print_text(r: &MeasureResult<'_>) {
    let (rev, verdict) = (r.rev, r.verdict);
    println!(
        "{} v{rev} ({}): {verdict}; incumbent before: {}; decision: {}; session {}",
        r.p.name,
        r.kernel.display(),
        r.incumbent_s
            .map(|x| format!("S_op {x:.4}"))
            .unwrap_or_else(|| "none".into()),
        r.decision
            .map(|d| format!("{:?}", d.0).to_lowercase())
            .unwrap_or_else(|| {
                "pending (--decide auto|accept|reject decides at once; the TUI with --resume FILE \
                 later)"
                    .into()
            }),
        r.path.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::standing::{build, stale::OpPrint, store};

    /// A `measure --json` document gives the same standing record as the `bench --json`
    /// document of the same run: here the unified_attention template's full run on the H200
    /// (docs/measurements), its shapes and machine put through the measure document, printed
    /// and read back as docs/measurements would read it.
    #[test]
    fn the_json_is_a_bench_document_too() {
        let suite = crate::testing::suite();
        let p = suite.problem("unified_attention").unwrap();
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/measurements/bench-best-unified_attention.json"
        );
        let bench =
            crate::bench_doc::BenchDoc::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
        let kernel = "knowledge/templates/unified_attention_wgmma.cu";
        let source = store::template_source(kernel).unwrap();
        let r = MeasureResult {
            path: Path::new("sessions/unified-attention-wgmma.jsonl"),
            p,
            kernel: Path::new(kernel),
            source: &source,
            rev: 3,
            incumbent: Some(2),
            verdict: "S 0.339",
            s: Some(bench.s_op),
            incumbent_s: Some(0.244),
            decision: Some((Decision::Accepted, DecidedBy::Auto)),
            standing: Some(&Ok(PathBuf::from("standing/H200.json"))),
            run: RunInfo {
                dev: &bench.run.gpu,
                driver: &bench.run.driver,
                nvrtc: bench.run.nvrtc.as_deref(),
                hardware: bench.run.hardware.as_deref(),
                mode: Mode::Full,
                shapes: bench.run.shapes.iter().collect(),
                date: bench.run.date.clone().unwrap(),
            },
        };
        let text = crate::bench_doc::to_json_pretty(&json_doc(&r));
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["s_op"], bench.s_op);
        assert_eq!(doc["shapes"].as_array().unwrap().len(), 25);
        assert_eq!(doc["code_sha256"], crate::fingerprint::of_code(&source));
        assert_eq!(
            (
                &doc["session"],
                &doc["rev"],
                &doc["parent"],
                &doc["verdict"]
            ),
            (
                &"sessions/unified-attention-wgmma.jsonl".into(),
                &3.into(),
                &2.into(),
                &"S 0.339".into()
            )
        );
        assert_eq!(doc["decision"], "accepted");
        assert_eq!(
            doc["standing"],
            serde_json::json!({"file": "standing/H200.json"})
        );
        assert_eq!(doc["incumbent_s_op_before"], 0.244);
        // Only the run's fields and the session's: nothing of a bench document's own.
        for absent in [
            "defines",
            "workers",
            "pool",
            "wall_s",
            "shapes_asked",
            "incumbent",
        ] {
            assert!(doc.get(absent).is_none(), "{absent}");
        }
        let print = OpPrint::of(suite, p);
        let record = |d: &crate::bench_doc::Run| {
            build::from_bench_doc(
                p,
                &print,
                &source,
                kernel,
                d,
                &Default::default(),
                Some(&build::Dated {
                    date: "2020-01-01".into(),
                    tool_version: "0.0.0".into(),
                }),
            )
            .unwrap()
        };
        assert_eq!(doc["date"], bench.run.date.clone().unwrap());
        assert_eq!(doc["tool_version"], env!("CARGO_PKG_VERSION"));
        let measured = crate::bench_doc::Run::from_value(doc).unwrap();
        assert_eq!(record(&measured), record(&bench.run));
    }
}
