#include <ctgrad/checkpoint/training.hpp>
#include <ctgrad/training/trainer.hpp>
#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/training/log.hpp>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

namespace ctgrad::training {

namespace {
std::atomic<bool> g_interrupted{false};
extern "C" void on_signal(int) { g_interrupted = true; }
}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;  // reads and writes in progress (data loading, saves) continue; loops check the flag
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR2, &sa, nullptr);  // what a study's Slurm task sends through srun, which would turn a SIGTERM into SIGKILL
}
bool interrupted() { return g_interrupted; }
void set_interrupted() { g_interrupted = true; }
void clear_interrupted() { g_interrupted = false; }

namespace {

// Multiplies every gradient by f, on the model's threads.
void scale(Executor<float>& model, float f) {
  const std::span<float> g = model.parameter_grads();
  model.execute([&] {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, g.size(), 1 << 16), [&](const tbb::blocked_range<std::size_t>& r) {
      for (std::size_t i = r.begin(); i < r.end(); ++i) g[i] *= f;
    });
  });
}

// The parameters' bytes, hashed (FNV-1a over 64-bit words): replicas that drifted apart differ.
std::string weights_hash(Executor<float>& model) {
  const std::span<float> w = model.parameter_values();
  std::uint64_t h = 0xcbf29ce484222325ull;
  const std::size_t words = w.size_bytes() / 8;
  const auto* p = reinterpret_cast<const unsigned char*>(w.data());
  for (std::size_t i = 0; i < words; ++i) {
    std::uint64_t x;
    std::memcpy(&x, p + 8 * i, 8);
    h = (h ^ x) * 0x100000001b3ull;
  }
  for (std::size_t i = words * 8; i < w.size_bytes(); ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return std::to_string(h);
}

}  // namespace

void Trainer::save(const Run& run) const {
  checkpoint::save_training<float>(folder_.checkpoint(), run.model, &run.optimizer, o_.metadata);
  if (o_.keep_checkpoints <= 0) return;
  // The last k saves, for checkpoint averaging: hard links to the file just written (no copy;
  // each save writes a new file, so a link never changes), the oldest removed.
  namespace fs = std::filesystem;
  const fs::path step = folder_.kept_checkpoint(run.optimizer.steps());
  std::error_code ec;
  fs::remove(step, ec);
  fs::create_hard_link(folder_.checkpoint(), step, ec);
  if (ec) fs::copy_file(folder_.checkpoint(), step, fs::copy_options::overwrite_existing);
  const auto kept = folder_.kept_checkpoints();
  for (std::size_t i = 0; i + std::size_t(o_.keep_checkpoints) < kept.size(); ++i) fs::remove(kept[i].second, ec);
}

checkpoint::Metadata Trainer::load(Run& run) const {
  return checkpoint::load_training<float>(folder_.checkpoint(), run.model, &run.optimizer);
}

Outcome Trainer::fit(Run& run) {
  install_interrupt_handlers();
  Outcome out;
  out.first = run.optimizer.steps() + 1;
  if (out.first > o_.steps) {
    out.last = run.optimizer.steps();
    return out;
  }
  Solo solo;
  Communicator& comm = o_.comm ? *o_.comm : solo;
  const bool parallel = comm.size() > 1, leader = comm.leader();
  if (parallel) run.model.set_random_shard(std::uint64_t(comm.rank()));
  const double comm0 = comm.seconds();
  std::optional<GradientReducer> reducer;
  if (parallel) reducer.emplace(run.model, comm);
  TrainingLog log(leader ? folder_.dir() : std::filesystem::path(), out.first, o_.steps, o_.unit, o_.items);
  std::int64_t saved_step = folder_.has_checkpoint() ? run.optimizer.steps() : -1;  // -1: none yet
  auto kept = [&] {
    return saved_step < 0 ? std::string("no checkpoint was saved yet")
                          : "the checkpoint of step " + std::to_string(saved_step) + ", " + folder_.checkpoint().string() + ", is kept";
  };
  auto validate_now = [&](std::int64_t step) {
    return run.validate_at ? run.validate_at(step) : step % o_.eval_every == 0 || step == o_.steps;
  };
  auto finish = [&] {
    log.close();
    if (leader && o_.plot && plot_loss(folder_.file("metrics.csv"), folder_.file("loss.png"), o_.unit)) out.plot = folder_.file("loss.png");
    out.seconds = log.seconds(), out.communication_seconds = comm.seconds() - comm0;
    if (reducer) out.gradient_seconds = reducer->sent(), out.communication_waited = reducer->waited(), out.buckets = reducer->buckets();
  };
  auto checkpoint = [&](std::int64_t step) {
    if (parallel) require_same(comm, "the weights after step " + std::to_string(step), weights_hash(run.model));  // replicas in sync
    if (leader) save(run);
    saved_step = step;
  };
  for (std::int64_t step = out.first; step <= o_.steps; ++step) {
    double items = run.feed(step);
    // Data parallel: the global batch's gradient is the ranks' gradients weighted by their loss
    // terms, summed (during the backward pass), over the sum of the terms.
    const double terms = parallel && run.loss_terms ? run.loss_terms() : 1.0;
    if (reducer) reducer->begin(float(terms));
    run.model.zero_grad();
    run.model.forward();
    run.model.backward();
    double loss = run.model.loss();  // before validation runs the model on other batches
    bool stop = false;
    if (parallel) {
      reducer->finish();
      double sums[4] = {terms > 0 ? loss * terms : 0.0, terms, items, interrupted() ? 1.0 : 0.0};  // no terms: no part
      comm.allreduce_sum(sums, "the step's loss");
      if (sums[3] > 0) set_interrupted();
      stop = sums[3] > 0;  // a signal that comes after the sum waits for the next step: the ranks must agree
      loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0, items = sums[2];
      if (std::isfinite(loss)) scale(run.model, float(1.0 / sums[1]));
    }
    if (!std::isfinite(loss)) {
      // Nothing of this step is kept: the last checkpoint is the last good state.
      finish();
      out.diverged = true, out.last = step - 1;
      if (leader)
        std::printf("\nstopped at step %lld: the training loss is %s (%s; lower the learning rate or raise the clipping, then %s)\n",
                    (long long)step, std::isnan(loss) ? "NaN" : "infinite", kept().c_str(),
                    saved_step < 0 ? "start again with --overwrite" : "--resume or start over with --overwrite");
      return out;
    }
    if (o_.lr) run.optimizer.set_lr(o_.lr(step));
    run.model.execute([&] {  // on the model's threads
      if (o_.clip > 0) optim::clip_grad_norm(run.model.parameters(), o_.clip);
      run.optimizer.step();
    });
    if (run.after_step) run.after_step(step, loss);
    std::optional<Metrics> val;
    if (validate_now(step)) val = log.untimed([&] { return run.validate(); });
    if (val && (parallel ? any_interrupted(comm) : interrupted())) {
      // A validation cut short is not a result: nothing of this step is logged or saved, and a
      // resumed run trains again from the last checkpoint (bit for bit) and validates in full.
      finish();
      out.interrupted = true, out.last = step;
      if (leader)
        std::printf("\ninterrupted during the validation of step %lld: %s (%s)\n", (long long)step, kept().c_str(),
                    saved_step < 0 ? "start again with --overwrite" : "continue with --resume");
      return out;
    }
    log.step(step, loss, run.optimizer.lr(), items, val);
    out.last = step;
    if (val) {
      out.last_validation = *val;
      if (!std::isfinite(val->loss())) {
        finish();
        out.diverged = true;
        if (leader) std::printf("stopped at step %lld: the validation loss is not finite (%s)\n", (long long)step, kept().c_str());
        return out;
      }
      log.untimed([&] { return checkpoint(step), 0; });
      if (run.after_validation && leader) run.after_validation(step, *val);
    }
    if (parallel ? stop : interrupted()) {
      checkpoint(step);
      finish();
      out.interrupted = true;
      if (leader)
        std::printf("\ninterrupted at step %lld: checkpoint saved to %s (continue with --resume)\n", (long long)step,
                    folder_.checkpoint().c_str());
      return out;
    }
  }
  finish();
  if (leader && run.sample) {
    out.sample = run.sample();
    checkpoint::write_atomically(folder_.file("sample.txt"), out.sample);
    std::printf("sample (%s):\n%s\n", folder_.file("sample.txt").c_str(), out.sample.c_str());
  }
  return out;
}

}  // namespace ctgrad::training
