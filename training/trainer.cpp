#include <ctgrad/checkpoint/training.hpp>
#include <ctgrad/training/trainer.hpp>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
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
}
bool interrupted() { return g_interrupted; }
void clear_interrupted() { g_interrupted = false; }

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
  TrainingLog log(folder_.dir(), out.first, o_.steps, o_.unit, o_.items);
  std::int64_t saved_step = folder_.has_checkpoint() ? run.optimizer.steps() : -1;  // -1: none yet
  auto kept = [&] {
    return saved_step < 0 ? std::string("no checkpoint was saved yet")
                          : "the checkpoint of step " + std::to_string(saved_step) + ", " + folder_.checkpoint().string() + ", is kept";
  };
  auto validate_now = [&](std::int64_t step) {
    return run.validate_at ? run.validate_at(step) : step % o_.eval_every == 0 || step == o_.steps;
  };
  for (std::int64_t step = out.first; step <= o_.steps; ++step) {
    const double items = run.feed(step);
    run.model.zero_grad();
    run.model.forward();
    run.model.backward();
    const double loss = run.model.loss();  // before validation runs the model on other batches
    if (!std::isfinite(loss)) {
      // Nothing of this step is kept: the last checkpoint is the last good state.
      log.close();
      out.diverged = true, out.last = step - 1, out.seconds = log.seconds();
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
    if (val && interrupted()) {
      // A validation cut short is not a result: nothing of this step is logged or saved, and a
      // resumed run trains again from the last checkpoint (bit for bit) and validates in full.
      log.close();
      out.interrupted = true, out.last = step, out.seconds = log.seconds();
      std::printf("\ninterrupted during the validation of step %lld: %s (%s)\n", (long long)step, kept().c_str(),
                  saved_step < 0 ? "start again with --overwrite" : "continue with --resume");
      return out;
    }
    log.step(step, loss, run.optimizer.lr(), items, val);
    out.last = step;
    if (val) {
      out.last_validation = *val;
      if (!std::isfinite(val->loss())) {
        log.close();
        out.diverged = true, out.seconds = log.seconds();
        std::printf("stopped at step %lld: the validation loss is not finite (%s)\n", (long long)step, kept().c_str());
        return out;
      }
      log.untimed([&] { return save(run), 0; });
      saved_step = step;
      if (run.after_validation) run.after_validation(step, *val);
    }
    if (interrupted()) {
      save(run);
      saved_step = step;
      log.close();
      out.interrupted = true, out.seconds = log.seconds();
      std::printf("\ninterrupted at step %lld: checkpoint saved to %s (continue with --resume)\n", (long long)step,
                  folder_.checkpoint().c_str());
      return out;
    }
  }
  log.close();
  out.seconds = log.seconds();
  return out;
}

}  // namespace ctgrad::training
