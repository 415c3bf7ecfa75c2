#!/usr/bin/env bash
# Measures compiler time and peak memory of the compile-time benchmark translation units, with the
# flags CMake uses for them, one JSON object per line. Run after a build:
#   bash bench/compile/measure.sh [build-dir]
set -euo pipefail
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
