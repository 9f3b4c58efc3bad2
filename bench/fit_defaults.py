#!/usr/bin/env python3
"""Regenerates the presets' fitted GEMM maxima (issue #40 item 3) from validation/*.jsonl.

    python3 bench/fit_defaults.py [--stratagem ./build/apps/stratagem] [--write]

Runs the fit the presets' "source" names:

    stratagem calibrate --measured validation/*.jsonl --parameters gemm,fp8_gemm --per-chip \
        --min-sensitivity 0.25 --cross-validate

(per chip, the achieved maximum of the 16-bit and of the fp8 GEMM efficiency curve; a run
determines a parameter only when its throughput moves by at least a quarter of the parameter's
change; each efficiency is held at or below the datasheet peak) and adopts a fitted value only
where leave-one-source-out cross-validation can check it and agrees:

  * at least one held-out table has runs on that chip and dtype, and the fit to the *other*
    tables determined the parameter (so a value measured by one table only is never adopted:
    nothing could tell it from that table's own peculiarities);
  * on every such table, the held-out runs of that GPU are predicted no worse (median |error|)
    than with the value before any fit (the preset's "prior", kept beside the fitted "max").

An adopted value is the preset's maximum times the fitted scale, rounded to 3 digits; with
--write it goes into scenarios/presets/gpus.json with a "source" naming this fit, and
validation/cross-validation.json records the per-table held-out errors. The presets are
embedded at build time: rebuild and run again until nothing changes (the fit from the new
values then gives scales within rounding of 1, which tests/tune/test_fitted_defaults.cpp checks).
Takes about 2.5 minutes on 2 cores.
"""
import argparse
import datetime
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRESETS = os.path.join(ROOT, "scenarios", "presets", "gpus.json")
RECORD = os.path.join(ROOT, "validation", "cross-validation.json")
ACCURACY = os.path.join(ROOT, "scenarios", "presets", "accuracy.json")
FIT_ARGS = ["--parameters", "gemm,fp8_gemm", "--per-chip", "--min-sensitivity", "0.25"]
CURVE = {"gemm_scale": "matmul_efficiency", "fp8_gemm_scale": "fp8_matmul_efficiency"}


def run_fit(stratagem, tables):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "fit.json")
        cmd = [stratagem, "calibrate", "--measured", *tables, *FIT_ARGS, "--cross-validate",
               "--quiet", "-o", out]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f), cmd


def priors(presets):
    """{(gpu, parameter): (current max, prior max)}: the prior is the value before any fit."""
    out = {}
    for gpu, spec in presets.items():
        for name, key in CURVE.items():
            if isinstance(spec, dict) and key in spec:
                cur = spec[key].get("max", 0.8)
                out[(gpu, name)] = (cur, spec[key].get("prior", cur))
    return out


def baseline_rows(stratagem, tables, fit, prior):
    """{(table, run id): error} with every fitted maximum back at its prior."""
    moved = {k: v for k, v in prior.items() if v[0] != v[1]}
    gpus = {r["gpu"] for fold in fit["cross_validation"] for r in fold["held_out_rows"]}
    profile = {"format": "stratagem-fitted-profile", "version": 1, "name": "priors",
               "gpus": {g: {"runs": 1, "parameters": {
                   name: {"value": v[1] / v[0]} for (gg, name), v in moved.items() if gg == g}}
                   for g in gpus}}
    out = {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "priors.json")
        with open(path, "w") as f:
            json.dump(profile, f)
        for t in tables:
            args = [stratagem, "validate", "--measured", t, "--json", "--quiet"]
            if moved:
                args += ["--profile", path]
            res = json.loads(subprocess.run(args, check=True, capture_output=True,
                                            text=True).stdout)
            source = os.path.splitext(os.path.basename(t))[0]
            for r in res["runs"]:
                out[(source, r["id"])] = r["error"]
    return out


def adopted(fit, baseline):
    """{(gpu, parameter): (scale, [(table, held-out median, prior median, runs)])}"""
    out = {}
    for gpu, g in fit["gpus"].items():
        for name, p in g["parameters"].items():
            if name not in CURVE or not p["determined"]:
                continue
            checks = []
            agrees = True
            for fold in fit["cross_validation"]:
                other = fold["fit"].get(gpu, {}).get("parameters", {}).get(name, {})
                rows = [r for r in fold["held_out_rows"] if r["gpu"] == gpu]
                if not rows or not other.get("determined"):
                    continue
                held = statistics.median(abs(r["error"]) for r in rows)
                prior = statistics.median(abs(baseline[(fold["source"], r["id"])]) for r in rows)
                checks.append((fold["source"], held, prior, len(rows)))
                agrees = agrees and held <= prior
            if checks and agrees:
                out[(gpu, name)] = (p["value"], checks)
    return out


def gpu_block(text, gpu):
    """(start, end) of the preset's object in gpus.json."""
    m = re.search(r'^  "%s": \{$' % re.escape(gpu), text, re.M)
    if not m:
        sys.exit("no preset %s in %s" % (gpu, PRESETS))
    end = re.search(r"^  \}", text[m.end():], re.M)
    return m.start(), m.end() + end.end()


def write_presets(changes, tables, prior):
    with open(PRESETS) as f:
        text = f.read()
    presets = json.loads(text)
    for (gpu, name), (value, checks) in sorted(changes.items()):
        key = CURVE[name]
        curve = presets[gpu][key]
        old = curve["max"]
        new = round(old * value, 3)
        held = "; ".join("%s: %d runs, median |error| %.1f %% held out vs %.1f %% at the prior"
                         % (t, n, 100 * h, 100 * u) for t, h, u, n in checks)
        source = ("Fitted by bench/fit_defaults.py (stratagem calibrate --measured %s %s "
                  "--cross-validate), the runs of this chip in those tables; leave-one-source-out "
                  "check: %s" % (" ".join(tables), " ".join(FIT_ARGS), held))
        body = ('{\n      "max": %s,\n      "half_dim": %s,\n      "prior": %s,\n      "source":\n'
                '          %s\n    }' % (json.dumps(new), json.dumps(curve.get("half_dim", 128)),
                                       json.dumps(prior[(gpu, name)][1]), json.dumps(source)))
        start, end = gpu_block(text, gpu)
        block = text[start:end]
        block, n = re.subn(r'"%s": \{.*?\n    \}' % key, '"%s": %s' % (key, body), block,
                           count=1, flags=re.S)
        if n != 1:
            sys.exit("no %s in preset %s" % (key, gpu))
        text = text[:start] + block + text[end:]
        print("%-10s %-22s max %.3f -> %.3f" % (gpu, key, old, new))
    json.loads(text)  # still valid
    with open(PRESETS, "w") as f:
        f.write(text)


def revert(gpu_params):
    """Puts fitted maxima the cross-validation no longer adopts back at their prior."""
    with open(PRESETS) as f:
        text = f.read()
    presets = json.loads(text)
    for gpu, name in sorted(gpu_params):
        key = CURVE[name]
        curve = presets[gpu][key]
        body = '{\n      "max": %s,\n      "half_dim": %s\n    }' % (
            json.dumps(curve["prior"]), json.dumps(curve.get("half_dim", 128)))
        start, end = gpu_block(text, gpu)
        block, n = re.subn(r'"%s": \{.*?\n    \}' % key, '"%s": %s' % (key, body),
                           text[start:end], count=1, flags=re.S)
        if n != 1:
            sys.exit("no %s in preset %s" % (key, gpu))
        text = text[:start] + block + text[end:]
        print("%-10s %-22s max %.3f -> %.3f (prior: not adopted any more)"
              % (gpu, key, curve["max"], curve["prior"]))
    json.loads(text)
    with open(PRESETS, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stratagem", default=os.path.join(ROOT, "build", "apps", "stratagem"))
    ap.add_argument("--write", action="store_true",
                    help="write adopted values into gpus.json and the record")
    args = ap.parse_args()
    tables = sorted(os.path.relpath(p, ROOT)
                    for p in glob.glob(os.path.join(ROOT, "validation", "*.jsonl")))
    os.chdir(ROOT)
    with open(PRESETS) as f:
        prior = priors(json.load(f))
    fit, cmd = run_fit(args.stratagem, tables)
    baseline = baseline_rows(args.stratagem, tables, fit, prior)
    print("leave-one-source-out (each table predicted by the fit to the others):")
    for fold in fit["cross_validation"]:
        h, u = fold["held_out"], fold["unfitted"]
        print("  %-18s %3d runs  median %.1f %% (unfitted %.1f %%), p90 %.1f %% (%.1f %%), "
              "bias %+.1f %% (%+.1f %%), pairs ordered %d/%d"
              % (fold["source"], fold["runs"], 100 * h["median_abs_error"],
                 100 * u["median_abs_error"], 100 * h["p90_abs_error"], 100 * u["p90_abs_error"],
                 100 * h["bias"], 100 * u["bias"], h["pairs_ordered_right"], h["pairs"]))
    changes = adopted(fit, baseline)
    moved = {k: v for k, v in changes.items() if round(prior[k][0] * v[0], 3) != prior[k][0]}
    for (gpu, name), (value, _) in sorted(changes.items()):
        print("adopted  %-10s %-15s scale %.4f" % (gpu, name, value))
    for gpu, g in fit["gpus"].items():
        for name, p in g["parameters"].items():
            if name in CURVE and p["determined"] and (gpu, name) not in changes:
                print("kept     %-10s %-15s (fit %.3f not confirmed by a held-out table)"
                      % (gpu, name, p["value"]))
    if not args.write:
        return 0
    stale = {k for k, (cur, pri) in prior.items() if cur != pri and k not in changes}
    if changes:
        write_presets(changes, tables, prior)
    if stale:
        revert(stale)
        moved.update({k: None for k in stale})
    if moved:
        print("rebuild (presets are embedded) and run again until nothing moves")
    record = {
        "command": " ".join(os.path.relpath(c, ROOT) if c == args.stratagem else c for c in cmd[:-2]),
        "date": datetime.date.today().isoformat(),
        "adopted": {"%s %s" % k: {"scale": v[0], "checks": [
            {"table": t, "runs": n, "held_out_median": h, "prior_median": u}
            for t, h, u, n in v[1]]} for k, v in sorted(changes.items())},
        "folds": [{k: fold[k] for k in ("source", "runs", "fitted_gpus", "unfitted", "held_out")}
                  | {"rows": [{k: r[k] for k in ("id", "gpu", "stack", "error", "unfitted_error")}
                              for r in fold["held_out_rows"]]}
                  for fold in fit["cross_validation"]],
    }
    with open(RECORD, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    write_accuracy(fit, changes, tables)
    return 0


def write_accuracy(fit, changes, tables):
    """scenarios/presets/accuracy.json: the error to expect per GPU and stack, as shipped.

    A run on a GPU with an adopted (fitted) value counts with its held-out error (the fit to the
    other tables); any other run with its error as shipped, which no fit touched."""
    fitted = {gpu for gpu, _ in changes}
    groups = {}
    for fold in fit["cross_validation"]:
        for r in fold["held_out_rows"]:
            e = r["error"] if r["gpu"] in fitted else r["unfitted_error"]
            g = groups.setdefault((r["gpu"], r["stack"]), {"errors": [], "tables": set()})
            g["errors"].append(e)
            g["tables"].add(fold["source"])

    def q(v, p):
        v = sorted(v)
        pos = p * (len(v) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(v) - 1)
        return v[lo] + (pos - lo) * (v[hi] - v[lo])

    out = []
    for (gpu, stack), g in sorted(groups.items()):
        e = g["errors"]
        out.append({"gpu": gpu, "stack": stack, "runs": len(e), "tables": sorted(g["tables"]),
                    "median_abs_error": round(q([abs(x) for x in e], 0.5), 4),
                    "p90_abs_error": round(q([abs(x) for x in e], 0.9), 4),
                    "bias": round(q(e, 0.5), 4)})
    doc = {"description": "The simulator's error on measured runs (validation/*.jsonl) per GPU "
                          "and training stack, as shipped: runs on a GPU with a fitted default "
                          "predicted by the fit to the other tables (leave one source out), the "
                          "others by the presets no fit touched. `search` prints it beside its "
                          "configurations.",
           "source": "python3 bench/fit_defaults.py --write (tables: %s)" % ", ".join(tables),
           "groups": out}
    with open(ACCURACY, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
