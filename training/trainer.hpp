// One training loop for every model: the step (feed, zero_grad, forward, backward, learning rate,
// clipping and the optimizer step on the model's threads), validation at a cadence, atomic
// checkpoints after each validation, the log and plot, Ctrl-C and SIGTERM (save, then stop), and a
// stop on a non-finite loss that keeps the last good checkpoint. A model brings a Run: its program,
// its optimizer and two functions, how step s is fed and how it is validated.
//
//   training::Run run{.model = model, .optimizer = opt,
//                  .feed = [&](std::int64_t s) { batches.get(s); model.set_input(...); return tokens; },
//                  .validate = [&] { return training::Metrics{{{"loss", validation_loss()}}}; }};
//   training::Trainer trainer(training::RunFolder("runs/mine"), {.steps = 2000, .eval_every = 500, .clip = 1.0,
//                                                        .lr = optim::warmup_cosine(1e-3, 1e-4, 100, 2000)});
//   training::Outcome out = trainer.fit(run);   // resumes from the optimizer's step when it was loaded
//
// Resuming is loading the checkpoint first (checkpoint::load_training, or Trainer::load): the loop
// starts at the optimizer's step + 1 and continues bit for bit.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include <ctgrad/checkpoint/safetensors.hpp>
#include <ctgrad/graph/executor.hpp>
#include <ctgrad/optim/optimizer.hpp>
#include <ctgrad/training/distributed.hpp>
#include <ctgrad/training/log.hpp>
#include <ctgrad/training/run_folder.hpp>

namespace ctgrad::training {

struct Run {
  Executor<float>& model;
  optim::Optimizer<float>& optimizer;
  // Sets the inputs of training step `step` (counted from 1) and returns the items it holds
  // (tokens, images): a function of the step alone, so a resumed run sees the same batches.
  std::function<double(std::int64_t step)> feed;
  // Metrics on the validation data; the first is the loss that is logged and plotted.
  std::function<Metrics()> validate;
  // When to validate; empty: every eval_every steps and at the last.
  std::function<bool(std::int64_t step)> validate_at = {};
  // Called after each step with its training loss, and after each validation (an epoch line).
  std::function<void(std::int64_t step, double loss)> after_step = {};
  std::function<void(std::int64_t step, const Metrics&)> after_validation = {};  // rank 0 only
  // Data parallelism: how many terms the loss of the shard just fed averages over (the scored
  // tokens); the ranks' gradients are weighted by it, so the step is the global batch's. Empty:
  // every shard's loss has the same number of terms (equal rows of equal length).
  std::function<double()> loss_terms = {};
  // After a training that ran to its last step: what the model makes of a prompt (a language
  // model's continuation), written to sample.txt in the run folder and printed. Empty: none.
  std::function<std::string()> sample = {};
};

struct LoopOptions {
  std::int64_t steps = 1000, eval_every = 500;
  double clip = 0;                          // the global gradient norm's bound; 0: no clipping
  std::function<double(std::int64_t)> lr;   // learning rate of step s; empty: the optimizer's own
  std::string unit = "nats/token", items = "tok";
  checkpoint::Metadata metadata;            // stored with each checkpoint (the config, the model, ...)
  int keep_checkpoints = 0;                 // also keep the last k as checkpoint-<step>.safetensors (averaging)
  bool plot = true;                         // draw loss.png from metrics.csv when the loop ends (gnuplot)
  // Data parallel over these ranks when there is more than one (the Run's feed then feeds this
  // rank's shard): gradients summed, rank 0 logs and saves. Null: one process.
  Communicator* comm = nullptr;
};

struct Outcome {
  std::int64_t first = 1, last = 0;  // the steps this call ran
  bool interrupted = false;          // Ctrl-C or SIGTERM: saved, stopped
  bool diverged = false;             // a non-finite loss: stopped without saving it
  double seconds = 0;                // training time, without validation and checkpoints
  double communication_seconds = 0;  // data parallelism: in collectives (on any thread)
  double gradient_seconds = 0;       // of that, summing gradient buckets
  double communication_waited = 0;   // of that, the training loop waited for (the rest overlapped the backward pass)
  int buckets = 0;                   // gradient buckets per step
  Metrics last_validation;
  std::filesystem::path plot;  // loss.png when it was drawn
  std::string sample;          // Run::sample's text, when it ran
};

class Trainer {
 public:
  Trainer(RunFolder folder, LoopOptions options) : folder_(std::move(folder)), o_(std::move(options)) {}

  // Runs steps optimizer.steps() + 1 .. options.steps.
  Outcome fit(Run& run);
  // Saves model, optimizer and RNG state with the metadata, atomically.
  void save(const Run& run) const;
  // Loads a checkpoint of this folder into model and optimizer; returns its metadata.
  checkpoint::Metadata load(Run& run) const;

  const RunFolder& folder() const { return folder_; }
  const LoopOptions& options() const { return o_; }

 private:
  RunFolder folder_;
  LoopOptions o_;
};

// Ctrl-C (SIGINT), SIGTERM and SIGUSR2 (srun forwards it unchanged) set a flag instead of killing the process; long loops (training,
// validation, sampling) check it and stop cleanly. Installed once, for the whole process.
void install_interrupt_handlers();
bool interrupted();
void set_interrupted();  // as if a signal came: another rank of a data-parallel job was interrupted
void clear_interrupted();

}  // namespace ctgrad::training
