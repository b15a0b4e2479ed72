//! `import-atrex-bench`: compare problems/ with a benchmark checkout, optionally update it.

use crate::suite::{Suite, Workspace};

pub fn run(
    suite: &Suite,
    ws: &Workspace,
    dir: &std::path::Path,
    write: bool,
    json: bool,
) -> Result<i32, String> {
    let target = ws.dir.join("problems");
    if write && !target.join("suite.toml").is_file() {
        return Err(format!(
            "--write needs a workspace with its own problems/ ({} has none); run it in a checkout or pass --workspace",
            ws.dir.display()
        ));
    }
    let report =
        crate::suite::import::import(suite, dir, if write { Some(&target) } else { None })?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "compared {} operators, {} shapes with {}",
            report.operators_compared, report.shapes_compared, report.bench_dir
        );
        for n in &report.missing_in_problems {
            println!("  missing in problems/: {n}");
        }
        for n in &report.missing_in_bench {
            println!("  missing in the benchmark: {n}");
        }
        for d in &report.disagreements {
            let shape = d.shape.map(|s| format!(" shape {s}")).unwrap_or_default();
            println!(
                "  {}{shape}: {}: ours {} · benchmark {}",
                d.operator, d.what, d.ours, d.theirs
            );
        }
        for w in &report.written {
            println!("  wrote {w}");
        }
        if report.disagreements.is_empty()
            && report.missing_in_bench.is_empty()
            && report.missing_in_problems.is_empty()
        {
            println!("problems/ agrees with the benchmark");
        }
    }
    // Like diff: 1 when anything differs (written or not), so that scripts can tell.
    let differs = !(report.disagreements.is_empty()
        && report.missing_in_bench.is_empty()
        && report.missing_in_problems.is_empty());
    Ok(if differs { 1 } else { 0 })
}
