//! `replay --json`: a recorded session summarised for scripts.

use crate::suite::{Suite, Workspace};
use std::path::Path;
use std::time::Instant;

/// `replay FILE --json [--timing]`: the summary of a session, without a terminal.
pub fn run(ws: &Workspace, file: &Path, timing: bool) -> Result<i32, String> {
    let suite = Suite::load(ws.suite_source())?;
    let t0 = Instant::now();
    let (timeline, loaded) = crate::session::demos::timeline_of_file_or_demo(file)?;
    let t1 = Instant::now();
    let model = timeline.model_at(&suite, timeline.len());
    let t2 = Instant::now();
    let mut doc = crate::session::timeline_summary(&suite, &timeline, &loaded, &model);
    doc["file"] = serde_json::json!(file.file_name().map(|n| n.to_string_lossy().to_string()));
    if timing {
        doc["timing"] = serde_json::json!({
            "load_ms": (t1 - t0).as_secs_f64() * 1e3,
            "rebuild_ms": (t2 - t1).as_secs_f64() * 1e3,
            "total_ms": (t2 - t0).as_secs_f64() * 1e3,
            "peak_rss_kib": crate::tui::first_frame::peak_rss_kib(),
        });
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
    );
    Ok(0)
}
