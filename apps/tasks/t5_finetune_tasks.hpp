// The tasks `ctgrad finetune t5` trains on (t5_finetune.cpp): a --task spec's tasks, and each
// task's examples, as text until the session encodes them.
#pragma once
#include <string>
#include <vector>

#include <ctgrad/data/cache.hpp>
#include <ctgrad/training/config.hpp>

namespace ctgrad::cli::t5 {

struct Example {
  std::vector<std::int32_t> input, target;  // each ends with </s>
  std::string target_text, source_text;
  int task = 0;
  std::string input_text;  // the task's prefix and the source, until tokenize() encodes it
};
struct TaskSet {
  std::string name;
  bool classification = false;
  std::vector<Example> train, validation, test;
  std::vector<std::string> labels;  // classification: the target texts
  double majority = 0;              // classification: the majority class's share of the test set
};

// The tasks of a --task spec, in its order; an unknown one or a repeat is an error naming it.
std::vector<std::string> parse_tasks(const std::string& spec);
// A task's train, validation and test examples (the session tokenizes them). The tasks of a user's
// data, "pairs" and "labels", read the config's data, prefix and field keys.
TaskSet load_task(const std::string& name, int index, const data::DataCache& cache, const training::Config& c);

}  // namespace ctgrad::cli::t5
