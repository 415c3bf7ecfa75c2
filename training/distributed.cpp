#include <ctgrad/training/config.hpp>
#include <ctgrad/training/distributed.hpp>
#include <ctgrad/training/trainer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <cstdlib>
#include <vector>

namespace ctgrad::training {

void Solo::abort(const std::string& message, int code) {
  std::fprintf(stderr, "ctgrad: %s\n", message.c_str());
  std::exit(code);
}

void require_same(Communicator& comm, const std::string& what, const std::string& value,
                  const std::function<std::string(const std::string&, const std::string&)>& explain) {
  if (comm.size() == 1) return;
  std::string root = value;
  comm.broadcast(root, 0, what.c_str());
  // Each rank marks itself when it differs: every rank learns which ones do.
  std::vector<double> differs(std::size_t(comm.size()), 0.0);
  differs[std::size_t(comm.rank())] = root == value ? 0.0 : 1.0;
  comm.allreduce_sum(differs, what.c_str());
  std::string ranks;
  for (std::size_t r = 0; r < differs.size(); ++r)
    if (differs[r] != 0) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  if (ranks.empty()) return;
  const bool one = ranks.find(',') == std::string::npos;
  std::string how;
  if (root != value && explain) how = " (rank 0 has " + explain(root, value) + ")";
  throw config_error("the ranks of this job differ in " + what + ": rank" + (one ? " " : "s ") + ranks + (one ? " differs" : " differ") +
                     " from rank 0" + how + "; every rank must run the same build with the same config and data");
}

GradientReducer::GradientReducer(Executor<float>& model, Communicator& comm) : model_(model), comm_(comm) {
  const auto params = model.parameters();
  const std::vector<int> ready = model.gradient_ready_steps();
  const float* base = model.parameter_grads().data();
  const std::size_t limit = std::max<std::size_t>(comm.bucket_bytes / sizeof(float), 1);
  // From the last parameter back: a bucket closes when adding the next one would pass the limit.
  Bucket b{0, 0, -1};
  bool open = false;
  for (std::size_t i = params.size(); i-- > 0;) {
    const std::size_t lo = std::size_t(params[i].grad.data - base), hi = lo + std::size_t(params[i].grad.numel);
    if (open && b.end - lo > limit) buckets_.push_back(b), open = false;
    if (!open) b = {lo, hi, -1}, open = true;
    b.begin = std::min(b.begin, lo), b.end = std::max(b.end, hi), b.ready = std::max(b.ready, ready[i]);
  }
  if (open) buckets_.push_back(b);
  std::stable_sort(buckets_.begin(), buckets_.end(), [](const Bucket& x, const Bucket& y) { return x.ready < y.ready; });
  if (comm.size() > 1 && comm.overlap) {
    thread_ = std::thread([this] { work(); });
    model.set_backward_hook([this](int step) { enqueue_until(step); });
  }
}

GradientReducer::~GradientReducer() {
  if (!thread_.joinable()) return;
  model_.set_backward_hook({});
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  more_.notify_all();
  thread_.join();
}

void GradientReducer::begin(float weight) {
  std::lock_guard lock(mutex_);
  weight_ = weight, queued_ = 0, done_ = 0;
}

void GradientReducer::send(const Bucket& b) {
  const auto t0 = std::chrono::steady_clock::now();
  float* g = model_.parameter_grads().data();
  if (weight_ != 1.0f)
    for (std::size_t i = b.begin; i < b.end; ++i) g[i] = weight_ == 0 ? 0.0f : g[i] * weight_;  // no terms: no part (not 0 x NaN)
  comm_.allreduce_sum(std::span<float>(g + b.begin, b.end - b.begin), "the gradients");
  sent_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();  // one sender at a time
}

void GradientReducer::enqueue_until(int step) {
  std::size_t n = queued_;
  while (n < buckets_.size() && buckets_[n].ready <= step) ++n;
  if (n == queued_) return;
  {
    std::lock_guard lock(mutex_);
    queued_ = n;
  }
  more_.notify_one();
}

void GradientReducer::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    more_.wait(lock, [&] { return stop_ || done_ < queued_; });
    if (stop_) return;
    const Bucket b = buckets_[done_];
    lock.unlock();
    send(b);
    lock.lock();
    if (++done_ == buckets_.size()) finished_.notify_all();
  }
}

void GradientReducer::finish() {
  if (comm_.size() == 1) return;
  const auto t0 = std::chrono::steady_clock::now();
  if (!thread_.joinable()) {
    for (const Bucket& b : buckets_) send(b);
  } else {
    enqueue_until(std::numeric_limits<int>::max());
    std::unique_lock lock(mutex_);
    finished_.wait(lock, [&] { return done_ == buckets_.size(); });
  }
  waited_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool any_interrupted(Communicator& comm) {
  if (comm.size() == 1) return interrupted();
  double any[1] = {interrupted() ? 1.0 : 0.0};
  comm.allreduce_sum(any, "the interrupt flag");
  if (any[0] > 0) set_interrupted();
  return any[0] > 0;
}

}  // namespace ctgrad::training
