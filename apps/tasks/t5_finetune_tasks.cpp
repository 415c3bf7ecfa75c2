#include "t5_finetune_tasks.hpp"

#include <algorithm>

#include <ctgrad/data/pairs.hpp>
#include <ctgrad/training/escape.hpp>

#include "../task.hpp"
#include "text_corpus.hpp"

namespace ctgrad::cli::t5 {
namespace {

const std::vector<std::string> kTasks{"translate-en-de", "translate-de-en", "austen-novel"};

// An example's texts, not yet encoded: tokenize() encodes a whole set of them at once.
Example example(const std::string& prefix, const std::string& source, const std::string& target, int task) {
  return Example{{}, {}, target, source, task, prefix + source};
}

}  // namespace

std::vector<std::string> parse_tasks(const std::string& spec) {
  auto known = [](const std::string& t) { return std::find(kTasks.begin(), kTasks.end(), t) != kTasks.end(); };
  auto list = [] {
    std::string s;
    for (const auto& t : kTasks) s += (s.empty() ? "" : ", ") + t;
    return s;
  };
  const std::string shown = training::shortened(spec, 120);
  if (spec.rfind("mix:", 0) != 0) {
    if (!known(spec)) throw config_error("task '" + shown + "' is not one of: " + list() + ", or mix:a,b,...");
    return {spec};
  }
  std::vector<std::string> out;
  for (std::size_t at = 4; at <= spec.size();) {
    const std::size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string t = spec.substr(at, comma - at);
    if (!known(t)) throw config_error("the mixture " + shown + " names an unknown task '" + t.substr(0, 80) + "' (tasks: " + list() + ")");
    if (std::find(out.begin(), out.end(), t) != out.end()) throw config_error("the mixture " + shown + " names '" + t + "' twice");
    out.push_back(t);
    at = comma + 1;
  }
  if (out.size() < 2) throw config_error("a mixture needs two tasks or more: " + shown + " (a single task is --task " + (out.empty() ? "..." : out[0]) + ")");
  return out;
}

TaskSet load_task(const std::string& name, int index, const data::DataCache& cache) {
  TaskSet t;
  t.name = name;
  if (name == "austen-novel") {
    const corpus::Passages p = corpus::austen_passages(cache);
    t.classification = true, t.labels = p.titles;
    for (const auto& x : p.train) t.train.push_back(example("austen novel: ", x.text, p.titles[std::size_t(x.label)], index));
    // The held-out passages (the novels' last tenth): every other one validates, the rest test.
    std::vector<std::int64_t> per_class(p.titles.size());
    for (std::size_t i = 0; i < p.validation.size(); ++i) {
      const auto& x = p.validation[i];
      (i % 2 ? t.test : t.validation).push_back(example("austen novel: ", x.text, p.titles[std::size_t(x.label)], index));
      if (i % 2) ++per_class[std::size_t(x.label)];
    }
    t.majority = double(*std::max_element(per_class.begin(), per_class.end())) / double(std::max<std::size_t>(t.test.size(), 1));
    return t;
  }
  const bool en_de = name == "translate-en-de";
  const std::string prefix = en_de ? "translate English to German: " : "translate German to English: ";
  const data::PairSplit split = data::split_pairs(data::ding_sentence_pairs());
  auto add = [&](const std::vector<data::SentencePair>& from, std::vector<Example>& to) {
    for (const auto& s : from) to.push_back(en_de ? example(prefix, s.en, s.de, index) : example(prefix, s.de, s.en, index));
  };
  add(split.train, t.train), add(split.validation, t.validation), add(split.test, t.test);
  return t;
}

}  // namespace ctgrad::cli::t5
