//! The fast reading of canonical lines and the lazy timeline give what the generic path and
//! whole records give.

use crate::session::model::Model;
use crate::session::store::parse_generic;
use crate::session::timeline::{self, Kept, Timeline};
use crate::session::*;
use crate::suite::{Suite, SuiteSource};
use std::path::{Path, PathBuf};

fn recorded() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    v.sort();
    assert!(v.len() >= 2, "recorded sessions in {}", dir.display());
    v
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("atrex-timeline-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn suite() -> Suite {
    Suite::load(SuiteSource::Embedded).unwrap()
}

#[test]
fn canonical_lines_read_as_the_generic_path_reads_them() {
    let (mut fast, mut lines) = (0, 0);
    for p in recorded() {
        let text = std::fs::read_to_string(&p).unwrap();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            lines += 1;
            let generic = parse_generic(line);
            if let Some(r) = canonical::record(line) {
                fast += 1;
                assert_eq!(Ok(&r), generic.as_ref(), "{}: {line}", p.display());
            }
            assert_eq!(parse_line(line), generic, "{}", p.display());
        }
    }
    // Shape results and revisions are most of the lines of a session.
    assert!(fast * 10 > lines * 8, "{fast} of {lines} lines read fast");
}

#[test]
fn lines_of_other_forms_fall_back_to_the_generic_path_and_its_messages() {
    let canonical = r#"{"v":1,"seq":3,"t":5.5,"kind":"revision","op":"x","rev":1,"author":{"type":"human"},"source":"k"}"#;
    assert!(canonical::record(canonical).is_some());
    for line in [
        // another order, a newer version, a leading zero, a bad field: the generic path's
        r#"{"seq":3,"v":1,"t":5.5,"kind":"revision","op":"x","rev":1,"author":{"type":"human"},"source":"k"}"#,
        r#"{"v":2,"seq":3,"t":5.5,"kind":"revision","op":"x","rev":1,"author":{"type":"human"},"source":"k"}"#,
        r#"{"v":1,"seq":03,"t":5.5,"kind":"revision","op":"x","rev":1,"author":{"type":"human"},"source":"k"}"#,
        r#"{"v":1,"seq":3,"t":5.5,"kind":"revision","op":"x","rev":"one","author":{"type":"human"},"source":"k"}"#,
        r#"{"v":1,"seq":3,"t":5.5,"kind":"shape_result","op":"x","rev":1,"mid":2,"result":{}}"#,
    ] {
        assert!(canonical::record(line).is_none(), "{line}");
        assert_eq!(parse_line(line), parse_generic(line));
    }
    let e = parse_line(
        r#"{"v":1,"seq":3,"t":5.5,"kind":"shape_result","op":"x","rev":1,"mid":2,"result":{}}"#,
    )
    .unwrap_err();
    assert!(
        e.starts_with("bad `shape_result` event: missing field"),
        "{e}"
    );
}

/// A timeline whose briefs were all read whole, as the TUI reads those of the revision shown.
fn filled(t: &Timeline, m: &mut Model) {
    let file = t.file.clone().expect("a lazy timeline");
    let wants: Vec<(String, u32, u64, Vec<model::Brief>)> = m
        .ops
        .values()
        .flat_map(|o| {
            o.revisions.iter().map(|r| {
                (
                    o.name.clone(),
                    r.rev,
                    r.measurement.mid,
                    r.measurement.results.briefs(),
                )
            })
        })
        .filter(|w| !w.3.is_empty())
        .collect();
    assert!(!wants.is_empty(), "the timeline keeps briefs");
    for (op, rev, mid, briefs) in wants {
        let read = timeline::read_results(&file, &op, rev, mid, &briefs).unwrap();
        assert_eq!(read.len(), briefs.len());
        m.fill_results(&op, rev, mid, read);
    }
}

#[test]
fn a_lazy_timeline_folds_into_the_state_of_its_records() {
    let suite = suite();
    for p in recorded() {
        let full = load(&p).unwrap();
        let (lazy, meta) = timeline::load(&p, 0).unwrap();
        assert_eq!(meta.warnings, full.warnings);
        assert_eq!(meta.valid_len, full.valid_len);
        assert_eq!(lazy.len(), full.records.len());
        assert!(lazy.iter().any(|k| matches!(k, Kept::Shape(_))));
        let whole: Timeline = full.records.clone().into();
        for pos in [0, 1, lazy.len() / 3, lazy.len() / 2, lazy.len()] {
            let want = Model::from_records(&suite, &full.records[..pos]);
            assert_eq!(whole.model_at(&suite, pos), want);
            let mut got = lazy.model_at(&suite, pos);
            // Before any is read, verdicts, S and counts are those of the whole results.
            for (name, o) in &want.ops {
                for (a, b) in o.revisions.iter().zip(&got.ops[name].revisions) {
                    assert_eq!(a.verdict(), b.verdict(), "{name} v{}", a.rev);
                    assert_eq!(a.measurement.results.len(), b.measurement.results.len());
                }
            }
            if got.ops.values().any(|o| {
                o.revisions
                    .iter()
                    .any(|r| !r.measurement.results.briefs().is_empty())
            }) {
                filled(&lazy, &mut got);
            }
            assert!(got == want, "{} at {pos}", p.display());
        }
        // Shedding gives the briefs back; the replay summary is the same either way.
        let mut m = lazy.model_at(&suite, lazy.len());
        let fresh = m.clone();
        filled(&lazy, &mut m);
        m.shed_results_except("", 0);
        assert!(m == fresh);
        assert_eq!(
            timeline_summary(&suite, &lazy, &meta, &m),
            summary(&suite, &full, &Model::from_records(&suite, &full.records))
        );
    }
}

#[test]
fn a_small_file_is_kept_whole_and_a_large_one_lazily() {
    let p = recorded().remove(0);
    let (t, _) = timeline::load(&p, timeline::LAZY_FROM).unwrap();
    assert!(t.file.is_none() && t.iter().all(|k| matches!(k, Kept::Whole(_))));
    let (t, _) = timeline::load(&p, 1).unwrap();
    assert_eq!(t.file.as_deref(), Some(p.as_path()));
}

#[test]
fn a_lazy_load_warns_and_refuses_as_a_whole_load_does() {
    let d = tmp("warn");
    let text = std::fs::read_to_string(&recorded()[0]).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // a skipped sequence number and a cut last line
    let p = d.join("cut.jsonl");
    let mut cut = lines[..3].join("\n") + "\n" + &lines[4..10].join("\n") + "\n";
    cut.push_str(&lines[10][..20]);
    std::fs::write(&p, &cut).unwrap();
    let full = load(&p).unwrap();
    let (t, meta) = timeline::load(&p, 0).unwrap();
    assert!(!full.warnings.is_empty());
    assert_eq!(meta.warnings, full.warnings);
    assert_eq!(meta.damaged_tail, full.damaged_tail);
    assert_eq!(t.len(), full.records.len());
    // a bad line before the last: the same error
    let p = d.join("bad.jsonl");
    std::fs::write(&p, lines[..3].join("\n") + "\n{oops\n" + lines[3] + "\n").unwrap();
    assert_eq!(
        timeline::load(&p, 0).unwrap_err().to_string(),
        load(&p).unwrap_err().to_string()
    );
}

#[test]
fn results_of_a_file_changed_since_it_was_read_are_refused() {
    let d = tmp("changed");
    let p = d.join("s.jsonl");
    std::fs::copy(&recorded()[0], &p).unwrap();
    let suite = suite();
    let (t, _) = timeline::load(&p, 0).unwrap();
    let m = t.model_at(&suite, t.len());
    let (op, r) = m
        .ops
        .values()
        .flat_map(|o| o.revisions.iter().map(move |r| (o.name.clone(), r)))
        .find(|(_, r)| !r.measurement.results.briefs().is_empty())
        .unwrap();
    let briefs = r.measurement.results.briefs();
    assert!(timeline::read_results(&p, &op, r.rev, r.measurement.mid, &briefs).is_ok());
    // the same length, other bytes: another result where the brief's was
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, text.replace("\"shape\":", "\"shaqe\":")).unwrap();
    let e = timeline::read_results(&p, &op, r.rev, r.measurement.mid, &briefs).unwrap_err();
    assert!(e.contains("the file changed since it was read"), "{e}");
}
