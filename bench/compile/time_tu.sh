#!/usr/bin/env bash
# A compiler launcher that logs each translation unit's wall time and peak memory:
#   cmake -S . -B build-timed -DCMAKE_CXX_COMPILER_LAUNCHER="$PWD/bench/compile/time_tu.sh" ...
#   CTGRAD_TU_LOG=tu.log cmake --build build-timed -j2; sort -rn tu.log | head
# Each line: wall seconds, peak MB, the source file (the argument after -c).
log=${CTGRAD_TU_LOG:-/tmp/ctgrad-tu.log}
src=""
prev=""
for a in "$@"; do
  [ "$prev" = "-c" ] && src=$a
  prev=$a
done
t=$(mktemp)
/usr/bin/time -f "%e %M" -o "$t" "$@"
rc=$?
read -r wall kb < "$t"
rm -f "$t"
[ -n "$src" ] && printf '%s %d %s\n' "$wall" $((kb / 1024)) "$src" >> "$log"
exit $rc
