#!/usr/bin/env bash
# The figures of docs/distributed.md, on this machine: allreduce over shared memory and over TCP
# loopback, then the GPT's default recipe (600 steps) as 1 rank x 2 threads and as 2 ranks x 1
# thread (shared memory, TCP, without overlap), and one node's step time of GPT medium and the
# base Transformer for the scaling model. usage: bash bench/data_parallel.sh BUILD_DIR (ONLY=gpt: the GPT runs)
set -euo pipefail
build=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpirun=(mpirun --oversubscribe -np 2)
[ "$(id -u)" -eq 0 ] && mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2)
lscpu | grep -E "Model name|^CPU\(s\)|CPU family|Model:" | sed 's/  */ /g'
if [ "${ONLY:-}" != gpt ]; then
echo "== allreduce, shared memory"
"${mpirun[@]}" "$build/bench/ctgrad-bench-allreduce"
echo "== allreduce, TCP loopback"
"${mpirun[@]}" --mca btl self,tcp "$build/bench/ctgrad-bench-allreduce"
fi
gpt=(train gpt --set steps=600 --set eval_every=600 --set sample_tokens=0)
summary() {  # the run's last progress line and its communication line
  tr '\r' '\n' < "$1" | grep -E "step 600/600" | tail -1 | sed 's/.*loss/loss/'
  grep -E "^communication" "$1" || true
  grep -E "^done" "$1" | sed 's/; checkpoint.*//'
}
echo "== GPT small, 1 rank x 2 threads"
"$build/apps/ctgrad" "${gpt[@]}" --run "$work/one" --threads 2 > "$work/one.log" 2>&1
summary "$work/one.log"
echo "== GPT small, 2 ranks x 1 thread, shared memory"
"${mpirun[@]}" "$build/apps/ctgrad" "${gpt[@]}" --run "$work/shm" --threads 1 > "$work/shm.log" 2>&1
summary "$work/shm.log"
echo "== GPT small, 2 ranks x 1 thread, TCP loopback"
"${mpirun[@]}" --mca btl self,tcp "$build/apps/ctgrad" "${gpt[@]}" --run "$work/tcp" --threads 1 > "$work/tcp.log" 2>&1
summary "$work/tcp.log"
echo "== GPT small, 2 ranks x 1 thread, TCP loopback, 0.5 MB buckets"
CTGRAD_BUCKET_MB=0.5 "${mpirun[@]}" --mca btl self,tcp "$build/apps/ctgrad" "${gpt[@]}" --run "$work/tcpb" --threads 1 > "$work/tcpb.log" 2>&1
summary "$work/tcpb.log"
echo "== GPT small, 2 ranks x 1 thread, TCP loopback, 0.5 MB buckets, no overlap"
CTGRAD_OVERLAP=0 CTGRAD_BUCKET_MB=0.5 "${mpirun[@]}" --mca btl self,tcp "$build/apps/ctgrad" "${gpt[@]}" --run "$work/tcpn" --threads 1 > "$work/tcpn.log" 2>&1
summary "$work/tcpn.log"
[ "${ONLY:-}" = gpt ] && exit 0
echo "== one node's step: GPT medium, base Transformer (2 threads)"
"$build/bench/ctgrad-bench" gpt --config medium --threads 2 --steps 5 --rounds 1
"$build/bench/ctgrad-bench" transformer --config medium --threads 2 --steps 5 --rounds 1
