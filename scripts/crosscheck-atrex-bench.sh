#!/usr/bin/env bash
# Cross-check atrex-tui's S with the Atrex-Bench evaluator's on the same GPU (docs/baselines.md,
# "Cross-check with the benchmark's evaluator").
#
#   bash scripts/crosscheck-atrex-bench.sh EVALUATOR_DIR [--ops "rms_norm silu_and_mul unified_attention"]
#        [--shapes N] [--full] [--hardware H200] [--out DIR]
#
# From the repository root, with .gpu/bin/atrex-tui or target/release/atrex-tui built, on a GPU
# machine with PyTorch and Triton. EVALUATOR_DIR is a checkout of alibaba/atrex-bench (src/,
# scripts/, configs/, data/) kept out of this repository (.eval/ is git-ignored); nothing is
# installed: the evaluator runs from its src/ through PYTHONPATH. For every operator:
#   1. `atrex-tui export OP` (the Atrex-Bench candidate, compiled once to fill the NVRTC cache) and
#      `--format cuda` (the same kernel file);
#   2. the evaluator's roofline.py: T_SOL per shape on this hardware profile, from its own W and Q,
#      with an SKU profile written from problems/hardware/<profile>.toml (its configs/ has no H200);
#   3. the evaluator's run_eval.py on the candidate (correctness, then do_bench timing per shape);
#   4. `atrex-tui bench OP --kernel <the exported kernel> --json` on the same shapes;
#   5. the per-shape table: crosscheck.md and crosscheck.json.
# --shapes N takes N shapes spread over each operator's ids (default: all); --full measures our
# side in full mode (default quick); --out defaults to $OUT, else target/crosscheck.
set -euo pipefail

die() { echo "crosscheck: $*" >&2; exit 2; }

[ $# -ge 1 ] || die "usage: bash scripts/crosscheck-atrex-bench.sh EVALUATOR_DIR [--ops \"...\"] [--shapes N] [--full] [--hardware KEY] [--out DIR]"
EVAL=$(cd "$1" 2>/dev/null && pwd) || die "no evaluator checkout at $1"
shift
OPS="rms_norm silu_and_mul unified_attention"
NSHAPES=0
MODE=--quick
HW=H200
DEST=${OUT:-target/crosscheck}
while [ $# -gt 0 ]; do
  case "$1" in
    --ops) OPS=$2; shift 2 ;;
    --shapes) NSHAPES=$2; shift 2 ;;
    --full) MODE=--full; shift ;;
    --hardware) HW=$2; shift 2 ;;
    --out) DEST=$2; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done

ROOT=$(pwd)
[ -f "$ROOT/problems/suite.toml" ] || die "run from the repository root (no problems/suite.toml here)"
if [ -x "$ROOT/.gpu/bin/atrex-tui" ]; then BIN=$ROOT/.gpu/bin/atrex-tui
elif [ -x "$ROOT/target/release/atrex-tui" ]; then BIN=$ROOT/target/release/atrex-tui
else die "no atrex-tui binary: build it (cargo build --release) or put it in .gpu/bin/"; fi
for f in scripts/run_eval.py scripts/roofline.py src/atrex_bench/eval/__init__.py; do
  [ -f "$EVAL/$f" ] || die "$EVAL is not an Atrex-Bench checkout (no $f)"
done
TOML=$(grep -l "^key = \"$HW\"" "$ROOT"/problems/hardware/*.toml | head -1)
[ -n "$TOML" ] || die "no problems/hardware/*.toml with key = \"$HW\""

# The evaluator's imports (pyproject.toml: torch, numpy, pyyaml; triton for do_bench). Nothing
# may be installed here: name what is missing and stop.
python3 - <<'PY' || exit 2
import importlib, sys
missing = []
for module, package in (("torch", "torch"), ("triton", "triton"), ("yaml", "pyyaml"), ("numpy", "numpy")):
    try:
        importlib.import_module(module)
    except Exception as e:
        missing.append("%s (import %s: %s)" % (package, module, e))
if missing:
    sys.exit("crosscheck: the evaluator needs Python packages that are missing: " + ", ".join(missing))
import torch
if not torch.cuda.is_available():
    sys.exit("crosscheck: PyTorch sees no CUDA device")
print("crosscheck: torch %s on %s" % (torch.__version__, torch.cuda.get_device_name(0)))
PY

mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
HELP=$ROOT/scripts/crosscheck_atrex_bench.py
export PYTHONPATH="$EVAL/src${PYTHONPATH:+:$PYTHONPATH}"
export ATREX_EXPORT_CACHE=${ATREX_EXPORT_CACHE:-${TMPDIR:-/tmp}/atrex-export-cache}
# Only the evaluator's own repository: inside this one (.eval/ without .git) `git rev-parse`
# would name this project's commit.
if [ -e "$EVAL/.git" ]; then EVAL_GIT=$(git -C "$EVAL" rev-parse HEAD 2>/dev/null || true); else EVAL_GIT=; fi
COMMIT=${EVAL_COMMIT:-${EVAL_GIT:-$(cat "$EVAL/COMMIT" 2>/dev/null || echo unknown)}}
{
  echo "evaluator: $EVAL (commit $COMMIT)"
  echo "atrex-tui: $BIN ($("$BIN" --version))"
  echo "hardware profile: $HW ($TOML)"
} > "$DEST/commands.txt"
YAML=$DEST/$HW.yaml
python3 "$HELP" yaml "$TOML" "$YAML" > /dev/null
echo "crosscheck: evaluator commit $COMMIT; SKU profile $YAML" >&2

run() { echo "+ $*" >> "$DEST/commands.txt"; "$@"; }

for op in $OPS; do
  echo "crosscheck: $op" >&2
  [ -d "$EVAL/data/$op" ] || die "the evaluator has no data/$op"
  mkdir -p "$DEST/candidates/cuda" "$DEST/ref" "$DEST/eval"
  run "$BIN" export "$op" --hardware "$HW" --out "$DEST/candidates" > /dev/null
  run "$BIN" export "$op" --hardware "$HW" --format cuda --out "$DEST/candidates/cuda" > /dev/null
  # Compile once before the evaluator's per-shape processes (each has a 60 s budget for its
  # first call): they find the CUBIN in the cache.
  run python3 -c "import importlib.util, sys
spec = importlib.util.spec_from_file_location('candidate', sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
import torch; torch.cuda.init(); m._loaded(torch.cuda.current_device())" "$DEST/candidates/$op.py" \
    || die "the exported $op does not compile or load on this GPU (see above)"
  rm -rf "$DEST/ref/$op"
  IDS=$(python3 "$HELP" subset "$EVAL/data/$op" "$DEST/ref/$op" "$NSHAPES")
  echo "crosscheck: $op shapes $IDS" >&2
  (cd "$EVAL" && run python3 scripts/roofline.py --operator "data/$op" --hardware "$YAML" \
     --skip-wq --no-write --shape-ids "$IDS" --format json --output "$DEST/roofline-$op.json" > /dev/null)
  set +e
  (cd "$EVAL" && run python3 scripts/run_eval.py --input "$DEST/candidates/$op.py" \
     --reference-dir "$DEST/ref/$op" --output "$DEST/eval/$op" --num-correctness-cases 1 \
     --skip-kernel-attribution) > "$DEST/eval-$op.log" 2> "$DEST/eval-$op.stderr"
  status=$?
  set -e
  grep '^\[OUTPUT\]' "$DEST/eval-$op.log" | tail -1 | sed 's/^\[OUTPUT\] //' > "$DEST/eval-$op.path" || true
  [ -s "$DEST/eval-$op.path" ] || die "run_eval.py wrote no eval_result.json for $op (exit $status): see $DEST/eval-$op.stderr"
  [ $status -eq 0 ] || echo "crosscheck: run_eval.py exit $status for $op (a shape failed its checks): see the table" >&2
  SHAPE_ARGS=()
  for id in ${IDS//,/ }; do SHAPE_ARGS+=(--shape "$id"); done
  set +e
  run "$BIN" bench "$op" --kernel "$DEST/candidates/cuda/$op.cu" --hardware "$HW" $MODE --json \
    "${SHAPE_ARGS[@]}" > "$DEST/bench-$op.json" 2> "$DEST/bench-$op.stderr"
  status=$?
  set -e
  [ $status -ne 2 ] || die "atrex-tui bench found no GPU: see $DEST/bench-$op.stderr"
  [ -s "$DEST/bench-$op.json" ] || die "atrex-tui bench $op printed nothing (exit $status): see $DEST/bench-$op.stderr"
done

python3 "$HELP" table "$DEST" $OPS
echo "crosscheck: wrote $DEST/crosscheck.md and $DEST/crosscheck.json" >&2
