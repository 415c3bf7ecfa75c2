#!/usr/bin/env bash
# Smoke test of `ctgrad-bench gpt|vit|transformer`: a few steps of each model, with the libtorch
# peer when it was built. Checks the JSON lines: figures present and finite, losses finite,
# 0 heap allocations per steady step for ctgrad (oneDNN's own counted apart), a ratio line when the peer ran.
set -euo pipefail
bench="$1"
peer=()
[ -x "$(dirname "$bench")/ctgrad-bench-libtorch" ] && peer=(--peer libtorch)
# One configuration per model (medium shares small's code), 2 threads whatever the machine.
for run in "gpt small" "vit small" "transformer small"; do
  set -- $run
  steps=2
  echo "+ $bench $1 --config $2 --threads 2 --warmup 1 --steps $steps --rounds 1 ${peer[*]}"
  "$bench" "$1" --config "$2" --threads 2 --warmup 1 --steps $steps --rounds 1 "${peer[@]}" | /usr/bin/python3 -I -c '
import json, math, sys
model, with_peer = sys.argv[1], sys.argv[2] == "1"
lines = [json.loads(l) for l in sys.stdin]
for l in lines: print(json.dumps(l))
runs = {l["impl"]: l for l in lines if l.get("bench") == "train" and "impl" in l}
rate = "images_per_s" if model == "vit" else "tokens_per_s"
for impl in ["ctgrad"] + (["libtorch"] if with_peer else []):
    r = runs[impl]
    for k in (rate, "step_ms_median", "model_gflops", "mfu", "peak_rss_mb", "loss_first", "loss_last"):
        assert math.isfinite(r[k]) and r[k] > 0, (impl, k, r[k])
    assert r["step_ms_min"] <= r["step_ms_median"] <= r["step_ms_max"], r
assert runs["ctgrad"]["allocs_per_step"] == 0, "ctgrad allocated in a steady step: %s" % runs["ctgrad"]["allocs_per_step"]
assert math.isfinite(runs["ctgrad"]["onednn_allocs_per_step"]) and runs["ctgrad"]["onednn_allocs_per_step"] >= 0, runs["ctgrad"]
if with_peer:
    ratio = [l for l in lines if "ratio" in l][0]
    assert math.isfinite(ratio["ratio"]) and ratio["ratio"] > 0, ratio
    assert "openblas-openmp" in runs["libtorch"]["blas"], runs["libtorch"]["blas"]
' "$1" "$([ ${#peer[@]} -gt 0 ] && echo 1 || echo 0)"
done
# Mixed precision: fp32 and bf16 rounds of the same model, or (a CPU without AVX512-BF16) a refusal naming it.
echo "+ $bench gpt --config small --threads 2 --warmup 1 --steps 2 --rounds 1 --precision both"
err=$(mktemp)
trap 'rm -f "$err"' EXIT
if out=$("$bench" gpt --config small --threads 2 --warmup 1 --steps 2 --rounds 1 --precision both 2>"$err"); then  # JSON on stdout only
  echo "$out" | /usr/bin/python3 -I -c '
import json, math, sys
lines = [json.loads(l) for l in sys.stdin]
for l in lines: print(json.dumps(l))
rows = {l["precision"]: l for l in lines if l.get("impl") == "ctgrad"}
assert set(rows) == {"fp32", "bf16"}, rows
for r in rows.values(): assert math.isfinite(r["loss_last"]) and r["tokens_per_s"] > 0, r
speed = [l for l in lines if "bf16_speedup_over_fp32" in l][0]["bf16_speedup_over_fp32"]
assert math.isfinite(speed) and speed > 0, speed
'
else
  cat "$err"
  grep -q "needs a CPU with AVX512-BF16\|needs oneDNN" "$err"
fi
echo "train bench smoke: ok"
