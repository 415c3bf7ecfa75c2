"""The baselines of two ctgrad ablation studies compared seed by seed, as `ctgrad ablate` compares
the configurations of one study (docs/ablations.md): each study's baseline (its first configuration),
the mean of each over its seeds with its 95% interval, and the mean of the per-seed differences
(B - A) with its t interval. Runs of one seed share the data order across models, so the pairing
holds across families (the initial weights differ: the parameters are other ones).
usage: /usr/bin/python3 bench/paired_across_studies.py STUDY_A STUDY_B   (prints a Markdown table)"""
import glob
import json
import math
import os
import sys

T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]  # Student's t, 1..10 degrees of freedom


def baseline(study):
    first = sorted(glob.glob(os.path.join(study, "runs", "*")))[0]
    out, config = {}, None
    for path in glob.glob(os.path.join(first, "seed*", "result.json")):
        with open(path) as f:
            r = json.load(f)
        out[r["seed"]] = r["final"][r["metric"]]
        config = r["config"]
    if not out:
        sys.exit(f"{study}: its baseline has no finished run")
    return config, out


def interval(xs):
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, float("nan")
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    return m, T95[min(n - 2, len(T95) - 1)] * sd / math.sqrt(n)


(ca, a), (cb, b) = baseline(sys.argv[1]), baseline(sys.argv[2])
seeds = sorted(set(a) & set(b))
if not seeds:
    sys.exit("the two baselines share no seed")
ma, ha = interval([a[s] for s in seeds])
mb, hb = interval([b[s] for s in seeds])
md, hd = interval([b[s] - a[s] for s in seeds])
name_a, name_b = os.path.basename(os.path.normpath(sys.argv[1])), os.path.basename(os.path.normpath(sys.argv[2]))
print(f"| baseline | seeds | loss mean | 95% CI | vs {name_a} (paired) | 95% CI of the difference |")
print("|---|---|---|---|---|---|")
print(f"| {name_a}: `{ca}` | {len(seeds)} | {ma:.4f} | [{ma - ha:.4f}, {ma + ha:.4f}] | baseline | |")
print(f"| {name_b}: `{cb}` | {len(seeds)} | {mb:.4f} | [{mb - hb:.4f}, {mb + hb:.4f}] | {md:+.4f} | [{md - hd:+.4f}, {md + hd:+.4f}] |")
