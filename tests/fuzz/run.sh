#!/usr/bin/env bash
# Builds the fuzz targets with clang (tests/fuzz/CMakeLists.txt) into WORK and runs each for
# SECONDS on a copy of its seed corpus (tests/fuzz/corpus/<target>/): CI runs it bounded; for
# longer runs, scripts/fuzz.sh. A crash leaves its input in WORK/<target>/crash-* and fails.
#   run.sh WORK SECONDS
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$1 seconds=${2:-20}
cmake -S "$here" -B "$work/build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release > "$work.configure.log" 2>&1 ||
  { cat "$work.configure.log"; exit 1; }
cmake --build "$work/build" -j2 > "$work.build.log" 2>&1 || { cat "$work.build.log"; exit 1; }
for target in safetensors config idx text shard hf_config hf_tokenizer; do
  rm -rf "$work/$target" && mkdir -p "$work/$target/corpus"
  cp "$here/corpus/$target/"* "$work/$target/corpus/"
  echo "+ fuzz_$target for $seconds s"
  (cd "$work/$target" && "$work/build/fuzz_$target" corpus -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 \
     -print_final_stats=1 2>&1 | grep -E "^(#|stat::number_of_executed_units|stat::peak_rss|==|SUMMARY|ERROR)" | tail -4)
  if ls "$work/$target"/crash-* "$work/$target"/leak-* "$work/$target"/timeout-* "$work/$target"/oom-* > /dev/null 2>&1; then
    echo "fuzz_$target found a failing input: $(ls "$work/$target"/crash-* "$work/$target"/leak-* "$work/$target"/timeout-* "$work/$target"/oom-* 2>/dev/null)"
    exit 1
  fi
done
echo "fuzz: no crash, leak, timeout or out-of-memory in $seconds s per target"
