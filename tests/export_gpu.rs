//! Exported kernels on the GPU (run on a machine with a CUDA GPU, PyTorch and the Atrex-Bench
//! data: `cargo test --release --test export_gpu -- --include-ignored`).
//!
//! The benchmark's data is looked up in `$ATREX_BENCH_DIR` (a checkout of Atrex-Bench, with
//! data/), else `.eval/atrex-bench`, else `../shared/atrex-bench-data`.

mod common;

use atrex_tui::suite::{Suite, SuiteSource};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("atrex-export-gpu-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The benchmark's data/ folder; a clear failure when there is none.
fn bench_data() -> PathBuf {
    let mut tried = Vec::new();
    let candidates = std::env::var_os("ATREX_BENCH_DIR")
        .map(PathBuf::from)
        .into_iter()
        .chain([
            repo().join(".eval/atrex-bench"),
            repo().join("../shared/atrex-bench-data"),
        ]);
    for c in candidates {
        if c.join("data/rms_norm/reference.py").is_file() {
            return c.join("data");
        }
        tried.push(c.display().to_string());
    }
    panic!(
        "no Atrex-Bench data (data/<op>/reference.py) in {}: set ATREX_BENCH_DIR to a checkout",
        tried.join(", ")
    );
}

fn python_with_torch_on_cuda() {
    let o = Command::new("python3")
        .args(["-c", "import torch; assert torch.cuda.is_available(), 'no CUDA device for torch'; print(torch.__version__)"])
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "python3 with PyTorch on a CUDA device is needed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn export(op: &str, out: &Path, extra: &[&str]) {
    let ws = out.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let o = Command::new(common::exe())
        .arg("--workspace")
        .arg(&ws)
        .args(["export", op, "--out"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "export {op}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// What a process printed: its stdout, then its stderr.
fn printed(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs the candidate against the benchmark's reference; (passed, what it printed).
fn check(candidate: &Path, op: &str, shapes: &str) -> (bool, String) {
    let suite = Suite::load(SuiteSource::Embedded).unwrap();
    let t = &suite.problem(op).unwrap().tolerance;
    let o = Command::new("python3")
        .arg(repo().join("tests/fixtures/export_check.py"))
        .arg(candidate)
        .arg(bench_data().join(op))
        .arg(shapes)
        .arg(t.atol.to_string())
        .arg(t.rtol.to_string())
        .arg(t.rel_l2.to_string())
        .output()
        .unwrap();
    let text = printed(&o);
    eprintln!("{op} ({}):\n{text}", candidate.display());
    (o.status.success(), text)
}

/// rms_norm, silu_and_mul (its incumbent and the TMA + cluster template) and
/// unified_attention (a template with tensor maps, a persistent grid, more than 48 KiB of
/// shared memory and seq_lens read back) exported as Atrex-Bench candidates give the benchmark
/// reference's outputs within the operator's strict tolerance; a kernel that computes something
/// else fails the same check.
#[test]
#[ignore = "needs a CUDA GPU"]
fn exported_candidates_match_the_benchmark_reference() {
    python_with_torch_on_cuda();
    let tma = repo().join("knowledge/templates/silu_and_mul_tma.cu");
    let cases: [(&str, &str, Vec<&str>); 4] = [
        ("rms_norm", "0,15,41,54", vec![]),
        ("silu_and_mul", "0,13,36", vec![]),
        (
            "silu_and_mul",
            "1,13,36",
            vec!["--kernel", tma.to_str().unwrap()],
        ),
        ("unified_attention", "3,5,8,16", vec![]),
    ];
    let mut failed = Vec::new();
    for (k, (op, shapes, extra)) in cases.iter().enumerate() {
        let out = scratch(&format!("{op}-{k}"));
        export(op, &out, extra);
        let (ok, text) = check(&out.join(format!("{op}.py")), op, shapes);
        if !ok || !text.contains(" ok ") {
            failed.push(format!("{op} {extra:?}:\n{text}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));

    // The negative control: rms_norm with eps 10^4 times too large must fail the check.
    let out = scratch("broken");
    let base = std::fs::read_to_string(repo().join("problems/rms_norm/baseline.cu")).unwrap();
    assert!(base.contains("\"eps:f32\""));
    let broken = out.join("broken.cu");
    std::fs::write(&broken, base.replace("\"eps:f32\"", "\"eps * 10000:f32\"")).unwrap();
    export("rms_norm", &out, &["--kernel", broken.to_str().unwrap()]);
    let (ok, text) = check(&out.join("rms_norm.py"), "rms_norm", "0,15");
    assert!(
        !ok && text.contains("MISMATCH"),
        "a wrong kernel must fail: {text}"
    );
}

/// The C++ launcher with real CUDA headers: every export of the three operators compiles with
/// nvcc, and silu_and_mul's TMA + cluster template, launched from C++ on a stream, gives
/// silu(gate) * up (computed on the host) within bf16 rounding.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_cpp_launcher_compiles_with_nvcc_and_runs() {
    let nvcc = ["nvcc", "/usr/local/cuda/bin/nvcc"].into_iter().find(|n| {
        Command::new(n)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(nvcc) = nvcc else {
        panic!("nvcc is needed for this test (the CUDA toolkit's compiler)");
    };
    let out = scratch("nvcc");
    for op in ["rms_norm", "silu_and_mul", "unified_attention"] {
        export(op, &out, &["--format", "cuda"]);
        let o = Command::new(nvcc)
            .args([
                "-std=c++17",
                "-gencode",
                "arch=compute_90a,code=sm_90a",
                "-c",
                "-o",
            ])
            .arg(out.join(format!("{op}.o")))
            .arg(out.join(format!("{op}_launch.cu")))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "nvcc {op}_launch.cu:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let run = scratch("nvcc-run");
    let tma = repo().join("knowledge/templates/silu_and_mul_tma.cu");
    export(
        "silu_and_mul",
        &run,
        &["--format", "cuda", "--kernel", tma.to_str().unwrap()],
    );
    std::fs::write(run.join("main.cu"), SILU_MAIN).unwrap();
    let exe = run.join("silu");
    let o = Command::new(nvcc)
        .args([
            "-std=c++17",
            "-gencode",
            "arch=compute_90a,code=sm_90a",
            "-o",
        ])
        .arg(&exe)
        .arg(run.join("main.cu"))
        .arg(run.join("silu_and_mul_launch.cu"))
        .arg("-lcuda")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "nvcc main.cu:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = Command::new(&exe).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    eprintln!("{text}{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success() && text.contains("ok"), "{text}");
}

/// silu_and_mul through the exported C++ launcher on [T, 2d] = [1000, 2 * 4096], checked on
/// the host; exits 1 on a mismatch or a CUDA error.
const SILU_MAIN: &str = r#"
#include "silu_and_mul_launch.h"
#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

static float bf16_to_float(unsigned short b) { unsigned int u = static_cast<unsigned int>(b) << 16; float f; std::memcpy(&f, &u, 4); return f; }
static unsigned short float_to_bf16(float f) { unsigned int u; std::memcpy(&u, &f, 4); u += 0x7FFF + ((u >> 16) & 1); return static_cast<unsigned short>(u >> 16); }

int main() {
  const long long T = 1000, d = 4096;
  std::vector<unsigned short> x(static_cast<size_t>(T * 2 * d));
  unsigned int s = 12345;
  for (auto& v : x) { s = s * 1664525u + 1013904223u; v = float_to_bf16((static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * 8.0f); }
  void *dx = nullptr, *dout = nullptr;
  if (cudaMalloc(&dx, x.size() * 2) != cudaSuccess || cudaMalloc(&dout, static_cast<size_t>(T * d) * 2) != cudaSuccess) { std::printf("cudaMalloc failed\n"); return 1; }
  cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice);
  atrex_export_silu_and_mul::Params p;
  p.shape = {T, 2 * d};
  atrex_export_silu_and_mul::Buffers b;
  b.x = dx;
  b.out = dout;
  size_t ws = atrex_export_silu_and_mul::workspace_bytes(p);
  std::string why;
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  cudaError_t e = atrex_export_silu_and_mul::launch(p, b, nullptr, ws, stream, &why);
  if (e != cudaSuccess) { std::printf("launch: %s\n", why.c_str()); return 1; }
  e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) { std::printf("kernel: %s\n", cudaGetErrorString(e)); return 1; }
  std::vector<unsigned short> out(static_cast<size_t>(T * d));
  cudaMemcpy(out.data(), dout, out.size() * 2, cudaMemcpyDeviceToHost);
  long long bad = 0;
  double worst = 0;
  for (long long t = 0; t < T; ++t)
    for (long long j = 0; j < d; ++j) {
      float g = bf16_to_float(x[static_cast<size_t>(t * 2 * d + j)]);
      float u = bf16_to_float(x[static_cast<size_t>(t * 2 * d + d + j)]);
      float act = bf16_to_float(float_to_bf16(g / (1.0f + std::exp(-g))));
      float want = bf16_to_float(float_to_bf16(act * u));
      float got = bf16_to_float(out[static_cast<size_t>(t * d + j)]);
      double diff = std::fabs(static_cast<double>(want) - got);
      if (diff > worst) worst = diff;
      if (!(diff <= 1e-2 + 0.0078125 * std::fabs(want))) ++bad;
    }
  std::printf("%s: %lld of %lld elements outside tolerance, max |diff| %g\n", bad ? "MISMATCH" : "ok", bad, T * d, worst);
  return bad ? 1 : 0;
}
"#;

/// reshape_and_cache's incumbent has a grid barrier and a cooperative launch: the exported
/// candidate launches it cooperatively (its outputs equal a torch scatter), and the same kernel
/// with a grid that cannot be resident at once is refused by the driver instead of waiting at
/// its barrier forever (run under `timeout`, so a missing attribute fails instead of hanging).
#[test]
#[ignore = "needs a CUDA GPU"]
fn exported_cooperative_launches_run_and_are_enforced() {
    python_with_torch_on_cuda();
    let out = scratch("cooperative");
    export("reshape_and_cache", &out, &[]);
    let src =
        std::fs::read_to_string(repo().join("knowledge/templates/reshape_and_cache.cu")).unwrap();
    let grid = src
        .lines()
        .find(|l| l.starts_with("grid = "))
        .expect("the template's grid line")
        .to_string();
    let big_dir = out.join("big");
    std::fs::create_dir_all(&big_dir).unwrap();
    let big = big_dir.join("oversized.cu");
    std::fs::write(&big, src.replacen(&grid, "grid = [\"132 * 64\"]", 1)).unwrap();
    export(
        "reshape_and_cache",
        &big_dir,
        &["--kernel", big.to_str().unwrap()],
    );
    let o = Command::new("timeout")
        .arg("120")
        .arg("python3")
        .arg(repo().join("tests/fixtures/export_cooperative.py"))
        .arg(out.join("reshape_and_cache.py"))
        .arg(big_dir.join("reshape_and_cache.py"))
        .output()
        .unwrap();
    let text = printed(&o);
    assert!(o.status.success(), "{text}");
    assert_eq!(text.matches(": ok").count(), 3, "{text}");
    assert!(
        text.contains("oversized cooperative grid refused"),
        "{text}"
    );
}

/// topk_filter's template on rows the benchmark never draws: a constant row, ties at the
/// threshold, all-negative rows, a top k' spread over more than 16 octaves, k' = V, and lengths
/// that take the short-row, general and long-row paths (aligned and not). Its output must equal a
/// sort-based selection bit for bit; the short-row path's hand-overs to the general one are
/// reached by the constant and spread rows.
#[test]
#[ignore = "needs a CUDA GPU"]
fn topk_filter_template_is_exact_on_adversarial_rows() {
    python_with_torch_on_cuda();
    let out = scratch("topk-adversarial");
    let kernel = repo().join("knowledge/templates/topk_filter_select.cu");
    export("topk_filter", &out, &["--kernel", kernel.to_str().unwrap()]);
    let o = Command::new("timeout")
        .arg("300")
        .arg("python3")
        .arg(repo().join("tests/fixtures/topk_adversarial.py"))
        .arg(out.join("topk_filter.py"))
        .output()
        .unwrap();
    let text = printed(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("46 cases: ok"), "{text}");
}
