#include <ctgrad/training/ablation_files.hpp>

#include <ctgrad/training/escape.hpp>

#include <fstream>
#include <sstream>

namespace ctgrad::training::ablation::files {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json read_json(const fs::path& p, std::string* why) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  std::string problem;
  if (ec) problem = "cannot be read (" + ec.message() + ")";
  else if (size > (std::uintmax_t(1) << 20)) problem = "is larger than 1 MiB: not a file a run wrote";
  else
    try {
      return json::parse(read_text(p));
    } catch (const json::exception& e) {
      std::string m = e.what();
      if (m.rfind("[json.exception.", 0) == 0 && m.find("] ") != std::string::npos) m = m.substr(m.find("] ") + 2);
      problem = "is not JSON (" + printable(m.substr(0, 200)) + ")";
    }
  if (why) *why = problem;
  return json(json::value_t::discarded);
}

std::optional<std::int64_t> parameter_count(const json& v) {
  if (!v.is_number_unsigned() || v.get<std::uint64_t>() > (std::uint64_t(1) << 53)) return std::nullopt;
  return std::int64_t(v.get<std::uint64_t>());
}

Curve read_curve(const fs::path& jsonl) {
  Curve c;
  std::error_code ec;
  if (!fs::is_regular_file(jsonl, ec)) return c;  // a FIFO in its place would block the study
  if (fs::file_size(jsonl, ec) > (std::uintmax_t(1) << 28)) return c;  // past 256 MiB: not a run's log (read whole, it would take the memory)
  std::ifstream f(jsonl);
  std::string line;
  while (std::getline(f, line)) {
    const json r = json::parse(line, nullptr, false);
    if (!r.is_object() || !r.contains("step") || !r["step"].is_number_integer()) continue;
    std::map<std::string, double> v;
    for (const auto& [k, x] : r.items())
      if (k.rfind("val_", 0) == 0 && x.is_number() && control_byte(k).empty() && utf8_error(k).empty())  // a metric's name is text
        v[k.substr(4)] = x.get<double>();
    if (v.empty()) continue;
    c.steps.push_back(r["step"].get<std::int64_t>());
    c.values.push_back(std::move(v));
    if (r.contains("train_seconds") && r["train_seconds"].is_number()) c.seconds = r["train_seconds"].get<double>();
    if (r.contains("metric") && r["metric"].is_string() && control_byte(r["metric"].get<std::string>()).empty() &&
        utf8_error(r["metric"].get<std::string>()).empty())
      c.metric = r["metric"].get<std::string>();
  }
  if (c.metric != "loss")  // "loss" is then the alias of another metric
    for (auto& v : c.values) v.erase("loss");
  return c;
}

json study_json(const StudyOptions& o) {
  json grid = json::array();
  for (const Axis& a : o.grid) grid.push_back({{"key", a.key}, {"values", a.values}});
  json fixed = json::array();
  for (const auto& [k, v] : o.fixed) fixed.push_back({k, v});
  json j{{"format", "ctgrad-study-1"}, {"model", o.model}, {"grid", grid}, {"fixed", fixed}, {"seeds", o.seeds}};
  if (o.one_at_a_time) j["design"] = "one_at_a_time";  // (grid studies' files stay as they were)
  return j;
}

}  // namespace ctgrad::training::ablation::files
