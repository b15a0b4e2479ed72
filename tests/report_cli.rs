//! `atrex-tui report`: the HTML file it writes, parsed (its table agrees with `suite --json`,
//! one chart per measured operator, the roofline, histories, nothing fetched from outside), a
//! workspace with unreadable files, and the page in a real headless browser where one is on PATH.

mod common;

use scraper::{Html, Selector};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "atrex-report-cli-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The binary on workspace `ws`, with settings of its own (none).
fn run(ws: &Path, args: &[&str]) -> Output {
    Command::new(common::exe())
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .env("ATREX_TUI_CONFIG_DIR", ws.join("config"))
        .output()
        .unwrap()
}

fn ok_json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

/// Nothing in the page is fetched from anywhere: no scripts, no linked or embedded documents,
/// no attribute pointing at another resource, no CSS url() or @import.
fn assert_self_contained(doc: &Html, text: &str) {
    for tag in [
        "script", "link", "iframe", "object", "embed", "img", "image", "use", "base",
    ] {
        assert_eq!(doc.select(&sel(tag)).count(), 0, "a <{tag}> element");
    }
    for el in doc.select(&sel("*")) {
        for (name, value) in el.value().attrs() {
            let v = value.trim().to_ascii_lowercase();
            match name {
                "src" | "srcset" | "action" | "formaction" | "data" | "poster" | "background" => {
                    panic!("<{} {name}={value}>", el.value().name())
                }
                "href" | "xlink:href" => {
                    assert!(v.starts_with('#'), "<{} {name}={value}>", el.value().name())
                }
                "style" => assert!(!v.contains("url("), "style={value}"),
                _ => assert!(
                    !(v.contains("http://") || v.contains("https://")) || name == "xmlns",
                    "<{} {name}={value}>",
                    el.value().name()
                ),
            }
        }
    }
    for s in doc.select(&sel("style")) {
        let css = s.text().collect::<String>().to_ascii_lowercase();
        assert!(!css.contains("url(") && !css.contains("@import"), "{css}");
    }
    assert!(
        text.contains("Content-Security-Policy") && text.contains("default-src 'none'"),
        "the page forbids every fetch"
    );
}

#[test]
fn report_of_a_fresh_workspace() {
    let ws = tempdir("fresh");
    std::fs::create_dir_all(ws.join("sessions")).unwrap();
    std::fs::copy(
        root().join("sessions/demo-hand-edits.jsonl"),
        ws.join("sessions/demo-hand-edits.jsonl"),
    )
    .unwrap();
    let out_file = ws.join("shared-report.html");
    let j = ok_json(&run(
        &ws,
        &["report", "--json", "--out", out_file.to_str().unwrap()],
    ));
    assert_eq!(j["path"], out_file.display().to_string());
    let suite = ok_json(&run(&ws, &["suite", "--json"]));
    assert_eq!(
        j["s_agg"], suite["s_agg"],
        "report and suite agree on S_agg"
    );
    assert_eq!(
        j["s_agg_benchmark"], suite["s_agg_benchmark"],
        "and on S_agg under the benchmark's rule"
    );
    assert_eq!(
        format!("{:.3}", j["s_agg_benchmark"]["all"].as_f64().unwrap()),
        common::baselines::s_agg().1.all
    );
    assert!(j["warnings"].as_array().unwrap().is_empty(), "{j}");
    assert_eq!(j["sessions"][0], "sessions/demo-hand-edits.jsonl");

    let text = std::fs::read_to_string(&out_file).unwrap();
    let doc = Html::parse_document(&text);
    assert_self_contained(&doc, &text);

    // The table: 30 operators in the order and with the figures of `suite --json`.
    let rows: Vec<_> = doc.select(&sel("table#s-agg tbody tr")).collect();
    let ops = suite["operators"].as_array().unwrap();
    assert_eq!(rows.len(), 30);
    for (row, op) in rows.iter().zip(ops) {
        let name = row.value().attr("data-op").unwrap();
        assert_eq!(name, op["name"].as_str().unwrap());
        let s_op = row
            .value()
            .attr("data-s-op")
            .map(|s| s.parse::<f64>().unwrap());
        assert_eq!(s_op, op["s_op"].as_f64(), "{name}");
        let cells: Vec<String> = row
            .select(&sel("td"))
            .map(|c| c.text().collect::<String>())
            .collect();
        assert_eq!(
            cells[3],
            format!("{:.2}%", op["weight"].as_f64().unwrap() * 100.0),
            "{name}"
        );
        assert_eq!(cells[7], format!("{:.3}", op["s_op"].as_f64().unwrap()));
        assert_eq!(
            cells[8],
            format!("{:.3}", op["s_op_benchmark"].as_f64().unwrap()),
            "{name}"
        );
        let bench = row
            .value()
            .attr("data-s-op-benchmark")
            .map(|s| s.parse::<f64>().unwrap());
        assert_eq!(bench, op["s_op_benchmark"].as_f64(), "{name}");
        // Each record with the day and GPU of the run that measured it.
        let measured = op["standing"]["measured"].as_str().unwrap();
        assert!(
            cells[13].starts_with(&format!("{measured} · NVIDIA H200")),
            "{name}: {}",
            cells[13]
        );
        // Beside ours, the best peer that passes the check and the gap, as `--json` has them.
        let ours = &j["operators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .unwrap()["peers"];
        let peer = row.select(&sel("[data-peer-s-op]")).next().map(|e| {
            e.value()
                .attr("data-peer-s-op")
                .unwrap()
                .parse::<f64>()
                .unwrap()
        });
        assert_eq!(peer, ours["best"]["s_op"].as_f64(), "{name}");
        let gap = row
            .select(&sel("[data-gap]"))
            .next()
            .map(|e| e.value().attr("data-gap").unwrap().parse::<f64>().unwrap());
        assert_eq!(gap, ours["gap"].as_f64(), "{name}");
        if ours.is_null() {
            assert_eq!(
                (cells[9].as_str(), cells[10].as_str()),
                ("—", "—"),
                "{name}"
            );
        }
    }
    // Where the workspace is behind a library, at a glance: fused_moe against vLLM's.
    let fused = rows
        .iter()
        .find(|r| r.value().attr("data-op") == Some("fused_moe"))
        .unwrap();
    let cells: Vec<String> = fused
        .select(&sel("td"))
        .map(|c| c.text().collect())
        .collect();
    assert!(
        cells[9].starts_with("0.439 vLLM Triton fused_moe"),
        "{}",
        cells[9]
    );
    assert!(cells[10].starts_with('\u{2212}'), "behind: {}", cells[10]);
    assert_eq!(fused.select(&sel("td span.behind")).count(), 1);
    let fp8 = rows
        .iter()
        .find(|r| r.value().attr("data-op") == Some("fp8_blockscale_fused_moe"))
        .unwrap();
    let text: String = fp8.text().collect();
    assert!(text.contains("0.441 ✗ check"), "{text}");
    assert_eq!(j["peers"]["date"], "2026-12-03");
    assert_eq!(
        doc.select(&sel("section#peers table#peer-figures tbody tr"))
            .count(),
        8
    );
    for phase in ["all", "prefill", "decode"] {
        let e = doc
            .select(&sel(&format!("#s-agg-summary [data-phase={phase}]")))
            .next()
            .unwrap();
        let v: f64 = e.value().attr("data-s-agg").unwrap().parse().unwrap();
        assert_eq!(Some(v), suite["s_agg"][phase].as_f64(), "{phase}");
        assert_eq!(
            e.text().collect::<String>(),
            format!("{v:.3}"),
            "shown to 3 places"
        );
        let e = doc
            .select(&sel(&format!(
                "#s-agg-summary [data-benchmark-phase={phase}]"
            )))
            .next()
            .unwrap();
        let v: f64 = e
            .value()
            .attr("data-s-agg-benchmark")
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(Some(v), suite["s_agg_benchmark"][phase].as_f64(), "{phase}");
        assert_eq!(e.text().collect::<String>(), format!("{v:.3}"));
    }
    let summary: String = doc
        .select(&sel("#s-agg-summary"))
        .next()
        .unwrap()
        .text()
        .collect();
    let (s, b) = common::baselines::s_agg();
    let want = format!(
        "= {} strict · {} under the benchmark's rule (prefill {} / {}, decode {} / {})",
        s.all, b.all, s.prefill, b.prefill, s.decode, b.decode
    );
    assert!(summary.contains(&want), "{want}\n{summary}");
    let h1: String = doc.select(&sel("h1")).next().unwrap().text().collect();
    let want = format!("S_agg {} strict · {} benchmark rule on H200", s.all, b.all);
    assert!(h1.contains(&want), "{h1}");

    // One chart of S over shapes per measured operator (all 30: the shipped standing).
    let measured = ops
        .iter()
        .filter(|o| o["standing"]["state"] != "none")
        .count();
    assert_eq!(measured, 30);
    assert_eq!(doc.select(&sel("section.op")).count(), 30);
    assert_eq!(
        doc.select(&sel("section.op figure.s-chart > svg")).count(),
        measured
    );
    // The roofline: the shapes that compute, and every shape's traffic.
    let roof: Vec<_> = doc.select(&sel("section#roofline figure > svg")).collect();
    assert_eq!(roof.len(), 2);
    assert!(
        roof.iter().all(|s| s.select(&sel("circle")).count() > 100),
        "measured shapes drawn"
    );
    let all_shapes = roof[1].select(&sel("circle")).count();
    assert_eq!(all_shapes, 440, "every shape of the shipped standing");

    // rms_norm's history: the four revisions of the session, none the incumbent (a file).
    let hist: Vec<_> = doc
        .select(&sel("section#op-rms_norm table.history tbody tr"))
        .collect();
    assert_eq!(hist.len(), 4);
    let revs: Vec<&str> = hist
        .iter()
        .map(|r| r.value().attr("data-rev").unwrap())
        .collect();
    assert_eq!(revs, ["0", "1", "2", "3"]);
    assert!(
        hist[1]
            .text()
            .collect::<String>()
            .contains("accepted (auto)")
    );
    assert_eq!(doc.select(&sel("tr.incumbent")).count(), 0);
    // An operator no session touched says so.
    let fused = doc
        .select(&sel("section#op-fused_moe p.no-history"))
        .next()
        .unwrap();
    assert!(fused.text().collect::<String>().contains("No session"));
    assert_eq!(doc.select(&sel("#warnings")).count(), 0);

    render_in_a_browser(&out_file, 30);
}

#[test]
fn default_path_and_the_path_printed() {
    let ws = tempdir("default");
    let out = run(&ws, &["report"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(printed, ws.join("report.html").display().to_string());
    assert!(ws.join("report.html").is_file());
    // Unknown hardware: an error naming it, nothing written.
    let ws2 = tempdir("badhw");
    let out = run(&ws2, &["report", "--hardware", "H9000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("H9000"));
    assert!(!ws2.join("report.html").exists());
}

#[test]
fn unreadable_files_are_warnings_and_the_report_is_still_written() {
    let ws = tempdir("corrupt");
    std::fs::create_dir_all(ws.join("standing")).unwrap();
    std::fs::create_dir_all(ws.join("sessions")).unwrap();
    let standing = ws.join("standing/H200.json");
    let session = ws.join("sessions/broken.jsonl");
    std::fs::write(&standing, "{ corrupt").unwrap();
    std::fs::write(&session, "garbage\n{\"v\":1,\"seq\":1}\n").unwrap();
    let out = run(&ws, &["report", "--json"]);
    let j = ok_json(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for p in [&standing, &session] {
        let p = p.display().to_string();
        assert!(stderr.contains(&p), "stderr names {p}: {stderr}");
        assert!(
            j["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w.as_str().unwrap().contains(&p)),
            "{j}"
        );
    }
    let text = std::fs::read_to_string(ws.join("report.html")).unwrap();
    let doc = Html::parse_document(&text);
    let warnings: Vec<String> = doc
        .select(&sel("#warnings li"))
        .map(|l| l.text().collect())
        .collect();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(&standing.display().to_string()))
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(&session.display().to_string()))
    );
    // The rest of the report is there: the shipped standing shows instead.
    assert_eq!(doc.select(&sel("table#s-agg tbody tr")).count(), 30);
    assert_eq!(std::fs::read_to_string(&standing).unwrap(), "{ corrupt");
}

/// The workspace's own peers file is shown instead of the built-in one; one that cannot be read
/// is a warning naming it, and the built-in figures stand in.
#[test]
fn a_workspace_peers_file_overrides_the_built_in_one() {
    let ws = tempdir("peers");
    let file = ws.join("docs/measurements/peers-H200.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let mut peers: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("docs/measurements/peers-H200.json")).unwrap(),
    )
    .unwrap();
    peers["operators"]["fused_moe"]["peers"][0]["s_op"] = 0.30.into();
    std::fs::write(&file, serde_json::to_string_pretty(&peers).unwrap()).unwrap();
    let fused = |j: &serde_json::Value| {
        j["operators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == "fused_moe")
            .unwrap()["peers"]
            .clone()
    };
    let j = ok_json(&run(&ws, &["report", "--json"]));
    assert!(j["warnings"].as_array().unwrap().is_empty(), "{j}");
    assert_eq!(j["peers"]["file"], file.display().to_string());
    assert_eq!(fused(&j)["best"]["s_op"], 0.30);
    assert!(fused(&j)["gap"].as_f64().unwrap() > 0.0, "now ahead");

    std::fs::write(&file, "{\n  \"version\": 1,\n  oops\n}").unwrap();
    let out = run(&ws, &["report", "--json"]);
    let j = ok_json(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let named = format!("{}: not a peers file", file.display());
    assert!(
        stderr.contains(&named) && stderr.contains("line 3"),
        "{stderr}"
    );
    assert!(
        j["warnings"][0].as_str().unwrap().starts_with(&named),
        "{j}"
    );
    assert_eq!(
        j["peers"]["file"],
        "docs/measurements/peers-H200.json (built-in)"
    );
    assert_eq!(fused(&j)["best"]["s_op"], 0.439);
    let text = std::fs::read_to_string(ws.join("report.html")).unwrap();
    assert!(text.contains(&named), "in the page's warnings");
}

/// A headless browser on PATH, if any: (program, is it Firefox).
fn browser() -> Option<(PathBuf, bool)> {
    let path = std::env::var_os("PATH")?;
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
        "firefox",
    ] {
        for d in std::env::split_paths(&path) {
            let p = d.join(name);
            if p.is_file() {
                return Some((p, name == "firefox"));
            }
        }
    }
    None
}

/// Runs `cmd` for at most `limit`, killing it after.
fn output_within(mut cmd: Command, limit: Duration) -> std::io::Result<Option<Output>> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let start = Instant::now();
    // Read the pipes on threads so a chatty browser never blocks on a full pipe.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t1 = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut so, &mut b);
        b
    });
    let t2 = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut se, &mut b);
        b
    });
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(Output {
                status,
                stdout: t1.join().unwrap(),
                stderr: t2.join().unwrap(),
            }));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Opens the report in a real headless browser: Chromium's DOM after loading holds the table's
/// rows and the charts, and its console reports no blocked fetch (the page's policy blocks and
/// logs any); Firefox takes a screenshot. Without a browser on PATH this part is skipped.
fn render_in_a_browser(file: &Path, rows: usize) {
    let Some((exe, firefox)) = browser() else {
        eprintln!(
            "SKIPPED: no headless browser on PATH (chromium, chromium-browser, google-chrome, \
             firefox); the report's structure was checked without one"
        );
        return;
    };
    let url = format!("file://{}", file.display());
    let profile = tempdir("browser-profile");
    let mut cmd = Command::new(&exe);
    if firefox {
        let shot = profile.join("shot.png");
        cmd.arg("--headless")
            .arg("--no-remote")
            .arg("--profile")
            .arg(&profile)
            .arg("--screenshot")
            .arg(&shot)
            .arg(&url);
        let out = output_within(cmd, Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("{}: {e}", exe.display()))
            .unwrap_or_else(|| panic!("{} did not finish in 120 s", exe.display()));
        let png = std::fs::read(&shot).unwrap_or_else(|e| {
            panic!(
                "{} wrote no screenshot ({e}): {}",
                exe.display(),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000);
        return;
    }
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .arg("--dump-dom")
    .arg(&url);
    let out = output_within(cmd, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()))
        .unwrap_or_else(|| panic!("{} did not finish in 120 s", exe.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", exe.display());
    let dom = Html::parse_document(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        dom.select(&sel("table#s-agg tbody tr")).count(),
        rows,
        "the browser loaded the table: {stderr}"
    );
    assert!(dom.select(&sel("section#roofline svg")).count() >= 1);
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "the page logged: {console:?}");
    eprintln!("rendered in {}", exe.display());
}
