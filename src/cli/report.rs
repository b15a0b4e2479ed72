//! `report`: writes the self-contained HTML report of where the suite stands
//! (docs/report.md) and prints its path, or with `--json` its figures.

use crate::config::Settings;
use crate::report::{self, ReportData};
use crate::suite::{Suite, Workspace};
use serde_json::json;
use std::path::{Path, PathBuf};

pub struct Args<'a> {
    /// The file to write (default: report.html in the workspace).
    pub out: Option<&'a Path>,
    pub hardware: &'a str,
    pub json: bool,
    /// The settings file given with `--config`.
    pub config: Option<&'a Path>,
}

/// The folders whose sessions are read: the workspace's sessions/ (where `measure` and the
/// agent record) and the `sessions_dir` setting (where the TUI records) when it is another.
/// A settings file that cannot be read is a warning.
fn session_dirs(ws: &Workspace, config: Option<&Path>) -> (Vec<PathBuf>, Vec<String>) {
    let mut dirs = vec![ws.sessions_dir()];
    let file = config
        .map(Path::to_path_buf)
        .or_else(Settings::default_path);
    match Settings::load(file.as_deref()) {
        Ok(s) => {
            if let Some(d) = s.sessions_dir
                && !dirs.contains(&d)
            {
                dirs.push(d);
            }
        }
        Err(e) => {
            return (
                dirs,
                vec![format!("{e} (its sessions_dir is not searched)")],
            );
        }
    }
    (dirs, Vec::new())
}

/// The `report --json` document.
pub fn report_json(path: &Path, d: &ReportData) -> serde_json::Value {
    let ops: Vec<serde_json::Value> = d
        .operators
        .iter()
        .map(|o| {
            let r = o.record.as_ref();
            json!({
                "name": o.name,
                "weight": o.weight,
                "phase": o.phase,
                "state": o.state.name(),
                "stale": match &o.state {
                    report::data::State::Stale(why) => why.clone(),
                    _ => Vec::new(),
                },
                "s_op": o.s_op,
                "s_op_benchmark": o.s_op_benchmark,
                "s_op_measured": r.map(|r| r.s_op),
                "layer": r.map(|r| r.layer.clone()),
                "kernel": r.map(|r| r.kernel.clone()),
                "origin": r.map(|r| r.origin.clone()),
                "measured": r.map(|r| r.date.clone()),
                "passed": r.map(|r| r.passed),
                "num_shapes": o.num_shapes,
                "history": o.history.len(),
                "peers": o.peers,
            })
        })
        .collect();
    json!({
        "path": path.display().to_string(),
        "hardware": d.hardware,
        "standing": d.standing,
        "peers": d.peers,
        "s_agg": d.s_agg,
        "s_agg_benchmark": d.s_agg_benchmark,
        "measured": d.measured,
        "stale": d.stale,
        "missing": d.missing,
        "operators": ops,
        "sessions": d.sessions_read,
        "warnings": d.warnings,
    })
}

pub fn run(ws: &Workspace, suite: &Suite, a: Args) -> Result<i32, String> {
    let hw = suite.hardware(a.hardware)?.clone();
    let standing = super::suite::standing(ws, suite, a.hardware)?;
    let (dirs, mut warnings) = session_dirs(ws, a.config);
    let mut data = report::assemble(&ws.dir, suite, &hw, &standing, &dirs);
    warnings.append(&mut data.warnings);
    data.warnings = warnings;
    for w in &data.warnings {
        eprintln!("atrex-tui: {w}");
    }
    let path = match a.out {
        Some(p) => p.to_path_buf(),
        None => {
            std::fs::create_dir_all(&ws.dir)
                .map_err(|e| format!("{}: cannot create the workspace: {e}", ws.dir.display()))?;
            ws.dir.join("report.html")
        }
    };
    report::write(&path, &report::html::render(&data)).map_err(|e| e.to_string())?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report_json(&path, &data)).map_err(|e| e.to_string())?
        );
    } else {
        println!("{}", path.display());
    }
    Ok(0)
}
