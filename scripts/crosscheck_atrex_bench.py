"""Helpers of scripts/crosscheck-atrex-bench.sh (docs/baselines.md, "Cross-check with the
benchmark's evaluator"). Standard library only.

    python3 crosscheck_atrex_bench.py yaml HARDWARE_TOML OUT_YAML
        the evaluator's SKU profile (configs/hardware/<sku>.yaml schema) from one of
        problems/hardware/*.toml: p_peak per dtype path, b_peak.hbm.
    python3 crosscheck_atrex_bench.py subset DATA_OP_DIR OUT_DIR N
        a copy of the operator's reference bundle (reference.py, input.py, metadata.json,
        shapes.json) with N shapes spread evenly over its ids (all when N is 0); prints the ids.
    python3 crosscheck_atrex_bench.py table OUT_DIR OPS...
        the per-shape comparison of OUT_DIR/bench-OP.json (atrex-tui bench --json),
        OUT_DIR/roofline-OP.json (the evaluator's roofline.py --format json) and the evaluator's
        eval_result.json (path in OUT_DIR/eval-OP.path): crosscheck.md and crosscheck.json.
"""

import json
import math
import os
import re
import shutil
import sys

# The evaluator's dtype paths (src/atrex_bench/eval/roofline.py, DTYPE_PATHS) by the suite's
# peak_flops keys.
PATHS = {
    "bf16": "bf16_tc",
    "fp16": "fp16_tc",
    "fp8_e4m3": "fp8_e4m3_tc",
    "tf32": "fp32_tf32_tc",
    "fp32": "fp32_strict",
}


def toml_number(text, key, section=None):
    """A number `key = value` of a flat TOML file (in `[section]` when given)."""
    body = text
    if section is not None:
        m = re.search(r"^\[%s\][^\n]*$(.*?)(?=^\[|\Z)" % re.escape(section), text, re.M | re.S)
        if not m:
            raise SystemExit("no [%s] section in the hardware profile" % section)
        body = m.group(1)
    m = re.search(r"^%s\s*=\s*([0-9.eE+_-]+)" % re.escape(key), body, re.M)
    if not m:
        return None
    return float(m.group(1).replace("_", ""))


def make_yaml(toml_path, out):
    text = open(toml_path, encoding="utf-8").read()
    key = re.search(r'^key\s*=\s*"([^"]+)"', text, re.M).group(1)
    arch = re.search(r'^arch\s*=\s*"([^"]+)"', text, re.M).group(1)
    hbm = toml_number(text, "hbm_bytes_per_s")
    lines = [
        "# SKU profile %s, written by scripts/crosscheck-atrex-bench.sh from %s" % (key, toml_path),
        "hardware:",
        "  name: %s" % key,
        "  arch: %s" % arch,
        "  vendor: NVIDIA",
        "p_peak:",
    ]
    for suite_key, path in PATHS.items():
        v = toml_number(text, suite_key, "peak_flops")
        if v is not None:
            lines.append("  %s: %d" % (path, int(v)))
    lines += ["b_peak:", "  hbm: %d" % int(hbm), "source:", "  vendor_doc: '%s'" % toml_path]
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(key)


def subset(op_dir, out_dir, n):
    shapes = json.load(open(os.path.join(op_dir, "shapes.json")))
    ids = sorted(shapes, key=int)
    if n > 0 and n < len(ids):
        step = (len(ids) - 1) / (n - 1) if n > 1 else 0
        ids = sorted({ids[round(i * step)] for i in range(n)}, key=int)
    os.makedirs(out_dir, exist_ok=True)
    for f in ("reference.py", "input.py", "metadata.json"):
        shutil.copy(os.path.join(op_dir, f), os.path.join(out_dir, f))
    with open(os.path.join(out_dir, "shapes.json"), "w") as f:
        json.dump({i: shapes[i] for i in ids}, f, indent=2)
    print(",".join(ids))


def ratio(a, b):
    return a / b if a and b else None


def fmt(x, digits=4):
    return "—" if x is None else ("%.*g" % (digits, x))


def table(out_dir, ops):
    doc = {"operators": {}}
    md = ["# Cross-check: atrex-tui bench against the Atrex-Bench evaluator", ""]
    flagged = []
    for op in ops:
        bench = json.load(open(os.path.join(out_dir, "bench-%s.json" % op)))
        roof = json.load(open(os.path.join(out_dir, "roofline-%s.json" % op)))
        path = open(os.path.join(out_dir, "eval-%s.path" % op)).read().strip()
        ev = json.load(open(path)) if path and os.path.isfile(path) else {}
        sol = {str(r["shape_id"]): r["sol_time_ms"] for r in roof.get("shapes", [])}
        perf = (ev.get("performance") or {}).get("shapes") or {}
        corr = (ev.get("passed") or {}).get("correctness") or {}
        doc.setdefault("gpu", bench.get("gpu"))
        doc.setdefault("environment", ev.get("environment"))
        rows = []
        for r in bench.get("shapes", []):
            sid = str(r["shape"])
            ours_t = (r.get("timing") or {}).get("median_ms")
            samples = (perf.get(sid) or {}).get("samples") or []
            theirs_t = samples[0].get("end_to_end_time_ms") if samples else None
            row = {
                "shape": int(sid),
                "ours": {"t_ms": ours_t, "sol_ms": r.get("sol_ms"), "s": r.get("s"), "verdict": r.get("verdict")},
                "theirs": {
                    "t_ms": theirs_t,
                    "sol_ms": sol.get(sid),
                    "s": ratio(sol.get(sid), theirs_t),
                    "correctness": (corr.get(sid) or {}).get("status"),
                    "error": (perf.get(sid) or {}).get("error"),
                },
            }
            row["s_ratio"] = ratio(row["theirs"]["s"], row["ours"]["s"])
            row["t_ratio"] = ratio(theirs_t, ours_t)
            row["sol_ratio"] = ratio(sol.get(sid), r.get("sol_ms"))
            rows.append(row)
        valid = [x["s_ratio"] for x in rows if x["s_ratio"]]
        summary = {
            "shapes": len(rows),
            "compared": len(valid),
            "geomean_s_ratio": math.exp(sum(math.log(v) for v in valid) / len(valid)) if valid else None,
            "median_s_ratio": sorted(valid)[len(valid) // 2] if valid else None,
            "beyond_15_percent": sum(1 for v in valid if abs(v - 1) > 0.15),
            "their_correctness_failed": sum(1 for x in rows if x["theirs"]["correctness"] not in ("passed", None)),
        }
        doc["operators"][op] = {"kernel": bench.get("kernel"), "summary": summary, "shapes": rows, "eval_result": path}
        md += [
            "## %s" % op,
            "",
            "kernel: `%s`; %d shapes, %d compared; S_theirs / S_ours geometric mean %s, median %s; %d beyond ±15 %%."
            % (bench.get("kernel"), summary["shapes"], summary["compared"], fmt(summary["geomean_s_ratio"]),
               fmt(summary["median_s_ratio"]), summary["beyond_15_percent"]),
            "",
            "| shape | T_SOL ours µs | T_SOL theirs µs | T ours µs | T theirs µs | S ours | S theirs | S theirs/ours | their check |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for x in rows:
            o, t = x["ours"], x["theirs"]
            us = lambda v: None if v is None else v * 1000
            mark = " **" if x["s_ratio"] and abs(x["s_ratio"] - 1) > 0.15 else ""
            md.append("| %d | %s | %s | %s | %s | %s | %s | %s%s | %s |" % (
                x["shape"], fmt(us(o["sol_ms"])), fmt(us(t["sol_ms"])), fmt(us(o["t_ms"])), fmt(us(t["t_ms"])),
                fmt(o["s"], 3), fmt(t["s"], 3), fmt(x["s_ratio"], 3), mark, t["correctness"] or "—"))
            if mark:
                flagged.append("%s shape %d" % (op, x["shape"]))
        md.append("")
    md += [
        "S = T_SOL / T. Ours: `atrex-tui bench` (cold L2 before every sample, the median of CUDA-event",
        "timings of the kernel launches alone). Theirs: the evaluator's `run_eval.py` (triton's do_bench:",
        "the mean of CUDA-event timings around the whole `forward`, Python and launch overhead included)",
        "with T_SOL from its roofline.py on the same H200 peaks. ** marks a ratio beyond ±15 %.",
        "",
        "Beyond ±15 %%: %s" % (", ".join(flagged) if flagged else "none"),
    ]
    with open(os.path.join(out_dir, "crosscheck.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(out_dir, "crosscheck.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
    print("\n".join(md))


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "yaml":
        make_yaml(sys.argv[2], sys.argv[3])
    elif cmd == "subset":
        subset(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "table":
        table(sys.argv[2], sys.argv[3:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
