#!/usr/bin/env bash
# Installs ctgrad's build and test dependencies from Debian packages.
# Idempotent: when everything is present it changes nothing and says so.
set -euo pipefail

packages=(
  g++ cmake make pkg-config time
  python3-torch                              # the PyTorch oracle of the tests (Debian python3)
  python3-nltk                               # the BLEU oracle of the tests
  libsentencepiece-dev sentencepiece         # tokenizers
  libxxhash-dev                              # hashes naming the data cache's entries
  bible-kjv dataset-fashion-mnist trans-de-en  # data sets (see ../shared/DATA.md)
  r-cran-janeaustenr                         # the Jane Austen corpus (pulls in R, ~41 MB)
  qemu-user                                  # runs the tests on an emulated CPU without AVX
  clang libclang-rt-14-dev                   # libFuzzer (and its sanitizers) for the fuzz targets
  gnuplot-nox                                # the loss plot of `ctgrad train`
  xtensor-dev libxsimd-dev libboost-dev catch2 libtbb-dev zlib1g-dev nlohmann-json3-dev
  libopenblas0-pthread                       # matmul backend (one thread per call, driven by oneTBB)
  libopenblas0-openmp libdnnl-dev            # reference points for ctgrad-bench gemm
  libtorch-dev                               # the libtorch peer of ctgrad-bench gpt|vit|transformer
  libopenmpi-dev openmpi-bin                 # data-parallel training (mpirun -np N ctgrad train ...)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# The Wesnoth EN-DE dialogue (not installed as packages: their German catalogues are extracted).
wesnoth() { bash "$(dirname "$0")/setup_wesnoth.sh"; }
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present, nothing to install"
  wesnoth
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
wesnoth
