#!/usr/bin/env bash
# Installs ctgrad's dependencies from Debian packages, in two tiers:
#   bash scripts/setup.sh           what the library and the main job need (README command 1)
#   bash scripts/setup.sh --tests   that, and what the whole build and the tests need (command 2, CI)
# Idempotent: when everything is present it installs nothing and says so. Prints what it installs
# and how long it took.
set -euo pipefail

tests=0
case "${1:-}" in
  "") ;;
  --tests) tests=1 ;;
  *) echo "usage: bash scripts/setup.sh [--tests]" >&2; exit 2 ;;
esac

# The library, the `ctgrad` command and the main job (GPT on the KJV Bible).
packages=(
  g++ cmake make pkg-config
  xtensor-dev libxsimd-dev catch2 libtbb-dev   # the chosen libraries
  libopenblas0-pthread                       # matmul backend (one thread per call, driven by oneTBB)
  libdnnl-dev                                # bf16 matmuls (--set precision=bf16), loaded at run time
  libsentencepiece-dev libicu-dev            # tokenizers (SentencePiece; Unicode for Hugging Face tokenizer.json)
  nlohmann-json3-dev zlib1g-dev libzstd-dev libxxhash-dev   # configs and checkpoints, compressed data, the data cache's keys
  libpng-dev libjpeg-dev libcsv-dev          # image folders (PNG, JPEG: libjpeg-turbo), labelled text in CSV
  gnuplot-nox                                # the loss plot of `ctgrad train`
  bible-kjv                                  # the main job's data (see ../shared/DATA.md)
)
# Everything else the full build and its tests use.
test_packages=(
  time                                       # /usr/bin/time in the benchmarks and tests
  sentencepiece                              # spm_* tools, the tokenizers' reference
  python3-torch                              # the PyTorch oracle of the tests (Debian python3)
  python3-nltk                               # the BLEU oracle of the tests
  dataset-fashion-mnist trans-de-en          # data sets (see ../shared/DATA.md)
  r-cran-janeaustenr                         # the Jane Austen corpus (pulls in R, ~41 MB)
  qemu-user                                  # runs the tests on an emulated CPU without AVX
  clang libclang-rt-14-dev                   # libFuzzer (and its sanitizers) for the fuzz targets
  libopenblas0-openmp                        # a reference point for ctgrad-bench gemm
  libtorch-dev                               # the libtorch peer of ctgrad-bench gpt|vit|transformer
  libopenmpi-dev openmpi-bin                 # data-parallel training (mpirun -np N ctgrad train ...)
  slurmctld slurmd slurm-client munge        # a whole Slurm on this machine for the tests of ablate --launcher slurm
)
[ "$tests" -eq 1 ] && packages+=("${test_packages[@]}")
tier=$([ "$tests" -eq 1 ] && echo "the build and the tests" || echo "the main job")

t0=$(date +%s)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages of $tier present, nothing to install"
else
  echo "setup: installing ${#missing[@]} packages for $tier: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: installed in $(( $(date +%s) - t0 )) s"
fi
# The Wesnoth EN-DE dialogue (not installed as packages: their German catalogues are extracted).
if [ "$tests" -eq 1 ]; then
  t1=$(date +%s)
  bash "$(dirname "$0")/setup_wesnoth.sh"
  echo "setup: the Wesnoth catalogues in $(( $(date +%s) - t1 )) s"
fi
# The oracle of the Hugging Face tokenizer tests: Hugging Face's own tokenizer.json implementation
# in JavaScript (npm @huggingface/tokenizers, pure JS, no dependencies) under Node, into the cache
# folder tests/CMakeLists.txt reads (CTGRAD_NODE_MODULES). Node from Debian when none is installed.
if [ "$tests" -eq 1 ]; then
  t2=$(date +%s)
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm > /dev/null
  fi
  node_dir="$HOME/.cache/ctgrad/node"
  if [ ! -f "$node_dir/node_modules/@huggingface/tokenizers/package.json" ] ||
     ! grep -q '"version": "0.2.0"' "$node_dir/node_modules/@huggingface/tokenizers/package.json"; then
    mkdir -p "$node_dir"
    npm install --prefix "$node_dir" --no-save --no-audit --no-fund --silent @huggingface/tokenizers@0.2.0
  fi
  echo "setup: Node $(node --version) and @huggingface/tokenizers 0.2.0 in $(( $(date +%s) - t2 )) s"
fi
