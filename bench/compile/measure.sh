#!/usr/bin/env bash
# Measures compiler time and peak memory of the compile-time benchmark translation units, with the
# flags CMake uses for them, one JSON object per line. Run after a build:
#   bash bench/compile/measure.sh [build-dir]
# With --targets, builds the tree from nothing in a new folder, timing each translation unit
# (time_tu.sh) and each target of the README's commands, and prints one row per target (the main
# job's ctgrad-cli, the full build, then with --tests also ctest -j2) and the ten heaviest units:
#   bash bench/compile/measure.sh --targets [--tests] [work-dir]
set -euo pipefail
if [ "${1:-}" = "--targets" ]; then
  shift
  tests=0
  [ "${1:-}" = "--tests" ] && { tests=1; shift; }
  src=$(cd "$(dirname "$0")/../.." && pwd)
  work=${1:-$(mktemp -d)}
  rm -rf "$work/build" && mkdir -p "$work"
  log=$work/tu.log
  : > "$log"
  cpu=$(sed -n 's/^Model name:[[:space:]]*//p' <(lscpu) | head -1)
  row() {  # target, seconds
    printf '{"bench":"build","target":"%s","wall_s":%s,"cores":%s,"cpu":"%s"}\n' "$1" "$2" "$(nproc)" "$cpu"
  }
  t0=$(date +%s.%N)
  cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER="$src/bench/compile/time_tu.sh" > "$work/configure.log"
  t1=$(date +%s.%N)
  row configure "$(awk "BEGIN {printf \"%.1f\", $t1 - $t0}")"
  CTGRAD_TU_LOG=$log cmake --build "$work/build" -j"$(nproc)" --target ctgrad-cli > "$work/build-cli.log"
  t2=$(date +%s.%N)
  row ctgrad-cli "$(awk "BEGIN {printf \"%.1f\", $t2 - $t1}")"
  cp "$log" "$work/tu-cli.log"
  CTGRAD_TU_LOG=$log cmake --build "$work/build" -j"$(nproc)" > "$work/build-all.log"
  t3=$(date +%s.%N)
  row "the rest of the full build" "$(awk "BEGIN {printf \"%.1f\", $t3 - $t2}")"
  row "full build" "$(awk "BEGIN {printf \"%.1f\", $t3 - $t1}")"
  if [ "$tests" -eq 1 ]; then
    ctest --test-dir "$work/build" -j"$(nproc)" > "$work/ctest.log" || true
    t4=$(date +%s.%N)
    row "ctest -j$(nproc) ($(grep -o '[0-9]*% tests passed.*' "$work/ctest.log"))" "$(awk "BEGIN {printf \"%.1f\", $t4 - $t3}")"
  fi
  echo "the main job's units: $(wc -l < "$work/tu-cli.log"), $(awk '{s+=$1} END {printf "%.0f", s}' "$work/tu-cli.log") s of compiler time; all: $(wc -l < "$log"), $(awk '{s+=$1} END {printf "%.0f", s}' "$log") s"
  echo "the ten heaviest units (wall s, peak MB):"
  sort -rn "$log" | head -10 | sed "s|$src/||; s|$work/build/||"
  exit 0
fi
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
flags=$(sed -n 's/^CXX_FLAGS = //p' "$build/bench/CMakeFiles/compile_encoder1.dir/flags.make")
defs=$(sed -n 's/^CXX_DEFINES = //p' "$build/bench/CMakeFiles/compile_encoder1.dir/flags.make")
incs=$(sed -n 's/^CXX_INCLUDES = //p' "$build/bench/CMakeFiles/compile_encoder1.dir/flags.make")
out=$(mktemp -d)
for tu in baseline encoder1 encoder12 encdec6; do
  /usr/bin/time -f "%e %U %M" -o "$out/$tu.time" \
    $cxx $defs $incs $flags -c "$here/$tu.cpp" -o "$out/$tu.o"
  read -r wall user kb < "$out/$tu.time"
  printf '{"bench":"compile","tu":"%s","wall_s":%s,"user_s":%s,"peak_mb":%d}\n' "$tu" "$wall" "$user" $((kb / 1024))
done
# The model translation units of the product, each with its own target's flags: the `ctgrad`
# command's GPT (3 sizes, training + decoding graphs), Transformer (3 presets x 4 graphs) and ViT (6 presets) files,
# and the training benchmark (GPT small/medium, ViT, Transformer small/medium).
for spec in "apps/CMakeFiles/ctgrad-cli.dir:apps/tasks/gpt.cpp" "apps/CMakeFiles/ctgrad-cli.dir:apps/tasks/transformer.cpp" \
            "apps/CMakeFiles/ctgrad-cli.dir:apps/tasks/vit.cpp" \
            "bench/CMakeFiles/ctgrad-bench.dir:bench/train_bench.cpp"; do
  dir=${spec%%:*} src=${spec#*:}
  flags=$(sed -n 's/^CXX_FLAGS = //p' "$build/$dir/flags.make")
  defs=$(sed -n 's/^CXX_DEFINES = //p' "$build/$dir/flags.make")
  incs=$(sed -n 's/^CXX_INCLUDES = //p' "$build/$dir/flags.make")
  name=$(basename "$src" .cpp)
  /usr/bin/time -f "%e %U %M" -o "$out/$name.time" $cxx $defs $incs $flags -c "$here/../../$src" -o "$out/$name.o"
  read -r wall user kb < "$out/$name.time"
  printf '{"bench":"compile","tu":"%s","wall_s":%s,"user_s":%s,"peak_mb":%d}\n' "$src" "$wall" "$user" $((kb / 1024))
done
rm -rf "$out"
