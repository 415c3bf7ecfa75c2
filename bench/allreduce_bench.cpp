// Allreduce over the ranks of an MPI job, the collective data parallelism uses for gradients:
// time per call for 4 KB .. 64 MB of floats, the algorithm and bus bandwidth (nccl-tests'
// busbw = 2 (N - 1) / N x bytes / time: what a ring moves per link), and a fit of the
// alpha-beta model t = alpha + beta x bytes that docs/distributed.md extrapolates with.
//   mpirun -np 2 build/bench/ctgrad-bench-allreduce                      # shared memory
//   mpirun -np 2 --mca btl self,tcp build/bench/ctgrad-bench-allreduce   # TCP loopback
#include <ctgrad/training/mpi.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

int main() {
  using namespace ctgrad::training;
  auto comm = mpi_world(120);
  const int n = comm->size();
  std::vector<double> xs, ts;
  for (std::size_t bytes = 4096; bytes <= (std::size_t(64) << 20); bytes *= 4) {
    std::vector<float> v(bytes / sizeof(float), 1.0f);
    const int reps = bytes <= (1 << 20) ? 200 : 20;
    comm->allreduce_sum(v, "warm-up");
    double t[1] = {0};
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) comm->allreduce_sum(v, "the benchmark");
    t[0] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    std::vector<double> slowest{t[0]};
    comm->allreduce_sum(slowest, "the timing");  // the mean over ranks
    const double secs = slowest[0] / n;
    xs.push_back(double(bytes)), ts.push_back(secs);
    if (comm->leader())
      std::printf("{\"ranks\":%d,\"bytes\":%zu,\"us\":%.2f,\"algbw_GBps\":%.3f,\"busbw_GBps\":%.3f}\n", n, bytes, secs * 1e6,
                  double(bytes) / secs / 1e9, 2.0 * (n - 1) / n * double(bytes) / secs / 1e9);
  }
  // t = alpha + beta bytes: beta from the two largest sizes (bandwidth-bound), alpha what is left
  // of the smallest size's time (latency-bound).
  const std::size_t k = xs.size() - 1;
  const double beta = (ts[k] - ts[k - 1]) / (xs[k] - xs[k - 1]), alpha = std::max(ts[0] - beta * xs[0], 0.0);
  if (comm->leader()) std::printf("{\"ranks\":%d,\"alpha_us\":%.2f,\"beta_GBps\":%.3f}\n", n, alpha * 1e6, 1 / beta / 1e9);
  return 0;
}
