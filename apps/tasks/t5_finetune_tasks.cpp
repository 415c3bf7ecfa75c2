#include "t5_finetune_tasks.hpp"

#include <algorithm>

#include <ctgrad/data/pairs.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/data/text_source.hpp>
#include <ctgrad/training/escape.hpp>

#include "../task.hpp"
#include "text_corpus.hpp"

namespace ctgrad::cli::t5 {
namespace {

const std::vector<std::string> kTasks{"translate-en-de", "translate-de-en", "austen-novel", "pairs", "labels"};

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
  if (std::count(out.begin(), out.end(), "pairs") + std::count(out.begin(), out.end(), "labels") > 1)
    throw config_error("the mixture " + shown + " has pairs and labels: both would read the one data file");
  if (out.size() < 2) throw config_error("a mixture needs two tasks or more: " + shown + " (a single task is --task " + (out.empty() ? "..." : out[0]) + ")");
  return out;
}

// A user's data: bad input is one line (exit 2) naming the file and line.
template <class F>
auto user_data(F&& read) {
  try {
    return read();
  } catch (const data::data_error& e) {
    throw config_error(message_of(e));
  }
}

TaskSet load_task(const std::string& name, int index, const data::DataCache& cache, const training::Config& c) {
  TaskSet t;
  t.name = name;
  if (name == "pairs" || name == "labels") {
    if (c.text("data").empty()) throw config_error("task " + name + " needs --set data=FILE (your " + (name == "pairs" ? "text pairs" : "labelled text") + ")");
    const std::string prefix = c.text("prefix");
    if (name == "pairs") {  // text to text: 5% each validate and test, by a hash of the source
      const data::PairSplit split = data::split_pairs(user_data([&] {
        return data::read_pairs(c.text("data"), {.source_field = c.text("source_field"), .target_field = c.text("target_field")});
      }));
      for (const auto& [from, to] : {std::pair{&split.train, &t.train}, {&split.validation, &t.validation}, {&split.test, &t.test}})
        for (const auto& p : *from) to->push_back(example(prefix, p.en, p.de, index));
    } else {  // classification as text: the target is the label; held out by a hash of the text, half validates, half tests
      const auto texts = user_data([&] { return data::read_labelled(c.text("data"), {.text_field = c.text("text_field"), .label_field = c.text("label_field")}); });
      std::vector<std::string> labels;
      for (const auto& x : texts) labels.push_back(x.label);
      std::sort(labels.begin(), labels.end());
      labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
      if (labels.size() < 2) throw config_error("data " + training::printable(c.text("data")) + " has one label: a classifier needs two or more");
      t.classification = true, t.labels = labels;
      std::vector<std::int64_t> per_class(labels.size());
      std::size_t held = 0;
      for (const auto& x : texts) {
        if (!data::held_out(x.text, 0.1)) {
          t.train.push_back(example(prefix, x.text, x.label, index));
          continue;
        }
        (held++ % 2 ? t.test : t.validation).push_back(example(prefix, x.text, x.label, index));
        if (held % 2 == 0) ++per_class[std::size_t(std::lower_bound(labels.begin(), labels.end(), x.label) - labels.begin())];
      }
      t.majority = double(*std::max_element(per_class.begin(), per_class.end())) / double(std::max<std::size_t>(t.test.size(), 1));
    }
    if (t.validation.empty() || t.test.empty())
      throw config_error("data " + training::printable(c.text("data")) + " is too small to hold out validation and test examples (" + std::to_string(t.train.size()) +
                         " train)");
    return t;
  }
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
