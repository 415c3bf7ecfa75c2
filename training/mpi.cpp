#include <ctgrad/training/mpi.hpp>

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace ctgrad::training {
namespace {

using Clock = std::chrono::steady_clock;

class Mpi final : public Communicator {
 public:
  explicit Mpi(double timeout) : timeout_(timeout) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    watchdog_ = std::thread([this] { watch(); });
  }
  ~Mpi() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    watchdog_.join();
    MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce_sum(std::span<float> d, const char* what) override { sum(d.data(), d.size(), MPI_FLOAT, sizeof(float), what); }
  void allreduce_sum(std::span<double> d, const char* what) override { sum(d.data(), d.size(), MPI_DOUBLE, sizeof(double), what); }

  void broadcast(std::string& bytes, int root, const char* what) override {
    Busy b(*this, what);
    unsigned long long n = bytes.size();
    MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, MPI_COMM_WORLD);
    bytes.resize(std::size_t(n));
    for (std::size_t at = 0; at < n; at += INT_MAX)
      MPI_Bcast(bytes.data() + at, int(std::min<std::size_t>(n - at, INT_MAX)), MPI_CHAR, root, MPI_COMM_WORLD);
  }

  [[noreturn]] void abort(const std::string& message, int code) override {
    std::fprintf(stderr, "ctgrad (rank %d of %d): %s\n", rank_, size_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  // Marks a collective in progress for the watchdog, and counts its time.
  struct Busy {
    Mpi& m;
    Clock::time_point t0 = Clock::now();
    Busy(Mpi& mpi, const char* what) : m(mpi) {
      std::lock_guard lock(m.mutex_);
      m.what_ = what, m.since_ = t0, m.busy_ = true;
    }
    ~Busy() {
      std::lock_guard lock(m.mutex_);
      m.busy_ = false;
      m.seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
    }
  };

  void sum(void* data, std::size_t n, MPI_Datatype type, std::size_t size, const char* what) {
    Busy b(*this, what);
    for (std::size_t at = 0; at < n; at += INT_MAX)
      MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + at * size, int(std::min<std::size_t>(n - at, INT_MAX)), type, MPI_SUM,
                    MPI_COMM_WORLD);
    bytes_ += double(n * size);
  }

  // A collective that does not return within the timeout: another rank died or hangs. This rank
  // says so and exits; the launcher (mpirun) then stops the others.
  void watch() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::milliseconds(500));
      if (busy_ && std::chrono::duration<double>(Clock::now() - since_).count() > timeout_) {
        std::fprintf(stderr,
                     "\nctgrad (rank %d of %d): no answer from the other ranks for %.0f s in %s: a rank died or hangs; stopping "
                     "(CTGRAD_MPI_TIMEOUT=seconds sets the limit)\n",
                     rank_, size_, timeout_, what_);
        std::fflush(stderr);
        std::_Exit(124);
      }
    }
  }

  double timeout_;
  int rank_ = 0, size_ = 1;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool busy_ = false, stop_ = false;
  const char* what_ = "";
  Clock::time_point since_;
  std::thread watchdog_;
};

}  // namespace

std::unique_ptr<Communicator> mpi_world(double timeout_seconds) { return std::make_unique<Mpi>(timeout_seconds); }

}  // namespace ctgrad::training
