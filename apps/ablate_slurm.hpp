// `ctgrad ablate --launcher slurm`: a study's runs as one Slurm job array (apps/ablate_slurm.cpp).
//
// What is submitted: for each call that finds runs to do, slurm/array-K.json in the study folder
// (the runs, one per array index, and how each runs: CPUs, ranks) and slurm/array-K.sh, a script of
// one line, `exec ctgrad ablate --slurm-task .../array-K.json`; `sbatch --array=0-N[%J] --requeue
// --signal=B:USR1@120` submits it. Each array task runs its run as the local study does
// (Study::run_one: `ctgrad train` into the run's folder, result.json or failed.json after), so the
// report that the same command writes once every run has ended is the local study's. The job ids
// are recorded in the array files; squeue (and sacct, where accounting exists) says which runs are
// still queued or running.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <ctgrad/training/ablation.hpp>

namespace ctgrad::cli::slurm {

namespace ab = training::ablation;

struct Launch {
  std::vector<std::string> sbatch_args;  // --slurm-arg=...: passed to sbatch as they are (--partition, --time, --account)
  int cpus = 1;                          // --cpus-per-run: cores of each run (sbatch --cpus-per-task; train --threads)
  int ranks = 1;                         // --ranks-per-run: a run of R > 1 ranks is data-parallel under srun
  int throttle = 0;                      // --jobs J: at most J runs at once (the array's %J); 0: as Slurm schedules
  bool shared_fs = false;                // --shared-fs: the user says the nodes see the study folder
};

// A run of the study that Slurm still holds: its array job and task, and its state.
struct Queued {
  std::string job;       // "123_4"
  std::string state;     // PENDING, RUNNING, ...
  std::string reason;    // why pending ("Resources", "JobArrayTaskLimit")
};

// Refuses (config_error, one line) when sbatch is not on PATH, or when the study folder or this
// program is on a file system the nodes of the target partition do not share (judged by statfs's
// file system type: a network or cluster file system is shared; a local one only when the
// partition's nodes are this machine alone).
void check_cluster(const std::filesystem::path& study_dir, const Launch& launch);

// The runs of the study (by folder) that the study's array jobs still hold in Slurm's queue.
// Empty when no job was submitted; config_error when Slurm cannot be asked (squeue absent, or
// no answer within a minute).
std::map<std::filesystem::path, Queued> queued(const std::filesystem::path& study_dir);

// Submits `todo` as job arrays (split at Slurm's MaxArraySize); returns the job ids.
std::vector<std::string> submit(const ab::Study& study, const std::vector<const ab::RunSpec*>& todo, const Launch& launch);

// What Slurm's accounting says of the study's runs that ended (CANCELLED, TIMEOUT, NODE_FAIL...);
// empty without accounting.
std::map<std::filesystem::path, std::string> accounting(const std::filesystem::path& study_dir);

// The array task's side: the array file's run for this task (SLURM_ARRAY_TASK_ID), its seeds and how
// it runs.
struct Task {
  std::filesystem::path study_dir, run_dir;
  int seeds = 1, cpus = 1, ranks = 1;
};
Task task_of(const std::filesystem::path& array_file);

// The seed count of a study folder: the most any submission or run folder used.
int seeds_of(const std::filesystem::path& study_dir);

// Asks Slurm to requeue this array task (after it saved its checkpoint at the time limit's warning);
// "" when it is requeued, else why not.
std::string requeue_self();

// Each run's last array task ("123_4"), for the way to its log (slurm/logs/123_4.log).
std::map<std::filesystem::path, std::string> last_tasks(const std::filesystem::path& study_dir);

// Whether Slurm holds a queued task and will not start it by itself (held by a user or an
// administrator, or requeued held after a failed launch).
bool held(const Queued& q);

}  // namespace ctgrad::cli::slurm
