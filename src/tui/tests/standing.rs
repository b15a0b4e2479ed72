//! The standing in the app: the first screen on the shipped standing, stale records, and the
//! re-measure keys (M, U) recording what they measure.

use super::*;
use crate::standing::{Layer, Origin, Store};
use crate::suite::{Suite, SuiteSource, Workspace};
use crate::testing::tempdir;

/// The app as `prepare` builds it for a new session on the built-in suite in workspace `dir`
/// (nothing recorded yet, no GPU known).
pub(super) fn first_sight(dir: &std::path::Path) -> AppState {
    let suite = Arc::new(Suite::load(SuiteSource::Embedded).unwrap());
    let ws = Workspace {
        dir: dir.to_path_buf(),
        reason: "test",
    };
    let store = Store::load(&ws, &suite);
    let mut model = Model::new(&suite);
    let view = store.view("H200", None);
    for p in &suite.problems {
        if let Some((src, why)) = view.start(&p.name) {
            model.start_from(&p.name, &src, &why);
        }
    }
    let mut s = AppState::new(
        suite.clone(),
        model,
        Theme::builtin("dark", true).unwrap(),
        suite.hardware("H200").ok().cloned(),
        dir.join("kernels"),
    );
    s.work.attach_standing(store, dir.to_path_buf());
    s
}

pub(super) fn on_gpu(s: &mut AppState, gpu: &str) {
    s.work.worker = WorkerState::Ready {
        gpu: gpu.into(),
        sm_clock_mhz: 1980,
    };
    s.work.model.run.driver = Some("13.0".into());
    s.work.restand();
}

/// A fresh workspace opens on the shipped H200 standing: S_agg 0.309 (all / prefill / decode)
/// at the strict level and 0.300 under the benchmark's rule, every operator's S_op, marked as
/// shipped and measured elsewhere over the days its records were measured.
#[test]
fn snapshot_first_sight_on_the_shipped_standing() {
    let d = tempdir("first");
    let mut s = first_sight(&d);
    let out = screen(&s, 120, 40);
    assert!(
        out.contains("S_agg 0.309 strict · 0.300 bench rule │"),
        "{out}"
    );
    let wide = screen(&s, 160, 45);
    assert!(
        wide.contains(
            "S_agg 0.309 strict · 0.300 bench rule · prefill 0.342/0.332 · decode 0.314/0.305"
        ),
        "{wide}"
    );
    assert!(
        wide.contains("standing: shipped, measured 2026-12-03 on NVIDIA H200"),
        "{wide}"
    );
    // The session starts unified_attention from the standing's incumbent, named so, with the
    // standing's figure of it.
    assert!(out.contains("★ v0   standing  S 0.430 std"), "{out}");
    assert!(out.contains("unified_attention"), "{out}");
    assert!(out.contains("0.430  ○"), "{out}");
    assert!(!out.contains("stale"), "{out}");
    assert!(wide.contains("0.430  ○"), "{wide}");
    let full = screen(&s, 240, 60);
    assert!(full.contains("0.430  ○ shipped"), "{full}");
    insta::assert_snapshot!("first_sight_shipped_120x40", out);
    // The narrow screen keeps the figure.
    let small = screen(&s, 80, 24);
    assert!(
        small.contains("S_agg 0.309 strict · 0.300 bench rule"),
        "{small}"
    );
    insta::assert_snapshot!("first_sight_shipped_80x24", small);
    // Without a GPU the figure stays: it was measured elsewhere, which the header says.
    update(&mut s, AppEvent::Hello(Err("libcuda not found".into())));
    s.view.modal = Modal::None;
    let out = screen(&s, 120, 40);
    assert!(out.contains("S_agg 0.309"), "{out}");
    assert!(out.contains("no GPU"), "{out}");
    // On the H200 it stands as well; on another GPU every record is stale and counts 0.
    on_gpu(&mut s, "NVIDIA H200");
    assert_eq!(
        format!("{:.3}", s.work.s_agg(crate::suite::PhaseFilter::All)),
        "0.309"
    );
    s.work.hw = s.work.suite.hardware("H100_SXM").ok().cloned();
    on_gpu(&mut s, "NVIDIA H100 80GB HBM3");
    let out = screen(&s, 160, 45);
    assert!(
        out.contains("S_agg 0.000 strict · 0.000 bench rule"),
        "{out}"
    );
    assert!(out.contains("· 30 stale"), "{out}");
    assert!(out.contains("0.430~ ~"), "{out}");
    let full = screen(&s, 240, 60);
    assert!(full.contains("0.430~ ~ stale"), "{full}");
    std::fs::remove_dir_all(&d).ok();
}

/// A workspace's record whose kernel was edited since is stale: dimmed with `~`, counted 0,
/// and the header says how many are stale.
#[test]
fn a_stale_record_is_marked_and_counts_zero() {
    let d = tempdir("stale");
    let k = d.join("kernels/rms_norm/incumbent-x.cu");
    std::fs::create_dir_all(k.parent().unwrap()).unwrap();
    std::fs::write(&k, "// edited since\n").unwrap();
    let shipped = crate::standing::shipped::load("atrex-bench")
        .unwrap()
        .unwrap();
    let mut f = crate::standing::StandingFile::new("atrex-bench", "H200");
    let mut r = shipped.operators["rms_norm"].clone();
    r.kernel = "kernels/rms_norm/incumbent-x.cu".into();
    f.operators.insert("rms_norm".into(), r);
    crate::standing::store::write_atomic(&d.join("standing/H200.json"), f.to_text().as_bytes())
        .unwrap();
    let mut s = first_sight(&d);
    on_gpu(&mut s, "NVIDIA H200");
    let out = screen(&s, 160, 45);
    assert!(out.contains("· 1 stale"), "{out}");
    assert!(out.contains("0.272~ ~"), "{out}");
    // the status in words (from 160 columns with the suite's longest name)
    let full = screen(&s, 240, 60);
    assert!(full.contains("0.272~ ~ stale"), "{full}");
    assert!(out.contains("standing/H200.json + shipped"), "{out}");
    let w = s.work.suite.weights(crate::suite::PhaseFilter::All)["rms_norm"];
    let all = s.work.s_agg(crate::suite::PhaseFilter::All);
    assert!((all - (0.30874045 - w * 0.27227771)).abs() < 1e-6, "{all}");
    // The new session starts rms_norm from the kernel as it is now.
    assert_eq!(
        s.work.model.ops["rms_norm"].revisions[0].source,
        "// edited since\n"
    );
    std::fs::remove_dir_all(&d).ok();
}

/// A shape's T_SOL (ms) on the state's hardware profile, as a run reports it.
fn sol_ms(s: &AppState, op: &str, id: u32) -> f64 {
    let p = s.work.suite.problem(op).unwrap();
    let w = p.work(p.shape(id).unwrap()).unwrap();
    crate::suite::roofline::sol(&w, s.work.hw.as_ref().unwrap())
        .unwrap()
        .sol_ms()
}

/// Ends a job with every shape passing at `s`.
fn finish(s: &mut AppState, mid: u64, op: &str, at: f64) -> Vec<Effect> {
    let ids: Vec<u32> = s
        .work
        .suite
        .problem(op)
        .unwrap()
        .shapes
        .iter()
        .map(|x| x.id)
        .collect();
    let mut evs: Vec<AppEvent> = ids
        .iter()
        .map(|id| AppEvent::Job {
            mid,
            event: JobEvent::Worker(Event::ShapeDone {
                id: 1,
                result: shape_result(*id, Some(at), Verdict::Pass, sol_ms(s, op, *id)),
            }),
        })
        .collect();
    evs.push(AppEvent::Job {
        mid,
        event: JobEvent::Worker(Event::Done {
            id: 1,
            verdict: Verdict::Pass,
            message: None,
        }),
    });
    send(s, evs)
}

/// U re-measures every stale operator's incumbent in full, M the selected one's; what they
/// measure becomes the record (the kernel keeping where it came from), in memory at once and
/// written through an effect.
#[test]
fn m_and_u_remeasure_the_standing_in_full_and_record_it() {
    let d = tempdir("remeasure");
    let mut s = first_sight(&d);
    // Without a GPU nothing is measured.
    let fx = send(&mut s, vec![press(KeyCode::Char('U'))]);
    assert!(fx.is_empty());
    // On an H100 all 30 are stale: U queues every one, by weight, in full.
    s.work.hw = s.work.suite.hardware("H100_SXM").ok().cloned();
    on_gpu(&mut s, "NVIDIA H100 80GB HBM3");
    let fx = send(&mut s, vec![press(KeyCode::Char('U'))]);
    assert_eq!(fx.len(), 30);
    assert!(
        fx.iter().all(|e| matches!(
            e,
            Effect::Measure {
                full: true,
                rev: 0,
                ..
            }
        )),
        "{fx:?}"
    );
    let Effect::Measure { op, mid, .. } = &fx[0] else {
        panic!()
    };
    assert_eq!(op, "unified_attention");
    assert_eq!(s.work.standing.run, Some((0, 30)));
    let out = screen(&s, 160, 45);
    assert!(out.contains("◔ standing 1/30"), "{out}");
    // U again while they run queues nothing more.
    assert!(send(&mut s, vec![press(KeyCode::Char('U'))]).is_empty());
    let fx = finish(&mut s, *mid, "unified_attention", 0.2);
    let [
        Effect::RecordStanding {
            hardware, update, ..
        },
    ] = &fx[..]
    else {
        panic!("{fx:?}")
    };
    assert_eq!(hardware, "H100_SXM");
    assert_eq!(update.record.measurement.mode, "full");
    assert_eq!(update.record.fingerprint.gpu, "NVIDIA H100 80GB HBM3");
    assert_eq!(
        update.record.origin,
        Origin::File {
            path: "knowledge/templates/unified_attention_wgmma.cu".into()
        }
    );
    assert_eq!(s.work.standing.run, Some((1, 30)));
    let e = s.work.standing.view.entry("unified_attention").unwrap();
    assert_eq!((e.layer, e.fresh()), (Layer::Workspace, true));
    assert_eq!(s.work.tally(crate::suite::PhaseFilter::All).stale, 29);
    // M on the selected operator: one job, in full.
    s.view.op_sel = s
        .visible_ops()
        .iter()
        .position(|o| o == "rms_norm")
        .unwrap();
    let fx = send(&mut s, vec![press(KeyCode::Char('M'))]);
    assert!(
        matches!(&fx[..], [Effect::Measure { full: true, op, .. }] if op == "rms_norm"),
        "{fx:?}"
    );
    // Its worker lost after three shapes: the partial run does not replace the record.
    let Effect::Measure { mid, .. } = &fx[0] else {
        panic!()
    };
    let mut evs: Vec<AppEvent> = (0..3)
        .map(|id| AppEvent::Job {
            mid: *mid,
            event: JobEvent::Worker(Event::ShapeDone {
                id: 1,
                result: shape_result(id, Some(0.9), Verdict::Pass, 0.01),
            }),
        })
        .collect();
    evs.push(AppEvent::Job {
        mid: *mid,
        event: JobEvent::WorkerLost {
            verdict: Verdict::Fault,
            message: "the worker exited".into(),
        },
    });
    let before = s
        .work
        .standing
        .view
        .entry("rms_norm")
        .map(|e| e.record.clone());
    let fx = send(&mut s, evs);
    assert!(
        !fx.iter()
            .any(|e| matches!(e, Effect::RecordStanding { .. })),
        "{fx:?}"
    );
    assert_eq!(
        s.work
            .standing
            .view
            .entry("rms_norm")
            .map(|e| e.record.clone()),
        before
    );
    let out = screen(&s, 160, 45);
    assert!(out.contains("3 of its 56 shapes have a result"), "{out}");
    // Replay is read-only: M and U do nothing there.
    assert_eq!(
        keymap::action(
            &crossterm::event::KeyEvent::new(
                KeyCode::Char('U'),
                crossterm::event::KeyModifiers::NONE
            ),
            &keymap::Ctx {
                replaying: true,
                ..keymap::Ctx::of(&s)
            }
        ),
        None
    );
    std::fs::remove_dir_all(&d).ok();
}
