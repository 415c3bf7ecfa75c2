#!/usr/bin/env python3
"""Scaling efficiency of data-parallel training on N nodes: the cost model of docs/distributed.md.

Per step, each node computes its shard (t_step, measured on one node by ctgrad-bench) and the
gradients (bytes = 4 x parameters) are summed by ring allreduce:
    t_ring = 2 (N - 1) alpha + 2 (N - 1) / N x bytes / bandwidth
The buckets are sent while the backward pass (about 2/3 of t_step) runs, except the last one,
which can only start when the backward pass ends:
    exposed = max(t_ring - backward, 0) + t_ring x bucket / bytes        (the last bucket's share)
    efficiency = t_step / (t_step + exposed)
usage: python3 bench/distributed_model.py --models '{"GPT medium": [PARAMETERS, STEP_SECONDS], ...}' [--check JSON]
The step times are measured by ctgrad-bench on one node; the network constants below are assumptions
(docs/distributed.md gives the reasons), the 2-rank check uses this machine's allreduce benchmark.
"""
import argparse
import json

MB = 1 << 20

LINKS_GBIT = [10, 25, 100]
NODES = [2, 4, 8, 16, 32, 64]
ALPHA_NET = 25e-6        # seconds per message over Ethernet + TCP (a typical figure; TCP loopback here is lower)
LINK_EFFICIENCY = 0.9    # of the line rate a ring allreduce reaches over TCP
BACKWARD_SHARE = 2 / 3   # of a step's compute, the backward pass (2 of its 3 matmuls per linear)
BUCKET = 25 * MB


def ring_seconds(nodes, nbytes, alpha, bandwidth):
    return 2 * (nodes - 1) * alpha + 2 * (nodes - 1) / nodes * nbytes / bandwidth


def efficiency(t_step, nbytes, nodes, alpha, bandwidth, bucket=BUCKET):
    t = ring_seconds(nodes, nbytes, alpha, bandwidth)
    exposed = max(t - BACKWARD_SHARE * t_step, 0) + t * min(bucket, nbytes) / nbytes
    return t_step / (t_step + exposed), t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True, help="JSON: {name: [parameters, seconds per step]}")
    ap.add_argument("--speedup", type=float, default=1.0, help="a node computes this many times faster than the one measured")
    ap.add_argument("--check", help="JSON: {parameters, buckets, alpha_us, beta_GBps, measured_ms}: a 2-rank run here")
    a = ap.parse_args()
    models = json.loads(a.models)
    print("| model | gradient MB | step (1 node) | link | " + " | ".join(f"{n} nodes" for n in NODES) + " |")
    print("|---|---|---|---|" + "---|" * len(NODES))
    for name, (params, t_step) in models.items():
        nbytes, t_step = 4 * params, t_step / a.speedup
        for gbit in LINKS_GBIT:
            bw = gbit * 1e9 / 8 * LINK_EFFICIENCY
            cells = []
            for n in NODES:
                e, t = efficiency(t_step, nbytes, n, ALPHA_NET, bw)
                cells.append(f"{100 * e:.0f}% ({1e3 * t:.0f} ms)")
            print(f"| {name} | {nbytes / MB:.0f} | {1e3 * t_step:.0f} ms | {gbit} Gb/s | " + " | ".join(cells) + " |")
    if a.check:
        c = json.loads(a.check)
        nbytes = 4 * c["parameters"]
        t = c["buckets"] * c["alpha_us"] * 1e-6 + nbytes / (c["beta_GBps"] * 1e9)  # the fit of the allreduce benchmark, per bucket
        print(f"\ncheck, 2 ranks here: predicted {1e3 * t:.2f} ms of allreduce per step for {nbytes / MB:.2f} MB, measured {c['measured_ms']:.2f} ms")


if __name__ == "__main__":
    main()
