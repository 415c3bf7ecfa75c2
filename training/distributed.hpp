// Data parallelism: N processes (ranks) train one model; each feeds its shard of every global
// batch, the gradients are summed over the ranks, and every rank takes the same optimizer step, so
// the run does not depend on N. The Trainer does the reduction when LoopOptions::comm has more than
// one rank; a model's feed reads its Shard. The collectives come from a Communicator: MPI's
// (training/mpi.hpp, the `ctgrad` command under mpirun) or one process (Solo).
//
// Contract of a Communicator: every rank calls the same collectives in the same order with the
// same lengths; the sums are the same bits on every rank. A collective that waits longer than the
// communicator's timeout ends every rank with a message naming it (a dead or hung rank).
#pragma once
#include <cstdint>
#include <functional>
#include <condition_variable>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <ctgrad/graph/executor.hpp>

namespace ctgrad::training {

// Which part of each global batch this process feeds: rows begin(B) .. end(B) of B.
struct Shard {
  int index = 0, count = 1;
  std::int64_t begin(std::int64_t rows) const { return rows * index / count; }
  std::int64_t end(std::int64_t rows) const { return rows * (index + 1) / count; }
  std::int64_t rows(std::int64_t global) const { return end(global) - begin(global); }
  bool leader() const { return index == 0; }  // rank 0 writes the outputs
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  Shard shard() const { return {rank(), size()}; }
  bool leader() const { return rank() == 0; }
  // Sums over the ranks, in place. `what` names the collective in a timeout message.
  virtual void allreduce_sum(std::span<float> data, const char* what) = 0;
  virtual void allreduce_sum(std::span<double> data, const char* what) = 0;
  // Rank `root`'s bytes to every rank.
  virtual void broadcast(std::string& bytes, int root, const char* what) = 0;
  // Ends every rank: prints `message` (with this rank) and exits with `code`.
  [[noreturn]] virtual void abort(const std::string& message, int code) = 0;
  // Seconds spent inside collectives so far, and the bytes they summed.
  double seconds() const { return seconds_; }
  double bytes() const { return bytes_; }
  // Gradients are summed in buckets of this many bytes (PyTorch DDP's 25 MB by default), each
  // as soon as the backward pass has finished it, on a communication thread (overlap), or all
  // after the backward pass.
  std::size_t bucket_bytes = std::size_t(25) << 20;
  bool overlap = true;

 protected:
  double seconds_ = 0, bytes_ = 0;
};

// One process: the collectives are identities.
class Solo final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce_sum(std::span<float>, const char*) override {}
  void allreduce_sum(std::span<double>, const char*) override {}
  void broadcast(std::string&, int, const char*) override {}
  [[noreturn]] void abort(const std::string& message, int code) override;
};

// Sums a model's gradients over the ranks, each rank's multiplied by its weight first. Buckets are
// contiguous runs of the gradient array of about comm.bucket_bytes, taken from its end (the
// parameters the backward pass finishes first); with comm.overlap a bucket is sent from a
// communication thread as soon as the plan says its last gradient is final, while the backward
// pass goes on. Every rank sends the same buckets in the same order (the plan's).
class GradientReducer {
 public:
  GradientReducer(Executor<float>& model, Communicator& comm);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;
  void begin(float weight);  // before backward()
  void finish();             // after backward(): every bucket summed
  int buckets() const { return int(buckets_.size()); }
  // Seconds spent summing buckets (on any thread), and of them the seconds the caller waited in
  // finish(): the rest was hidden behind the backward pass.
  double sent() const { return sent_; }
  double waited() const { return waited_; }

 private:
  struct Bucket {
    std::size_t begin, end;
    int ready;  // the backward step after which all its gradients are final
  };
  void send(const Bucket& b);
  void enqueue_until(int step);
  void work();
  Executor<float>& model_;
  Communicator& comm_;
  std::vector<Bucket> buckets_;  // by ready step
  float weight_ = 1;
  std::size_t queued_ = 0, done_ = 0;
  double waited_ = 0, sent_ = 0;
  bool stop_ = false;
  std::mutex mutex_;
  std::condition_variable more_, finished_;
  std::thread thread_;
};

// Every rank's `value` of `what` must be rank 0's: otherwise a config_error on every rank naming
// the ranks that differ (a build, a config or a data file that is not the same everywhere);
// `explain(rank 0's value, this rank's)` says how, on a rank that differs.
void require_same(Communicator& comm, const std::string& what, const std::string& value,
                  const std::function<std::string(const std::string&, const std::string&)>& explain = {});

// True on every rank when any rank was interrupted (Ctrl-C, SIGTERM): all stop at the same step.
bool any_interrupted(Communicator& comm);

}  // namespace ctgrad::training
