//! Frame timing on the real suite (ignored; run by hand).

use super::render;
use crate::session::fixtures::{measured, records, revision};
use crate::session::{Author, Model};
use crate::tui::highlight::Highlighter;
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use crate::tui::view;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::sync::Arc;

/// Frame timing: `cargo test --release --lib frame_timing -- --ignored --nocapture`.
#[test]
#[ignore]
fn frame_timing() {
    use crate::suite::{Suite, SuiteSource};
    let t0 = std::time::Instant::now();
    let suite = Arc::new(Suite::load(SuiteSource::Embedded).unwrap());
    let model = Model::new(&suite);
    let hw = suite.hardware("H200").ok().cloned();
    let s = AppState::new(
        suite.clone(),
        model,
        Theme::builtin("dark", true).unwrap(),
        hw,
        std::env::temp_dir(),
    );
    let first = render(&s, 200, 50);
    let first_ms = t0.elapsed().as_secs_f64() * 1e3;
    drop(first);
    // 1,000 revisions with every shape measured, spread over the operators
    let mut ev = Vec::new();
    let ops: Vec<&crate::suite::Problem> = suite.problems.iter().collect();
    let mut mid = 0;
    for i in 0..1000u32 {
        let p = ops[i as usize % ops.len()];
        let rev = i / ops.len() as u32 + 1;
        ev.push(revision(
            &p.name,
            rev,
            None,
            Author::Tuner,
            "sweep",
            &format!("// {i}\n__global__ void k() {{ int x = {i}; }}\n"),
        ));
        mid += 1;
        let shapes: Vec<(u32, f64)> = p
            .shapes
            .iter()
            .map(|s| (s.id, 0.3 + (s.id % 7) as f64 * 0.05))
            .collect();
        ev.extend(measured(&p.name, rev, mid, &shapes));
    }
    let model = Model::from_records(&suite, &records(ev));
    let mut s = AppState::new(
        suite.clone(),
        model,
        Theme::builtin("dark", true).unwrap(),
        suite.hardware("H200").ok().cloned(),
        std::env::temp_dir(),
    );
    s.view.highlighter = Some(Arc::new(Highlighter::new("OneHalfDark", true).unwrap()));
    s.refresh();
    let big = suite
        .problems
        .iter()
        .max_by_key(|p| p.shapes.len())
        .unwrap()
        .name
        .clone();
    let i = s.visible_ops().iter().position(|o| *o == big).unwrap();
    s.view.op_sel = i;
    s.refresh();
    let mut term = Terminal::new(TestBackend::new(200, 50)).unwrap();
    let mut times = Vec::new();
    for _ in 0..200 {
        let t = std::time::Instant::now();
        term.draw(|f| view::draw(f, &s)).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "frame timing at 200x50: {} shapes, {} revisions: first frame {first_ms:.1} ms (suite load + state + draw); frame median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        suite.shape_count(),
        s.work
            .model
            .ops
            .values()
            .map(|o| o.revisions.len())
            .sum::<usize>(),
        times[times.len() / 2],
        times[times.len() * 99 / 100],
        times[times.len() - 1]
    );
}
