// Where each run of a study stands (`ctgrad ablate --run DIR --status`, and --wait's progress):
// from its folder (result.json: done; failed.json: failed; a checkpoint: stopped part way), from
// Slurm's queue (pending, running) and, where accounting exists, from sacct (how a run that left
// the queue without a result ended: CANCELLED, TIMEOUT, NODE_FAIL).
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "ablate_slurm.hpp"

namespace ctgrad::cli {

struct RunState {
  const training::ablation::RunSpec* run = nullptr;
  std::string state;   // done, failed, pending, running, stopped, not started
  std::string detail;  // the final metric, the exit code, the Slurm job, the step reached
};

// `accounting`: sacct's state of each run's last task; `tasks`: each run's last array task ("12_3").
std::vector<RunState> run_states(const training::ablation::Study& study, const std::map<std::filesystem::path, slurm::Queued>& queue,
                                 const std::map<std::filesystem::path, std::string>& accounting = {},
                                 const std::map<std::filesystem::path, std::string>& tasks = {});

// "3 done, 2 running, 3 pending" (the states that occur, in a fixed order).
std::string state_counts(const std::vector<RunState>& states);

// `ctgrad ablate --run DIR --status`: a line for the study, one for each run.
int ablate_status(const std::filesystem::path& dir);

}  // namespace ctgrad::cli
