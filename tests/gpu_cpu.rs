//! On the GPU, each reference kernel agrees with the CPU implementation on reduced shapes, on
//! the random draw and on every structured draw of its operator (`cargo test --
//! --include-ignored` on a GPU machine). The report has one line per (operator, draw, shape,
//! output).

mod common;

use atrex_tui::contract::compare::{self, Mode as CmpMode};
use atrex_tui::contract::protocol::*;
use atrex_tui::contract::runner::JobEvent;
use atrex_tui::cpu::{self, HostTensor};
use atrex_tui::pool::client::{WorkerClient, WorkerConfig};
use atrex_tui::suite::{Problem, Shape, Suite, SuiteSource};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a CUDA GPU"]
async fn references_agree_with_the_cpu_implementations() {
    let suite = Suite::load(SuiteSource::Dir(root().join("problems"))).unwrap();
    let mut cfg = WorkerConfig::new(0);
    cfg.exe = common::exe();
    let client = WorkerClient::spawn(cfg);
    assert!(matches!(
        client.hello().await,
        Ok(Event::Hello {
            device: Some(_),
            ..
        })
    ));
    let only: Option<Vec<String>> = std::env::var("ATREX_CPU_OPS")
        .ok()
        .map(|s| s.split(',').map(|x| x.to_string()).collect());
    let mut report = String::new();
    let mut failures = Vec::new();
    for op in cpu::all() {
        if let Some(o) = &only {
            if !o.iter().any(|x| x == op.name) {
                continue;
            }
        }
        let p = suite.problem(op.name).unwrap();
        let Some(code) = suite.source.read(&format!("{}/reference.cu", p.name)) else {
            failures.push(format!("{}: no reference.cu", p.name));
            continue;
        };
        let shapes: Vec<Shape> = (op.reduced)()
            .into_iter()
            .enumerate()
            .map(|(i, params)| Shape {
                id: 9000 + i as u32,
                params,
                note: String::new(),
                production_us: Default::default(),
                line: 0,
            })
            .collect();
        // The random draw, then every structured draw of the operator.
        let mut cases: Vec<Option<Draw>> = vec![None];
        cases.extend(
            atrex_tui::contract::draws::of_problem(p)
                .into_iter()
                .map(Some),
        );
        for draw in cases {
            let (lines, bad) = agree_on(&client, p, &op, &code, &shapes, draw).await;
            report.push_str(&lines);
            failures.extend(bad);
        }
    }
    eprint!("{report}");
    if let Ok(out) = std::env::var("OUT") {
        let _ = std::fs::write(PathBuf::from(out).join("cpu-agreement.txt"), &report);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Dumps the reference on each reduced shape (on the random draw, or on one structured draw)
/// and compares it with the CPU implementation: (report lines, failures). Each line names the
/// operator, the draw and the shape.
async fn agree_on(
    client: &WorkerClient,
    p: &Problem,
    op: &cpu::CpuOp,
    code: &str,
    shapes: &[Shape],
    draw: Option<Draw>,
) -> (String, Vec<String>) {
    let mut report = String::new();
    let mut failures = Vec::new();
    let which = match &draw {
        None => "random".to_string(),
        Some(d) => format!("draw `{}` ({})", d.name, d.pass),
    };
    let mut job = atrex_tui::contract::job::build_job(
        p,
        Source {
            name: format!("{} reference", p.name),
            code: code.to_string(),
            defines: Default::default(),
        },
        None,
        &[],
        JobKind::Dump,
        Mode::Quick,
        None,
    )
    .unwrap();
    job.draws = draw.clone().into_iter().collect();
    job.shapes = shapes
        .iter()
        .map(|s| atrex_tui::contract::job::shape_job_for(p, s, None).unwrap())
        .collect();
    let (_, mut rx) = client.submit(job);
    let mut dumps = Vec::new();
    let mut end = None;
    while let Some(e) = rx.recv().await {
        match e {
            JobEvent::Worker(Event::Tensors {
                shape,
                inputs,
                outputs,
                ..
            }) => dumps.push((shape, inputs, outputs)),
            JobEvent::Worker(Event::Done {
                verdict, message, ..
            }) => {
                end = Some((verdict, message));
                break;
            }
            JobEvent::WorkerLost { verdict, message } => {
                end = Some((verdict, Some(message)));
                break;
            }
            _ => {}
        }
    }
    let (verdict, message) = end.unwrap();
    if verdict != Verdict::Pass {
        failures.push(format!(
            "{} {which}: dump {:?}: {}",
            p.name,
            verdict,
            message.unwrap_or_default()
        ));
        return (report, failures);
    }
    for (sid, ins, outs) in dumps {
        let s = shapes.iter().find(|s| s.id == sid).unwrap();
        let env = p.env(s).unwrap();
        let host = |t: &TensorData| HostTensor {
            name: t.name.clone(),
            dtype: t.dtype.clone(),
            dims: t.dims.iter().map(|d| *d as usize).collect(),
            bytes: t.bytes().unwrap(),
        };
        let inputs: Vec<HostTensor> = ins.iter().map(host).collect();
        let cpu_out = match (op.run)(&env, &inputs) {
            Ok(o) => o,
            Err(e) => {
                failures.push(format!(
                    "{} {which} shape {sid}: CPU implementation: {e}",
                    p.name
                ));
                continue;
            }
        };
        let tol = compare::Tol {
            atol: p.tolerance.atol,
            rtol: p.tolerance.rtol,
            rel_l2: p.tolerance.rel_l2,
        };
        for (spec, gpu) in p.outputs.iter().zip(&outs) {
            let g = host(gpu);
            let Some(c) = cpu_out.iter().find(|c| c.name == spec.name) else {
                failures.push(format!("{} {which}: CPU gives no `{}`", p.name, spec.name));
                continue;
            };
            let mode = if spec.compare == "exact" {
                CmpMode::Exact
            } else {
                CmpMode::Float
            };
            let chk = compare::check_tensor(
                &spec.name,
                &spec.dtype,
                mode,
                &c.bytes,
                &g.bytes,
                &g.bytes,
                &compare::poison(&spec.dtype, 0),
                &compare::poison(&spec.dtype, 1),
                tol,
                false,
            );
            let line = format!(
                "{} {which} shape {:?} `{}`: strict {} max|err| {:.3e} rel_l2 {:.3e} mismatches {}\n",
                p.name, s.params, spec.name, chk.strict_ok, chk.max_abs, chk.rel_l2, chk.mismatches
            );
            report.push_str(&line);
            if !chk.strict_ok {
                failures.push(format!("{line}  {}", chk.reason.unwrap_or_default()));
            }
        }
    }
    (report, failures)
}
