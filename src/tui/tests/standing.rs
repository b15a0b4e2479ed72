//! The standing in the app: the first screen on a shipped standing, stale records, and the
//! re-measure keys (M, U) recording what they measure.
//!
//! The shipped layer here is a fixture (`fixture_standing`: fixed figures on every operator's
//! baseline, and unified_attention's incumbent a fixed file of the workspace), so that the
//! screens do not change when the standing built into the binary does; that one is checked
//! against docs/baselines.md in `standing::baselines_tests`.

use super::*;
use crate::standing::build::{self, Context};
use crate::standing::{Layer, MeasuredOn, OpPrint, Origin, StandingFile, Store};
use crate::suite::{Suite, SuiteSource, Workspace};
use crate::testing::tempdir;

/// Where the fixture's unified_attention incumbent is kept, in the workspace.
pub(super) const FIXTURE_KERNEL: &str = "kernels/unified_attention/fixture-incumbent.cu";

/// The fixture's unified_attention incumbent: a file of its own, so that the code the first
/// screen shows is fixed.
const FIXTURE_KERNEL_TEXT: &str = r#"/* atrex:plan
[[launch]]
kernel = "unified_attention_fixture"
grid = ["n", "Hq"]
block = ["128"]
args = ["out", "q", "k_cache", "v_cache", "cu_seqlens_q", "seqused_k", "block_table"]
*/
// The fixture standing's unified_attention incumbent: a kernel file of the workspace, measured
// (in the fixture) at S_op 0.500 on the H200. Its text is fixed so that the first screen is.

#include <cuda_bf16.h>

extern "C" __global__ void unified_attention_fixture(
    __nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ q,
    const __nv_bfloat16* __restrict__ k_cache, const __nv_bfloat16* __restrict__ v_cache,
    const int* __restrict__ cu_seqlens_q, const int* __restrict__ seqused_k,
    const int* __restrict__ block_table)
{
    const int seq = blockIdx.x;
    const int head = blockIdx.y;
    // One thread block per sequence and query head; keys and values through shared memory.
    __shared__ float scores[128];
    scores[threadIdx.x] = 0.0f;
    __syncthreads();
    if (threadIdx.x == 0 && seq == 0 && head == 0) {
        out[0] = q[0];
    }
}
"#;

/// The day the fixture's records were measured.
pub(super) const FIXTURE_DATE: &str = "2026-01-15 08:00:00";

/// An operator's S_op in the fixture: named where a test reads it, else a fixed value of its
/// name.
fn fixture_s(op: &str) -> f64 {
    match op {
        "unified_attention" => 0.5,
        "rms_norm" => 0.25,
        "fused_qkv_rope" => 0.002,
        "fp8_blockscale_fused_moe" => 0.2,
        _ => 0.05 + (op.bytes().map(u32::from).sum::<u32>() % 60) as f64 / 100.0,
    }
}

/// A standing of fixed figures for the shipped layer, fresh on the suite as it is on the
/// H200: every operator's baseline.cu but unified_attention's (`FIXTURE_KERNEL`), measured in
/// full on NVIDIA H200 on `FIXTURE_DATE`; each shape at 0.8, 0.9, 1.0, 1.1 or 1.2 times its
/// operator's `fixture_s`, every shape passing, and fp8_blockscale_fused_moe at the strict
/// level only (it counts 0 under the benchmark's rule).
pub(super) fn fixture_standing(suite: &Suite) -> StandingFile {
    let hw = suite.hardware("H200").unwrap();
    let ctx = Context {
        gpu: "NVIDIA H200".into(),
        driver: "13.0".into(),
        nvrtc: Some("13.0".into()),
        tool_version: "0.1.0".into(),
        hardware: "H200".into(),
        date: FIXTURE_DATE.into(),
    };
    let mut f = StandingFile::new(&suite.name, "H200");
    for p in &suite.problems {
        let (kernel, source) = if p.name == "unified_attention" {
            (FIXTURE_KERNEL.to_string(), FIXTURE_KERNEL_TEXT.to_string())
        } else {
            let source = crate::contract::kernels::suite_kernel(suite, p, "baseline.cu")
                .unwrap()
                .code;
            (format!("problems/{}/baseline.cu", p.name), source)
        };
        let sols = crate::suite::roofline::shape_sols(p, hw);
        let results: Vec<_> = p
            .shapes
            .iter()
            .enumerate()
            .map(|(k, sh)| {
                let s = fixture_s(&p.name) * (0.8 + 0.1 * (k % 5) as f64);
                let mut r = shape_result(sh.id, Some(s), Verdict::Pass, sols[&sh.id]);
                r.seeds_checked = 5;
                r.timing.as_mut().unwrap().quick = false;
                if p.name == "fp8_blockscale_fused_moe" {
                    r.bench_ok = false;
                    r.checks[0].bench_ok = false;
                }
                r
            })
            .collect();
        let origin = Origin::File {
            path: kernel.clone(),
        };
        let record = build::record(
            p,
            &OpPrint::of(suite, p),
            &source,
            kernel,
            origin,
            "full",
            &results,
            &ctx,
        );
        f.operators.insert(p.name.clone(), record);
    }
    f.shipped = MeasuredOn::of(f.operators.values()).map(|m| m.note());
    f
}

/// The app as `prepare` builds it for a new session on the built-in suite in workspace `dir`
/// (nothing recorded yet, no GPU known), over the fixture standing.
pub(super) fn first_sight(dir: &std::path::Path) -> AppState {
    let suite = Arc::new(Suite::load(SuiteSource::Embedded).unwrap());
    let ws = Workspace {
        dir: dir.to_path_buf(),
        reason: "test",
    };
    let kernel = dir.join(FIXTURE_KERNEL);
    std::fs::create_dir_all(kernel.parent().unwrap()).unwrap();
    std::fs::write(&kernel, FIXTURE_KERNEL_TEXT).unwrap();
    let store = Store::load_over(&ws, &suite, Ok(Some(fixture_standing(&suite))));
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

/// A fresh workspace opens on the shipped H200 standing (here the fixture): S_agg 0.418 (all /
/// prefill / decode) at the strict level and 0.409 under the benchmark's rule, every operator's
/// S_op, marked as shipped and measured elsewhere over the days its records were measured.
#[test]
fn snapshot_first_sight_on_the_shipped_standing() {
    let d = tempdir("first");
    let mut s = first_sight(&d);
    let out = screen(&s, 120, 40);
    assert!(
        out.contains("S_agg 0.418 strict · 0.409 bench rule │"),
        "{out}"
    );
    let wide = screen(&s, 160, 45);
    assert!(
        wide.contains(
            "S_agg 0.418 strict · 0.409 bench rule · prefill 0.432/0.422 · decode 0.422/0.412"
        ),
        "{wide}"
    );
    assert!(
        wide.contains("standing: shipped, measured 2026-01-15 on NVIDIA H200"),
        "{wide}"
    );
    // The session starts unified_attention from the standing's incumbent, named so, with the
    // standing's figure of it.
    assert!(out.contains("★ v0   standing  S 0.500 std"), "{out}");
    assert!(out.contains("unified_attention"), "{out}");
    assert!(out.contains("0.500  ○"), "{out}");
    assert!(!out.contains("stale"), "{out}");
    assert!(wide.contains("0.500  ○"), "{wide}");
    let full = screen(&s, 240, 60);
    assert!(full.contains("0.500  ○ shipped"), "{full}");
    insta::assert_snapshot!("first_sight_shipped_120x40", out);
    // The narrow screen keeps the figure.
    let small = screen(&s, 80, 24);
    assert!(
        small.contains("S_agg 0.418 strict · 0.409 bench rule"),
        "{small}"
    );
    insta::assert_snapshot!("first_sight_shipped_80x24", small);
    // Without a GPU the figure stays: it was measured elsewhere, which the header says.
    update(&mut s, AppEvent::Hello(Err("libcuda not found".into())));
    s.view.modal = Modal::None;
    let out = screen(&s, 120, 40);
    assert!(out.contains("S_agg 0.418"), "{out}");
    assert!(out.contains("no GPU"), "{out}");
    // On the H200 it stands as well; on another GPU every record is stale and counts 0.
    on_gpu(&mut s, "NVIDIA H200");
    assert_eq!(
        format!("{:.3}", s.work.s_agg(crate::suite::PhaseFilter::All)),
        "0.418"
    );
    s.work.hw = s.work.suite.hardware("H100_SXM").ok().cloned();
    on_gpu(&mut s, "NVIDIA H100 80GB HBM3");
    let out = screen(&s, 160, 45);
    assert!(
        out.contains("S_agg 0.000 strict · 0.000 bench rule"),
        "{out}"
    );
    assert!(out.contains("· 30 stale"), "{out}");
    assert!(out.contains("0.500~ ~"), "{out}");
    let full = screen(&s, 240, 60);
    assert!(full.contains("0.500~ ~ stale"), "{full}");
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
    let shipped = fixture_standing(&Suite::load(SuiteSource::Embedded).unwrap());
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
    assert!(out.contains("0.250~ ~"), "{out}");
    // the status in words (from 160 columns with the suite's longest name)
    let full = screen(&s, 240, 60);
    assert!(full.contains("0.250~ ~ stale"), "{full}");
    assert!(out.contains("standing/H200.json + shipped"), "{out}");
    let w = s.work.suite.weights(crate::suite::PhaseFilter::All)["rms_norm"];
    let all = s.work.s_agg(crate::suite::PhaseFilter::All);
    // The fixture's S_agg less rms_norm's share (its S_op 0.25).
    assert!((all - (0.41772856 - w * 0.25)).abs() < 1e-6, "{all}");
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
            path: FIXTURE_KERNEL.into()
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
