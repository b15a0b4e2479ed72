//! The session module's unit tests: events, the reducer, the store and the recorder here;
//! `timeline` for the fast reading of canonical lines and the lazy timeline.

use super::fixtures::*;
use super::model::OpStatus;
use super::*;
use crate::suite::PhaseFilter;

mod timeline;

fn tmpdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("atrex-session-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_demo(path: &std::path::Path) -> Vec<Record> {
    let suite = fixture_suite();
    let mut w = test_log(SessionWriter::create(path).unwrap(), &[]);
    demo_events(&suite)
        .into_iter()
        .map(|e| w.append(e).unwrap())
        .collect()
}

#[test]
fn records_round_trip_and_rebuild_the_same_state() {
    let d = tmpdir("roundtrip");
    let p = d.join("s.jsonl");
    let written = write_demo(&p);
    let loaded = load(&p).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert!(
        loaded.records == written,
        "records differ after a round trip"
    );
    let text = std::fs::read_to_string(&p).unwrap();
    let first = text.lines().next().unwrap();
    assert!(first.starts_with(r#"{"v":1,"seq":1,"t":"#), "{first}");
    assert!(first.contains(r#""kind":"run_start""#), "{first}");
    let suite = fixture_suite();
    let live = {
        let mut m = Model::new(&suite);
        for r in &written {
            m.apply(r);
        }
        m
    };
    assert!(
        Model::from_records(&suite, &loaded.records) == live,
        "replayed state differs"
    );
}

#[test]
fn the_reducer_tracks_incumbents_verdicts_and_scores() {
    let suite = fixture_suite();
    let m = Model::from_records(&suite, &records(demo_events(&suite)));
    let o = &m.ops["rms_norm"];
    assert_eq!(o.incumbent, Some(1));
    assert_eq!(o.rev(2).unwrap().verdict(), RevVerdict::CompileError);
    let s1 = o.rev(1).unwrap().verdict().score().unwrap();
    assert!(s1 > 0.55 && s1 < 0.62, "{s1}");
    assert_eq!(o.best_s(), Some(s1));
    assert_eq!(
        o.status(),
        OpStatus::Failing,
        "latest measured revision failed"
    );
    assert_eq!(m.ops["silu_and_mul"].status(), OpStatus::Measured);
    let all = m.s_agg(&suite, PhaseFilter::All);
    let w = suite.weights(PhaseFilter::All);
    let expect = w["rms_norm"] * s1 + w["silu_and_mul"] * 0.62;
    assert!((all - expect).abs() < 1e-12, "{all} vs {expect}");
    assert_eq!(m.steering.len(), 1);
}

/// A measurement still running when a later run starts was cut off with its run: the reducer
/// makes it interrupted (and says so), never measuring; a replay marks so the measurements its
/// file never ends. Interrupted is neither a failure nor a score.
#[test]
fn a_measurement_cut_off_by_its_run_is_interrupted() {
    let suite = fixture_suite();
    let mut ev = demo_events(&suite);
    ev.push(SessionEvent::MeasureStart {
        op: "rms_norm".into(),
        rev: 2,
        mid: 77,
        mode: "quick".into(),
    });
    let running = Model::from_records(&suite, &records(ev.clone()));
    let r = running.ops["rms_norm"].rev(2).unwrap();
    assert_eq!(r.verdict(), RevVerdict::Measuring);
    assert_eq!(running.ops["rms_norm"].status(), OpStatus::Measuring);
    // Not live (a replay): the file never ends mid 77.
    let mut replayed = running.clone();
    replayed.interrupt_unended(&std::collections::BTreeSet::from([1, 2]));
    assert_eq!(
        replayed.ops["rms_norm"].rev(2).unwrap().verdict(),
        RevVerdict::Interrupted
    );
    let mut ended = running.clone();
    ended.interrupt_unended(&std::collections::BTreeSet::from([77]));
    assert_eq!(
        ended, running,
        "a measurement the file ends is left running"
    );
    // Resumed: the next run's start ends it.
    ev.push(SessionEvent::RunStart {
        tool_version: "0.1.0".into(),
        resumed: true,
        gpu: None,
        driver: None,
        nvrtc: None,
        hardware: None,
        suite: "tui-fixture".into(),
        suite_version: "1".into(),
    });
    let m = Model::from_records(&suite, &records(ev));
    let o = &m.ops["rms_norm"];
    let r = o.rev(2).unwrap();
    assert_eq!(r.measurement.status, model::MeasureStatus::Interrupted);
    assert_eq!(r.verdict(), RevVerdict::Interrupted);
    assert_eq!(r.verdict().label(), "interrupted");
    assert!(!r.verdict().failed() && r.verdict().score().is_none());
    assert_eq!(o.status(), OpStatus::Interrupted);
    assert_eq!(
        o.incumbent_s(),
        m.ops["rms_norm"].rev(1).unwrap().verdict().score()
    );
    assert!(
        m.log.iter().any(|l| l.text
            == "rms_norm v2: its measurement was interrupted (its run ended before it did; m measures it again)"),
        "{:?}",
        m.log
    );
}

/// A revision is named by where it came from; a v0 an older session took from the standing
/// (author `baseline`, via `standing`) is the standing's too.
#[test]
fn revisions_are_named_by_their_origin() {
    let suite = fixture_suite();
    let mut m = Model::new(&suite);
    let v0 = |m: &Model| m.ops["rms_norm"].rev(0).unwrap().clone();
    assert_eq!(v0(&m).origin(), "baseline");
    m.start_from(
        "rms_norm",
        "// the incumbent\n",
        "the standing's incumbent (x.cu, shipped)",
    );
    assert_eq!(v0(&m).author, Author::Incumbent);
    assert_eq!(v0(&m).origin(), "standing");
    let mut older = v0(&m);
    older.author = Author::Baseline;
    assert_eq!(older.origin(), "standing");
    let named = |author: Author, via: Option<&str>| {
        let mut r = v0(&m);
        r.author = author;
        r.via = via.map(str::to_string);
        r.origin()
    };
    assert_eq!(named(Author::Human, Some("editor")), "hand edit");
    assert_eq!(named(Author::Human, Some("external")), "hand edit");
    assert_eq!(named(Author::Human, Some("file")), "file");
    assert_eq!(named(Author::Tuner, None), "tuner");
    assert_eq!(
        named(Author::Model("qwen3-coder".into()), None),
        "qwen3-coder"
    );
}

/// `replay --json` sums the session up under both rules.
#[test]
fn the_summary_has_s_agg_under_both_rules() {
    let suite = fixture_suite();
    let recs = records(demo_events(&suite));
    let m = Model::from_records(&suite, &recs);
    let loaded = Loaded {
        records: recs,
        ..Default::default()
    };
    let doc = summary(&suite, &loaded, &m);
    let both = m.s_agg_by_rule(&suite, PhaseFilter::All);
    assert_eq!(doc["s_agg"]["all"].as_f64(), Some(both.strict));
    assert_eq!(doc["s_agg_benchmark"]["all"].as_f64(), Some(both.benchmark));
    assert!(both.strict > 0.0 && both.benchmark <= both.strict);
}

#[test]
fn rejecting_the_incumbent_falls_back() {
    let suite = fixture_suite();
    let mut ev = demo_events(&suite);
    ev.push(SessionEvent::Decision {
        op: "rms_norm".into(),
        rev: 1,
        decision: Decision::Rejected,
        by: DecidedBy::Human,
    });
    let m = Model::from_records(&suite, &records(ev));
    assert_eq!(m.ops["rms_norm"].incumbent, Some(0));
}

#[test]
fn a_truncated_last_line_is_skipped_with_a_warning_and_resume_cuts_it() {
    let d = tmpdir("trunc");
    let p = d.join("s.jsonl");
    let written = write_demo(&p);
    let full = std::fs::read(&p).unwrap();
    // Cut the last line in half (kill -9 during a write).
    let last_start = full[..full.len() - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    let cut = last_start + (full.len() - last_start) / 2;
    std::fs::write(&p, &full[..cut]).unwrap();
    let loaded = load(&p).unwrap();
    assert_eq!(loaded.records.len(), written.len() - 1);
    assert_eq!(loaded.warnings.len(), 1);
    assert!(
        loaded.warnings[0].contains(&format!(":{}:", written.len())),
        "{:?}",
        loaded.warnings
    );
    // A complete JSON object without its newline is also cut off.
    std::fs::write(&p, &full[..full.len() - 1]).unwrap();
    let l2 = load(&p).unwrap();
    assert_eq!(l2.records.len(), written.len() - 1);
    assert_eq!(l2.warnings.len(), 1);
    // Resume truncates the bad tail and continues the sequence.
    std::fs::write(&p, &full[..cut]).unwrap();
    let (w, loaded) = SessionWriter::continue_file(&p).unwrap();
    let mut w = test_log(w, &loaded.records);
    let r = w
        .append(SessionEvent::Steer {
            op: None,
            text: "more".into(),
        })
        .unwrap();
    assert_eq!(r.seq, written.len() as u64);
    let again = load(&p).unwrap();
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    assert_eq!(again.records.len(), written.len());
}

#[test]
fn a_corrupt_middle_line_is_a_clear_error_and_numbers_out_of_order_a_warning() {
    let suite = fixture_suite();
    let recs = records(demo_events(&suite));
    let mut lines: Vec<String> = recs
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    // A known kind with a malformed field is an error naming the line (an unknown kind is not:
    // see `unknown_kinds_are_kept_and_counted`).
    lines[3] = lines[3].replace("\"mid\":1", "\"mid\":\"one\"");
    let text = lines.join("\n") + "\n";
    let e = parse_text("demo.jsonl", &text).unwrap_err().to_string();
    assert!(e.starts_with("demo.jsonl:4: bad `compiled` event"), "{e}");
    let mut lines2: Vec<String> = recs
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    // Numbers out of order are reported, not refused: every event is kept, in file order.
    lines2.swap(2, 3);
    let l = parse_text("demo.jsonl", &(lines2.join("\n") + "\n")).unwrap();
    assert_eq!(l.records.len(), recs.len());
    assert_eq!(l.records[2].seq, 4);
    assert!(
        l.warnings
            .iter()
            .any(|w| w.starts_with("demo.jsonl:4: sequence number 3 repeats or goes back")),
        "{:?}",
        l.warnings
    );
    let newer =
        r#"{"v":2,"seq":1,"t":0,"kind":"steer","text":"x"}"#.to_string() + "\n" + &lines[0] + "\n";
    let e = parse_text("n.jsonl", &newer).unwrap_err().to_string();
    assert!(e.contains("newer"), "{e}");
}

/// A small deterministic generator for the fuzz test.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn random_truncated_and_mutated_lines_never_panic() {
    let suite = fixture_suite();
    let recs = records(demo_events(&suite));
    let lines: Vec<String> = recs
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let alphabet: Vec<char> = "{}[]\":,0123456789-.eE abcxyz\\\u{0}\u{7f}é\n"
        .chars()
        .collect();
    let mut errors = 0;
    for round in 0..3000 {
        let mut text = String::new();
        for (i, l) in lines.iter().enumerate() {
            let mut l = l.clone();
            if rng.below(4) == 0 || i == round % lines.len() {
                match rng.below(5) {
                    0 => {
                        let cut = rng.below(l.len());
                        let cut = (0..=cut)
                            .rev()
                            .find(|c| l.is_char_boundary(*c))
                            .unwrap_or(0);
                        l.truncate(cut);
                    }
                    1 => {
                        let mut b: Vec<char> = l.chars().collect();
                        let at = rng.below(b.len());
                        b[at] = alphabet[rng.below(alphabet.len())];
                        l = b.into_iter().collect();
                    }
                    2 => {
                        l = (0..rng.below(80))
                            .map(|_| alphabet[rng.below(alphabet.len())])
                            .collect()
                    }
                    3 => l = l.replace("\"rev\":", "\"rev\":-"),
                    _ => l = l.replace("\"seq\":", "\"seq\":1e999,\"x\":"),
                }
            }
            text.push_str(&l);
            if rng.below(10) != 0 {
                text.push('\n');
            }
        }
        match parse_text("fuzz.jsonl", &text) {
            Ok(loaded) => {
                // Whatever parsed must rebuild a state without panicking.
                let _ = Model::from_records(&suite, &loaded.records);
            }
            Err(e) => {
                assert!(e.to_string().starts_with("fuzz.jsonl:"), "{e}");
                errors += 1;
            }
        }
    }
    assert!(
        errors > 100,
        "the mutations should produce errors ({errors})"
    );
}

#[test]
fn secrets_never_reach_the_file() {
    let d = tmpdir("secrets");
    let p = d.join("s.jsonl");
    let mut w = test_log(SessionWriter::create(&p).unwrap(), &[]);
    let secrets = [
        "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
        "sk-1234567890abcdefghijklmnop",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "AKIAIOSFODNN7EXAMPLE",
        "AIzaSyA1234567890abcdefghijklmnopqrst",
        "hf_abcdefghijklmnopqrstuvwxyzABCD",
        "xoxb-123456789012-abcdefghijklmnop",
    ];
    for s in &secrets {
        w.append(SessionEvent::Steer {
            op: None,
            text: format!("use key {s} please"),
        })
        .unwrap();
        w.append(SessionEvent::Error {
            op: None,
            message: format!("HTTP 401 with headers {{\"authorization\": \"Bearer {s}\"}}"),
        })
        .unwrap();
    }
    w.append(SessionEvent::Error {
        op: None,
        message: "Authorization: Bearer abcdef0123456789.token-value".into(),
    })
    .unwrap();
    w.append(SessionEvent::Error {
        op: None,
        message: "x-api-key: zzzzzzzzzzzzyyyyyyyyy".into(),
    })
    .unwrap();
    w.append(SessionEvent::Error {
        op: None,
        message: "OPENAI_API_KEY=q1w2e3r4t5y6u7i8o9p0".into(),
    })
    .unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    for s in &secrets {
        assert!(!text.contains(s), "{s} leaked");
    }
    for leak in ["abcdef0123456789", "zzzzzzzzzzzz", "q1w2e3r4t5y6u7i8o9p0"] {
        assert!(!text.contains(leak), "{leak} leaked:\n{text}");
    }
    assert!(text.contains("[REDACTED]"));
    // Still valid JSON lines, and ordinary text is untouched.
    let l = load(&p).unwrap();
    assert_eq!(l.records.len(), secrets.len() * 2 + 3);
    assert_eq!(
        scrub("task-1234567890abcdefghij and __skip"),
        "task-1234567890abcdefghij and __skip"
    );
    assert_eq!(
        scrub("float4 v = x[i]; // sk- short"),
        "float4 v = x[i]; // sk- short"
    );
}

/// Timing: `cargo test --lib session_timing -- --ignored --nocapture`.
#[test]
#[ignore]
fn session_timing() {
    let suite = fixture_suite();
    let d = tmpdir("timing");
    let p = d.join("big.jsonl");
    let mut w = test_log(SessionWriter::create(&p).unwrap(), &[]);
    let base = demo_events(&suite);
    let mut lat = Vec::new();
    let mut n = 0u64;
    let mut mid = 100;
    while n < 10_000 {
        // revisions with full sources and measurements, on rms_norm
        let rev = (n / 10) as u32 + 10;
        let mut evs = vec![fixtures::revision(
            "rms_norm",
            rev,
            Some(0),
            Author::Tuner,
            "tile sweep",
            match &base[1] {
                SessionEvent::Revision { source, .. } => source,
                _ => "",
            },
        )];
        mid += 1;
        evs.extend(measured(
            "rms_norm",
            rev,
            mid,
            &[(0, 0.4), (1, 0.5), (2, 0.6), (3, 0.7), (4, 0.5), (5, 0.3)],
        ));
        for e in evs {
            if n >= 10_000 {
                break;
            }
            let durable = e.durable();
            let t0 = std::time::Instant::now();
            w.append(e).unwrap();
            if !durable {
                lat.push(t0.elapsed().as_secs_f64() * 1e3);
            }
            n += 1;
        }
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    let p99 = lat[lat.len() * 99 / 100];
    let t0 = std::time::Instant::now();
    let loaded = load(&p).unwrap();
    let t_load = t0.elapsed().as_secs_f64() * 1e3;
    let t1 = std::time::Instant::now();
    let m = Model::from_records(&suite, &loaded.records);
    let t_build = t1.elapsed().as_secs_f64() * 1e3;
    let bytes = std::fs::metadata(&p).unwrap().len();
    println!(
        "session timing: {} events ({:.1} MiB): load {t_load:.1} ms + rebuild {t_build:.1} ms = {:.1} ms; append p50 {:.3} ms p99 {p99:.3} ms",
        loaded.records.len(),
        bytes as f64 / 1048576.0,
        t_load + t_build,
        lat[lat.len() / 2]
    );
    assert_eq!(m.applied, 10_000);
}

#[test]
fn a_profile_event_round_trips_and_reaches_its_revision() {
    let suite = fixture_suite();
    let d = tmpdir("profile");
    let p = d.join("s.jsonl");
    let mut written = write_demo(&p);
    let (w, loaded) = SessionWriter::continue_file(&p).unwrap();
    let mut w = test_log(w, &loaded.records);
    let prof = crate::profile::fixture("rms_norm", 1, 3);
    written.push(
        w.append(SessionEvent::Profile {
            op: "rms_norm".into(),
            rev: 1,
            profile: Box::new(prof.clone()),
        })
        .unwrap(),
    );
    drop(w);
    let loaded = load(&p).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert!(loaded.records == written, "the profile changed on the way");
    assert_eq!(loaded.records.last().unwrap().event.kind(), "profile");
    let m = Model::from_records(&suite, &loaded.records);
    let r = m.ops["rms_norm"].rev(1).unwrap();
    assert_eq!(r.profile.as_deref(), Some(&prof));
    // Each finding is a log line.
    let log: Vec<&str> = m.log.iter().map(|l| l.text.as_str()).collect();
    assert!(
        log.iter()
            .any(|l| l.starts_with("rms_norm v1: profiled shape 3")),
        "{log:?}"
    );
    for f in &prof.findings {
        assert!(log.contains(&f.line().as_str()), "{log:?}");
    }
    assert!(log.contains(
        &"finding [warp_divergence] rms_norm_kernel: warp divergence or partial warps — 21.1 active threads per warp instruction (32 is full)"
    ));
    // A later revision event of the same number keeps the profile.
    let mut recs = loaded.records.clone();
    recs.push(Record {
        v: 1,
        seq: recs.len() as u64 + 1,
        t: 1e10,
        event: revision("rms_norm", 1, Some(0), Author::Human, "again", "// v1\n"),
    });
    let m = Model::from_records(&suite, &recs);
    assert!(m.ops["rms_norm"].rev(1).unwrap().profile.is_some());
}

#[test]
fn the_demo_sessions_are_built_in_and_load() {
    for (name, text) in demos::DEMOS {
        let l = parse_text(name, text).unwrap();
        assert!(l.warnings.is_empty(), "{name}: {:?}", l.warnings);
        assert!(l.records.len() > 100, "{name}");
    }
    // A path that does not exist but names a demo loads the built-in copy.
    let l = demos::load_file_or_demo(std::path::Path::new("/nonexistent/demo-hand-edits.jsonl"))
        .unwrap();
    assert_eq!(
        l.records.len(),
        demos::demo("demo-hand-edits.jsonl")
            .unwrap()
            .lines()
            .count()
    );
    assert!(demos::load_file_or_demo(std::path::Path::new("/nonexistent/x.jsonl")).is_err());
}

/// A tool call of the agent's model round-trips, is one log line (live and in replay alike)
/// and is listed by `replay --json`; its optional fields have defaults.
#[test]
fn a_tool_call_round_trips_is_logged_and_summarised() {
    let suite = fixture_suite();
    let d = tmpdir("tool-call");
    let p = d.join("s.jsonl");
    let mut written = write_demo(&p);
    let (w, loaded) = SessionWriter::continue_file(&p).unwrap();
    let mut w = test_log(w, &loaded.records);
    let call = SessionEvent::ToolCall {
        op: "rms_norm".into(),
        iteration: 2,
        call: 3,
        name: "run".into(),
        args: "diff +3 −1, shapes 0 3, quick".into(),
        ok: true,
        result: "pass · S_op 0.6120 on 2 shapes".into(),
        ms: 2100.0,
        gpu_s: 2.04,
        spent: crate::session::ToolSpent {
            calls: 3,
            gpu_s: 4.5,
            tokens: 12_000,
        },
    };
    written.push(w.append(call).unwrap());
    drop(w);
    let loaded = load(&p).unwrap();
    assert!(loaded.records == written);
    let last = loaded.records.last().unwrap();
    assert_eq!(last.event.kind(), "tool_call");
    let line = serde_json::to_string(last).unwrap();
    assert!(line.contains(r#""kind":"tool_call""#) && line.contains(r#""spent":{"calls":3"#));
    let m = Model::from_records(&suite, &loaded.records);
    let log = &m.log.last().unwrap();
    assert_eq!(
        log.text,
        "tool 2.3 run(diff +3 −1, shapes 0 3, quick) → pass · S_op 0.6120 on 2 shapes (2.1 s, GPU 2.0 s)"
    );
    assert_eq!(log.level, crate::session::model::LogLevel::Info);
    let doc = summary(&suite, &loaded, &m);
    assert_eq!(doc["tool_calls"][0]["name"], "run");
    assert_eq!(doc["tool_calls"][0]["iteration"], 2);
    assert_eq!(doc["tool_calls"][0]["spent"]["tokens"], 12_000);
    // The least a line may hold.
    let r = parse_line(
        r#"{"v":1,"seq":9,"t":1.0,"kind":"tool_call","op":"rms_norm","iteration":1,"call":1,"name":"lookup","ok":false}"#,
    )
    .unwrap();
    let m = Model::from_records(&suite, &[r]);
    assert_eq!(m.log.last().unwrap().text, "tool 1.1 lookup() ✗  (0.0 s)");
}

/// What kernels printed is kept on the measurement and shown (first lines) in the log; output
/// of a superseded measurement is not.
#[test]
fn kernel_output_is_kept_on_its_measurement_and_logged() {
    let suite = fixture_suite();
    let mut ev = demo_events(&suite);
    let text: String = (0..8).map(|i| format!("row {i}: sum 1.5\n")).collect();
    ev.push(SessionEvent::KernelOutput {
        op: "rms_norm".into(),
        rev: 2,
        mid: 3,
        shape: Some(13),
        text: text.clone(),
        dropped: 100,
    });
    ev.push(SessionEvent::KernelOutput {
        op: "rms_norm".into(),
        rev: 2,
        mid: 1,
        shape: Some(0),
        text: "stale".into(),
        dropped: 0,
    });
    let recs = records(ev);
    let line = serde_json::to_string(&recs[recs.len() - 2]).unwrap();
    assert!(line.contains(r#""kind":"kernel_output""#), "{line}");
    let m = Model::from_records(&suite, &recs);
    let r = m.ops["rms_norm"].rev(2).unwrap();
    assert_eq!(r.measurement.output, vec![(Some(13), text)]);
    let log: Vec<&str> = m.log.iter().map(|l| l.text.as_str()).collect();
    assert!(
        log.contains(&"rms_norm v2 shape 13 printed: row 0: sum 1.5"),
        "{log:?}"
    );
    assert!(!log.iter().any(|l| l.contains("row 5")), "{log:?}");
    assert!(
        log.iter()
            .any(|l| l.contains("3 more lines") && l.contains("100 bytes over the 64 KiB limit")),
        "{log:?}"
    );
    assert!(!log.iter().any(|l| l.contains("stale")));
}

mod continuing {
    use super::*;

    fn session_text() -> String {
        let suite = fixture_suite();
        records(demo_events(&suite))
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect()
    }

    /// Anything that is not recognisably a session of this tool is refused and left as it was.
    #[test]
    fn what_is_not_a_session_is_refused_untouched() {
        let d = tmpdir("refuse");
        let notes = d.join("notes.json");
        std::fs::write(&notes, "{\"title\": \"my notes\", \"items\": [1, 2, 3]}\n").unwrap();
        let binary = d.join("blob.bin");
        let bytes: Vec<u8> = (0..3_000_000u32)
            .map(|i| (i.wrapping_mul(2654435761u32) >> 24) as u8)
            .collect();
        std::fs::write(&binary, &bytes).unwrap();
        let empty = d.join("empty.jsonl");
        std::fs::write(&empty, "").unwrap();
        let no_start = d.join("no-start.jsonl");
        let text = session_text();
        std::fs::write(&no_start, text.split_once('\n').unwrap().1).unwrap();
        for (f, needle) in [
            (&notes, "not an atrex-tui session"),
            (&binary, "not an atrex-tui session"),
            (&empty, "empty"),
            (&no_start, "event, not `run_start`"),
        ] {
            let before = std::fs::read(f).unwrap();
            let e = SessionWriter::continue_file(f)
                .err()
                .expect("refused")
                .to_string();
            assert!(
                e.contains(needle) && e.contains("nothing was changed"),
                "{e}"
            );
            assert_eq!(std::fs::read(f).unwrap(), before, "{}", f.display());
        }
        let e = SessionWriter::continue_file(&d).err().unwrap().to_string();
        assert!(e.contains("is a folder"), "{e}");
    }

    /// A file with a line of a newer format is refused wherever the line is; nothing dropped.
    #[test]
    fn a_newer_format_is_refused_not_truncated() {
        let d = tmpdir("newer");
        let f = d.join("s.jsonl");
        let mut text = session_text();
        text.push_str(r#"{"v":99,"seq":999,"t":1.0,"kind":"future_thing","x":1}"#);
        text.push('\n');
        std::fs::write(&f, &text).unwrap();
        let e = SessionWriter::continue_file(&f).err().unwrap().to_string();
        assert!(
            e.contains("newer atrex-tui") && e.contains("format 99"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&f).unwrap(), text);
        assert!(load(&f).is_err(), "replay refuses it too");
    }

    /// A damaged last line is kept beside the file, then cut off; the append continues.
    #[test]
    fn a_damaged_tail_is_kept_in_a_side_file() {
        let d = tmpdir("damaged");
        let f = d.join("s.jsonl");
        let good = session_text();
        let tail = r#"{"v":1,"seq":500,"t":1.0,"kind":"steer","te"#;
        std::fs::write(&f, format!("{good}{tail}")).unwrap();
        let (w, loaded) = SessionWriter::continue_file(&f).unwrap();
        let mut w = test_log(w, &loaded.records);
        let msg = loaded.warnings.join("\n");
        assert!(
            msg.contains(".damaged-") && msg.contains("moved to"),
            "{msg}"
        );
        let side: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".damaged-"))
            .collect();
        assert_eq!(side.len(), 1);
        assert_eq!(std::fs::read_to_string(side[0].path()).unwrap(), tail);
        w.append(SessionEvent::Steer {
            op: None,
            text: "go on".into(),
        })
        .unwrap();
        let again = load(&f).unwrap();
        assert!(again.warnings.is_empty(), "{:?}", again.warnings);
        assert_eq!(again.records.len(), loaded.records.len() + 1);
    }

    /// A continued session in which nothing happens stays byte for byte as it was: the run's
    /// start and device are written with its first other event, in order.
    #[test]
    fn a_continued_session_in_which_nothing_happens_is_left_as_it_was() {
        let d = tmpdir("idle-resume");
        let f = d.join("s.jsonl");
        let text = session_text();
        std::fs::write(&f, &text).unwrap();
        let start = |resumed| SessionEvent::RunStart {
            tool_version: "t".into(),
            resumed,
            gpu: None,
            driver: None,
            nvrtc: None,
            hardware: None,
            suite: "s".into(),
            suite_version: "1".into(),
        };
        let device = SessionEvent::Device {
            gpu: Some("NVIDIA H200".into()),
            driver: None,
            nvrtc: None,
            hardware: None,
        };
        {
            let (w, loaded) = SessionWriter::continue_file(&f).unwrap();
            let mut w = test_log(w, &loaded.records);
            w.append(start(true)).unwrap();
            w.append(device.clone()).unwrap();
            w.writer.as_mut().unwrap().sync().unwrap();
        }
        assert_eq!(std::fs::read_to_string(&f).unwrap(), text);
        // Once something happens, the held lines come first.
        let (w, loaded) = SessionWriter::continue_file(&f).unwrap();
        let n = loaded.records.len();
        let mut w = test_log(w, &loaded.records);
        w.append(start(true)).unwrap();
        w.append(device).unwrap();
        w.append(SessionEvent::Steer {
            op: None,
            text: "go on".into(),
        })
        .unwrap();
        let again = load(&f).unwrap();
        assert!(again.warnings.is_empty(), "{:?}", again.warnings);
        let kinds: Vec<&str> = again.records[n..].iter().map(|r| r.event.kind()).collect();
        assert_eq!(kinds, vec!["run_start", "device", "steer"]);
        assert!(std::fs::read_to_string(&f).unwrap().starts_with(&text));
    }

    /// Events of unknown kinds are kept and counted, not a reason to stop the load.
    #[test]
    fn unknown_kinds_are_kept_and_counted() {
        let text = session_text();
        let (head, rest) = text.split_at(text.find('\n').unwrap() + 1);
        let mid = r#"{"v":1,"seq":0,"t":1.0,"kind":"team_note","by":"x"}"#;
        // seq must increase: renumber the middle line after the first record
        let mut lines: Vec<String> = vec![head.trim_end().to_string()];
        lines.push(mid.replace("\"seq\":0", "\"seq\":1000"));
        let renum: Vec<String> = rest
            .lines()
            .enumerate()
            .map(|(i, l)| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["seq"] = serde_json::json!(1001 + i as u64);
                v.to_string()
            })
            .collect();
        lines.extend(renum);
        let all = lines.join("\n") + "\n";
        let loaded = parse_text("s.jsonl", &all).unwrap();
        assert_eq!(loaded.unknown, 1);
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.contains("1 events of unknown kinds")),
            "{:?}",
            loaded.warnings
        );
        let m = Model::from_records(&fixture_suite(), &loaded.records);
        assert_eq!(m.unknown_events, 1);
        assert_eq!(
            m.ops["rms_norm"].incumbent,
            Some(1),
            "the rest still applies"
        );
    }

    /// A run that only starts and learns its GPU leaves no file; the first action writes all.
    #[test]
    fn a_session_file_appears_at_the_first_action() {
        let d = tmpdir("deferred");
        let f = d.join("session-1.jsonl");
        let mut w = test_log(SessionWriter::create_deferred(&f), &[]);
        let suite = fixture_suite();
        let ev = demo_events(&suite);
        w.append(ev[0].clone()).unwrap();
        w.append(SessionEvent::Device {
            gpu: None,
            driver: None,
            nvrtc: None,
            hardware: None,
        })
        .unwrap();
        assert!(!f.exists() && !w.writer.as_ref().unwrap().is_written());
        w.append(SessionEvent::Steer {
            op: None,
            text: "hello".into(),
        })
        .unwrap();
        let loaded = load(&f).unwrap();
        let kinds: Vec<&str> = loaded.records.iter().map(|r| r.event.kind()).collect();
        assert_eq!(kinds, vec!["run_start", "device", "steer"]);
        assert_eq!(loaded.records[2].seq, 3);
    }
}

#[test]
fn a_revision_0_from_the_standing_is_written_and_read_as_the_incumbent() {
    let a = Author::Incumbent;
    let j = serde_json::to_string(&a).unwrap();
    assert_eq!(j, r#"{"type":"incumbent"}"#);
    assert_eq!(
        serde_json::from_str::<Author>(&j).unwrap(),
        Author::Incumbent
    );
    assert!(a.is_start() && Author::Baseline.is_start() && !Author::Tuner.is_start());
    assert_eq!(a.label(), "incumbent");
    let line = r#"{"v":1,"seq":1,"t":0.0,"kind":"revision","op":"rms_norm","rev":0,"parent":null,"author":{"type":"incumbent"},"rationale":"the standing's incumbent (session s.jsonl v3, workspace)","source":"// k\n","via":null,"request_id":null,"tokens_in":null,"tokens_out":null}"#;
    match serde_json::from_str::<Record>(line) {
        Ok(Record {
            event: SessionEvent::Revision { author, rev, .. },
            ..
        }) => assert_eq!((author, rev), (Author::Incumbent, 0)),
        other => panic!("{other:?}"),
    }
}

/// One writer per session file; files two writers already wrote are still read.
mod one_writer {
    use super::*;

    /// The demo session's lines, with `seq` replaced by `seqs` (one per record).
    fn text_with_seqs(seqs: impl Fn(usize, u64) -> u64) -> (Vec<Record>, String) {
        let recs = records(demo_events(&fixture_suite()));
        let mut text = String::new();
        for (i, r) in recs.iter().enumerate() {
            let mut r = r.clone();
            r.seq = seqs(i, r.seq);
            text.push_str(&serde_json::to_string(&r).unwrap());
            text.push('\n');
        }
        (recs, text)
    }

    #[test]
    fn a_second_writer_is_refused_naming_the_holder_until_the_first_ends() {
        let d = tmpdir("lock");
        let f = d.join("s.jsonl");
        let _ = std::fs::remove_file(&f);
        let mut first = SessionWriter::create(&f).unwrap();
        first
            .write(&records(demo_events(&fixture_suite()))[0])
            .unwrap();
        let holder = std::fs::read_to_string(lock::lock_path(&f)).unwrap();
        assert!(
            holder.contains(&format!("(pid {} on ", std::process::id()))
                && holder.contains(" since "),
            "{holder}"
        );
        // Another handle (as another process would) is refused, by the writer and the lock.
        let e = SessionWriter::continue_file(&f).err().unwrap().to_string();
        assert!(
            e.contains(&format!("session {} is being written by ", f.display()))
                && e.contains(holder.trim())
                && e.contains(&format!("atrex-tui replay {}", f.display())),
            "{e}"
        );
        let e = SessionLock::take(&f).err().unwrap().to_string();
        assert!(e.contains(holder.trim()), "{e}");
        // Released when the writer drops.
        drop(first);
        let (again, loaded) = SessionWriter::continue_file(&f).unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        drop(again);
        // A deferred writer takes the lock with its first action.
        let g = d.join("deferred.jsonl");
        let _ = std::fs::remove_file(&g);
        let mut w = test_log(SessionWriter::create_deferred(&g), &[]);
        let lock = SessionLock::take(&g).unwrap();
        let e = w
            .append(SessionEvent::Steer {
                op: None,
                text: "a note".into(),
            })
            .err()
            .unwrap();
        assert!(
            matches!(
                e,
                record::RecordingError::Write(error::SessionError::Locked { .. })
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("is being written by"), "{e}");
        drop(lock);
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn a_repeated_sequence_number_loads_with_one_warning_and_every_event() {
        // Record 5 repeats record 4's number, as two writers of one file both wrote it.
        let (recs, text) = text_with_seqs(|i, s| if i >= 4 { s - 1 } else { s });
        let loaded = parse_text("s.jsonl", &text).unwrap();
        assert_eq!(loaded.records.len(), recs.len());
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert!(
            loaded.warnings[0].starts_with("s.jsonl:5: sequence number 4 repeats"),
            "{:?}",
            loaded.warnings
        );
        // File order is kept and numbering continues from the highest number.
        for (a, b) in loaded.records.iter().zip(&recs) {
            assert_eq!(a.event.kind(), b.event.kind());
        }
        let model = Model::from_records(&fixture_suite(), &loaded.records);
        let mut rec = Recorder::for_model(&model);
        let next = rec.stamp(SessionEvent::Steer {
            op: None,
            text: "x".into(),
        });
        assert_eq!(next.seq, recs.len() as u64);
    }

    #[test]
    fn a_skipped_sequence_number_loads_with_one_warning_and_every_event() {
        let (recs, text) = text_with_seqs(|i, s| if i >= 3 { s + 10 } else { s });
        let loaded = parse_text("s.jsonl", &text).unwrap();
        assert_eq!(loaded.records.len(), recs.len());
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert!(
            loaded.warnings[0].starts_with("s.jsonl:4: sequence number 14 skips after 3"),
            "{:?}",
            loaded.warnings
        );
    }
}

/// An operator started from the standing's incumbent: the first event that refers to v0 (a
/// hand edit's revision naming it as parent) is preceded by v0 itself, with its source and
/// author, so that replaying or resuming the file shows v1 against the kernel it came from.
#[test]
fn the_starting_kernel_is_recorded_before_its_first_child() {
    let d = tmpdir("v0-first");
    let f = d.join("s.jsonl");
    let suite = crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).unwrap();
    let p = suite.problem("rms_norm").unwrap().clone();
    let start = "// the standing's rms_norm\nint k;\n";
    let mut model = Model::new(&suite);
    model.start_from("rms_norm", start, "the standing's incumbent (shipped)");
    let mut rec = Recording::new(model, Some(SessionWriter::create(&f).unwrap()));
    let edited = format!("{start}// one more line\n");
    let v1 = rec
        .revision(
            &p,
            Author::Human,
            Some(0),
            "hand edit",
            &edited,
            Some("file"),
        )
        .unwrap();
    assert_eq!(v1, 1);
    // A second child does not record v0 again.
    rec.revision(&p, Author::Human, Some(0), "again", &edited, Some("file"))
        .unwrap();
    let loaded = load(&f).unwrap();
    let revs: Vec<(u32, Option<u32>, Author, String)> = loaded
        .records
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::Revision {
                rev,
                parent,
                author,
                source,
                ..
            } => Some((*rev, *parent, author.clone(), source.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        revs,
        vec![
            (0, None, Author::Incumbent, start.to_string()),
            (1, Some(0), Author::Human, edited.clone()),
            (2, Some(0), Author::Human, edited),
        ]
    );
    // Read back, v1's parent is the standing's kernel (a one-line difference), and nothing
    // is reported missing.
    let m = Model::from_records(&suite, &loaded.records);
    assert_eq!(m.ops["rms_norm"].rev(0).unwrap().source, start);
    assert!(
        !m.log.iter().any(|l| l.text.contains("does not hold")),
        "{:?}",
        m.log
    );
    // A measurement or decision of v0 alone records it first as well.
    let mut model = Model::new(&suite);
    model.start_from("rms_norm", start, "the standing's incumbent (shipped)");
    let mut rec = Recording::new(model, None);
    rec.decide(&p, 0, Decision::Accepted, DecidedBy::Auto)
        .unwrap();
    let o = &rec.model.ops["rms_norm"];
    assert!(o.rev(0).unwrap().recorded && o.incumbent == Some(0));
}

/// An operator the session already revised keeps its start, whatever the standing holds now;
/// a file written before the starting kernel was recorded says what is missing.
#[test]
fn a_session_keeps_its_start_and_names_a_missing_one() {
    let suite = fixture_suite();
    let baseline = Model::new(&suite).ops["rms_norm"]
        .rev(0)
        .unwrap()
        .source
        .clone();
    let old = records(vec![
        SessionEvent::RunStart {
            tool_version: "t".into(),
            resumed: false,
            gpu: None,
            driver: None,
            nvrtc: None,
            hardware: None,
            suite: "s".into(),
            suite_version: "1".into(),
        },
        revision("rms_norm", 1, Some(0), Author::Human, "edit", "// v1\n"),
    ]);
    let mut m = Model::from_records(&suite, &old);
    assert!(
        m.log.iter().any(|l| l.level == model::LogLevel::Warn
            && l.text
                .contains("rms_norm v1 comes from v0, which the session does not hold")),
        "{:?}",
        m.log
    );
    m.start_from("rms_norm", "// today's standing\n", "standing");
    let v0 = m.ops["rms_norm"].rev(0).unwrap();
    assert_eq!(
        (v0.source.as_str(), &v0.author),
        (baseline.as_str(), &Author::Baseline)
    );
    // An operator the session never touched starts from the standing.
    m.start_from("silu_and_mul", "// today's standing\n", "standing");
    let v0 = m.ops["silu_and_mul"].rev(0).unwrap();
    assert_eq!(
        (v0.source.as_str(), &v0.author, v0.via.as_deref()),
        (
            "// today's standing\n",
            &Author::Incumbent,
            Some("standing")
        )
    );
}
