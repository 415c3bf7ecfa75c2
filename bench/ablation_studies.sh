#!/usr/bin/env bash
# The studies of docs/ablations.md, each one `ctgrad ablate` command (2 runs at a time, a core
# each), then their reports and plots copied into docs/ablations/<study>/.
# usage: bash bench/ablation_studies.sh BUILD_DIR OUT_DIR [a|b|c|d|e|f ...]   (default: all)
set -euo pipefail
build=$(realpath "$1")
out=$2
shift 2
studies=("$@")
[ ${#studies[@]} -gt 0 ] || studies=(a b c d e f)
here=$(cd "$(dirname "$0")/.." && pwd)
ctgrad="$build/apps/ctgrad"
run() {  # name, then the ablate arguments
  local name=$1
  shift
  echo "== $name: ctgrad ablate $*"
  /usr/bin/time -f "$name: %e s wall" "$ctgrad" ablate "$@" --jobs 2 --run "$out/$name" --yes
  mkdir -p "$here/docs/ablations/$name"
  cp "$out/$name"/results.md "$out/$name"/results.csv "$out/$name"/curves.png "$out/$name"/final.png "$here/docs/ablations/$name/"
}
for s in "${studies[@]}"; do
  case $s in
    # (a) The stability question: pre-norm against post-norm, at the baby GPT's rate and ten times it.
    a) run gpt-norm-lr gpt --grid norm=pre,post --grid lr=1e-3,1e-2 --seeds 3 --set sample_tokens=0 --name "GPT: norm placement x learning rate" ;;
    # (b) Positions: learned (GPT-2), the paper's sinusoids, or none (causal attention alone).
    b) run gpt-pos gpt --grid pos=learned,sinusoidal,none --seeds 3 --set sample_tokens=0 --name "GPT: positional encoding" ;;
    # (c) The paper's Table 3 (A) and label smoothing, small: heads at d_model 256, smoothing 0.1 or 0;
    # validation NLL and greedy BLEU of 500 validation sentences.
    c) run transformer-heads-ls transformer --grid heads=4,1,8 --grid label_smoothing=0.1,0 --seeds 1 --set steps=1500 --set batch=32 \
         --set eval_every=500 --set val_bleu=500 --name "Transformer EN-DE: heads x label smoothing" ;;
    # (d) The Llama's changes to the GPT, each alone: rotary positions, RMSNorm, SwiGLU, grouped-query
    # attention over 2 and 1 key/value heads, an untied head, QK-norm, no biases.
    d) run gpt-llama-changes gpt --vary pos=learned,rope --vary norm_kind=layer,rms --vary act=gelu_tanh,swiglu --vary kv_heads=0,2,1 \
         --vary tie_embeddings=true,false --vary qk_norm=false,true --vary bias=true,false --seeds 3 --set sample_tokens=0 \
         --name "GPT: the Llama's changes, each alone" ;;
    # (e) All of them (the Llama small preset), and its MLPs as a mixture of 4 experts (top-2)
    # against dense MLPs of the mixture's active (2x) and total (4x) width; the mixture top-1 (a
    # study of its own: moe_top_k=1 needs moe_experts=4) paired with the dense preset seed by seed;
    # then the preset paired with study d's GPT baseline.
    e) run llama-moe llama --vary moe_experts=0,4 --vary ffn_mult=1,2,4 --seeds 3 --set sample_tokens=0 \
         --name "Llama small: a mixture of experts against dense MLPs"
       run llama-moe-top1 llama --set moe_experts=4 --grid moe_top_k=1 --seeds 3 --set sample_tokens=0 --name "Llama small: 4 experts, top-1"
       /usr/bin/python3 "$here/bench/paired_across_studies.py" "$out/llama-moe" "$out/llama-moe-top1" | tee "$here/docs/ablations/llama-moe/top1_vs_dense.md"
       if [ -d "$out/gpt-llama-changes" ]; then
         /usr/bin/python3 "$here/bench/paired_across_studies.py" "$out/gpt-llama-changes" "$out/llama-moe" | tee "$here/docs/ablations/llama-moe/llama_vs_gpt.md"
       fi ;;
    # (f) A recurrent token mixer: each block's attention replaced by a selective state-space layer
    # (models/layers/ssm.hpp) of about its parameters.
    f) run gpt-mixer gpt --vary mixer=attention,ssm --seeds 3 --set sample_tokens=0 --name "GPT: attention against a selective state-space mixer" ;;
    *) echo "unknown study $s (a, b, c, d, e or f)" >&2; exit 2 ;;
  esac
done
