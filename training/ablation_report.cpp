// A study's report: results.csv, results.json, results.md, results.html and its plots, every
// string through its language's escaping (training/escape.hpp).
#include <ctgrad/training/ablation.hpp>
#include <ctgrad/training/ablation_files.hpp>

#include <ctgrad/checkpoint/atomic_file.hpp>
#include <ctgrad/training/escape.hpp>
#include <ctgrad/training/log.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace ctgrad::training::ablation {

namespace fs = std::filesystem;
using namespace files;

namespace {

std::string fixed(double v, int digits = 4) { return format_number(v, digits); }
std::string signed_fixed(double v, int digits = 4) { return format_number(v, digits, true); }
// RFC 4648 base64, for the PNGs inside results.html (15 lines: no Debian C++ library worth a
// dependency for it).
std::string base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
    out += {k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63], k[v & 63]};
  }
  if (i + 1 == in.size()) {
    const unsigned v = (unsigned char)in[i] << 16;
    out += {k[v >> 18], k[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
    out += {k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63], '='};
  }
  return out;
}

// The plots' names of the configurations: "baseline", then what each changes from it
// ("act=swiglu pos=rope"); when one of those is long, "c1", "c2", ... (the tables give each).
std::vector<std::string> plot_labels(const std::vector<Summary>& sums, bool& numbered) {
  std::vector<std::string> out;
  numbered = false;
  for (std::size_t c = 0; c < sums.size(); ++c) {
    std::string l;
    for (std::size_t k = 0; k < sums[c].values.size(); ++k)
      if (c == 0 || sums[c].values[k].second != sums[0].values[k].second) {
        if (!l.empty()) l.push_back(' ');
        l.append(sums[c].values[k].first).append("=").append(sums[c].values[k].second);
      }
    if (c == 0) l = "baseline";
    numbered |= l.size() > 32;
    out.push_back(l);
  }
  if (numbered)
    for (std::size_t c = 1; c < out.size(); ++c) out[c] = "c" + std::to_string(c);
  return out;
}

// At most `n` characters of a title (an ellipsis for the rest): gnuplot cuts a wider one at both ends.
std::string clipped(const std::string& t, std::size_t n) {
  if (t.size() <= n) return t;
  std::string out = t.substr(0, n - 3);
  out.append("...");
  return out;
}

// A power law y = a x^b fitted by least squares in log-log space; b is the exponent.
struct PowerLaw {
  double a = 0, b = 0;
  bool ok = false;
};
PowerLaw fit_power_law(const std::vector<std::pair<double, double>>& xy) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  for (const auto& [x, y] : xy)
    if (x > 0 && y > 0) {
      const double lx = std::log(x), ly = std::log(y);
      sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly, ++n;
    }
  const double den = n * sxx - sx * sx;
  if (n < 2 || !(std::abs(den) > 1e-12)) return {};
  const double b = (n * sxy - sx * sy) / den;
  return {std::exp((sy - b * sx) / n), b, true};
}

}  // namespace

void Study::report() const {
  std::error_code lock_ec;
  if (fs::is_directory(o_.dir, lock_ec)) lock();
  const std::string m = metric();
  if (!o_.metric.empty()) {  // a metric the runs do not report would leave every row empty
    std::vector<std::string> logged;
    bool any = false;
    for (const RunSpec& r : runs_) {
      if (!succeeded(r)) continue;
      any = true;
      const json res = read_json(r.dir / "result.json");
      if (res.is_object() && res.contains("final") && res["final"].is_object())
        for (const auto& [k, v] : res["final"].items())
          if (std::find(logged.begin(), logged.end(), k) == logged.end()) logged.push_back(k);
    }
    if (any && std::find(logged.begin(), logged.end(), o_.metric) == logged.end()) {
      std::string list;
      for (const auto& k : logged) list += (list.empty() ? "" : ", ") + k;
      throw std::invalid_argument("ctgrad: the study's runs report no validation metric '" + o_.metric + "' (they report: " + list + ")");
    }
  }
  const std::vector<Summary> sums = summarize();
  const bool lower = lower_is_better();
  const fs::path dir = o_.dir;
  const std::vector<std::string> all_metrics = metrics();
  std::vector<std::vector<Summary>> per_metric;
  for (const std::string& name : all_metrics) per_metric.push_back(name == m ? sums : summarize(name));
  // results.csv: a row per configuration and metric.
  {
    std::vector<std::string> head{"config"};
    for (const Axis& a : o_.grid) head.push_back(a.key);
    for (const char* h : {"metric", "seeds", "mean", "sd", "ci95_low", "ci95_high", "diff_vs_baseline", "diff_ci95_low", "diff_ci95_high",
                          "train_seconds", "parameters", "non_embedding_parameters"})
      head.emplace_back(h);
    for (int s = 1; s <= o_.seeds; ++s) head.push_back("seed" + std::to_string(s));
    std::string csv = csv_line(head);
    for (std::size_t k = 0; k < all_metrics.size(); ++k)
      for (const Summary& s : per_metric[k]) {
        std::vector<std::string> row{s.config};
        for (const auto& [key, v] : s.values) row.push_back(v);
        // Numbers in full (the shortest text that reads back as the same double): a CSV is read by programs.
        for (const std::string& f : {all_metrics[k], std::to_string(s.n), exact_number(s.mean), exact_number(s.sd), exact_number(s.mean - s.ci),
                                     exact_number(s.mean + s.ci), exact_number(s.diff), exact_number(s.diff - s.diff_ci),
                                     exact_number(s.diff + s.diff_ci), exact_number(s.seconds), std::to_string(s.parameters),
                                     std::to_string(s.non_embedding_parameters)})
          row.push_back(f);
        for (double v : s.finals) row.push_back(exact_number(v));
        csv += csv_line(row);
      }
    checkpoint::write_atomically(dir / "results.csv", csv);
  }
  // results.json: the compared metric's table, and every metric's.
  {
    auto table = [](const std::vector<Summary>& rows) {
      json arr = json::array();
      for (const Summary& s : rows) {
        json values = json::object();
        for (const auto& [k, v] : s.values) values[k] = v;
        json finals = json::array();
        for (double v : s.finals) finals.push_back(std::isnan(v) ? json(nullptr) : json(v));
        arr.push_back({{"config", s.config}, {"values", values}, {"seeds", s.n}, {"mean", s.mean}, {"sd", s.sd}, {"ci95", s.ci},
                       {"diff_vs_baseline", s.diff}, {"diff_ci95", s.diff_ci}, {"pairs", s.pairs}, {"train_seconds", s.seconds},
                       {"parameters", s.parameters}, {"non_embedding_parameters", s.non_embedding_parameters}, {"finals", finals}});
      }
      return arr;
    };
    json every = json::object();
    for (std::size_t k = 0; k < all_metrics.size(); ++k)
      every[all_metrics[k]] = {{"lower_is_better", ablation::lower_is_better(all_metrics[k])}, {"configurations", table(per_metric[k])}};
    const json out{{"study", study_json(o_)}, {"metric", m}, {"lower_is_better", lower}, {"configurations", table(sums)}, {"metrics", every}};
    checkpoint::write_atomically(dir / "results.json", out.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  }
  // The plots: validation curves per configuration (mean over seeds, min-max band), and the final
  // metric per configuration with its 95% interval.
  bool numbered = false;
  const std::vector<std::string> labels = plot_labels(sums, numbered);
  // A plot not drawn this time is removed, not left as the last report's picture.
  auto draw = [&](const std::string& script, const fs::path& png) {
    std::error_code ec;
    if (script.empty() || !gnuplot(script, png))
      if (fs::is_regular_file(fs::symlink_status(png, ec))) fs::remove(png, ec);
  };
  {
    std::string data;
    std::string plot;
    int block = 0;
    for (std::size_t c = 0; c < sums.size(); ++c) {
      std::map<std::int64_t, std::vector<double>> at;  // step -> the seeds' values
      for (const RunSpec& r : runs_) {
        if (r.config != sums[c].config || !succeeded(r) || !result_damage(r, o_.metric).empty()) continue;
        const Curve cv = read_curve(r.dir / "metrics.jsonl");
        for (std::size_t i = 0; i < cv.steps.size(); ++i)
          if (auto it = cv.values[i].find(m); it != cv.values[i].end()) at[cv.steps[i]].push_back(it->second);
      }
      if (at.empty()) continue;
      std::string rows;
      for (const auto& [step, v] : at) {
        double mean = 0;
        for (double x : v) mean += x / double(v.size());
        rows += std::to_string(step) + " " + fixed(mean, 6) + " " + fixed(*std::min_element(v.begin(), v.end()), 6) + " " +
                fixed(*std::max_element(v.begin(), v.end()), 6) + "\n";
      }
      data += rows + "\n\n";
      const std::string title = gnuplot_quote(labels[c]);
      // Eight colours, then the same colours dashed with other points: 16 configurations stay apart.
      const std::string lc = std::to_string(c % 8 + 1), dt = std::to_string(c / 8 % 4 + 1), pt = std::to_string(7 - 2 * int(c / 8 % 3));
      plot += std::string(plot.empty() ? "plot " : ", ") + "$curves index " + std::to_string(block) + " using 1:3:4 with filledcurves fs transparent solid 0.2 lc " +
              lc + " notitle, $curves index " + std::to_string(block) + " using 1:2 with linespoints lw 2 dt " + dt + " pt " + pt + " ps 0.6 lc " + lc +
              " title " + title;
      ++block;
    }
    draw(plot.empty() ? std::string() : "set terminal pngcairo noenhanced size 900,520 font ',10'\nset output ARG1\n$curves << EOD\n" +
                  data + "EOD\nset key outside right\nset xlabel 'step'\nset ylabel " + gnuplot_quote("validation " + m) + "\nset title " +
                  gnuplot_quote(clipped(o_.name, 60) + ": validation " + m + " (mean over seeds, band: min-max)") + "\n" + plot + "\n",
              dir / "curves.png");
    // The data block holds numbers only; the configurations label the bars through set xtics.
    std::string bars, tics;
    for (std::size_t c = 0; c < sums.size(); ++c)
      if (sums[c].n) {
        bars += std::to_string(c) + " " + fixed(sums[c].mean, 6) + " " + fixed(std::isnan(sums[c].ci) ? 0.0 : sums[c].ci, 6) + "\n";
        tics += std::string(tics.empty() ? "" : ", ") + gnuplot_label(labels[c]) + " " + std::to_string(c);
      }
    draw(bars.empty() ? std::string() : "set terminal pngcairo noenhanced size 900,520 font ',10'\nset output ARG1\n$bars << EOD\n" + bars +
                  "EOD\nset style fill solid 0.5\nset boxwidth 0.6\nset xtics rotate by -30\nset xtics (" + tics + ")\nset ylabel " +
                  gnuplot_quote("final validation " + m) +
                  "\nset title " + gnuplot_quote(clipped(o_.name, 60) + ": final " + m + " (95% interval over seeds)") +
                  "\nset xrange [-0.6:" + std::to_string(sums.size() - 0.4) + "]\nplot $bars using 1:2 with boxes notitle, '' using 1:2:3 with yerrorbars lc rgb 'black' pt 0 notitle\n",
              dir / "final.png");
  }
  // The scaling plot: the final metric against non-embedding parameters, log-log, one series and
  // fitted power law per combination of the other keys' values.
  struct Series {
    std::string name;
    std::vector<std::pair<double, double>> points;
    PowerLaw law;
  };
  std::vector<Series> scaling;
  {
    auto sized = [&](const std::string& key) { return std::find(o_.size_keys.begin(), o_.size_keys.end(), key) != o_.size_keys.end(); };
    std::set<std::int64_t> sizes;
    for (const Summary& s : sums)
      if (s.n && s.non_embedding_parameters > 0) sizes.insert(s.non_embedding_parameters);
    if (!o_.size_keys.empty() && sizes.size() >= 2) {
      for (const Summary& s : sums) {
        if (!s.n || s.non_embedding_parameters <= 0) continue;
        std::string name;
        for (const auto& [k, v] : s.values)
          if (!sized(k)) name += (name.empty() ? "" : " ") + k + "=" + v;
        auto it = std::find_if(scaling.begin(), scaling.end(), [&](const Series& x) { return x.name == name; });
        if (it == scaling.end()) it = scaling.insert(scaling.end(), Series{name, {}, {}});
        it->points.emplace_back(double(s.non_embedding_parameters), s.mean);
      }
      for (Series& x : scaling) x.law = fit_power_law(x.points);
      std::string data, plot;
      const bool one = scaling.size() == 1;
      double x_lo = 1e300, x_hi = 0, y_lo = 1e300, y_hi = 0;
      for (std::size_t k = 0; k < scaling.size(); ++k) {
        Series& x = scaling[k];
        std::sort(x.points.begin(), x.points.end());
        for (const auto& [n, v] : x.points) {
          data += exact_number(n) + " " + exact_number(v) + "\n";
          x_lo = std::min(x_lo, n), x_hi = std::max(x_hi, n), y_lo = std::min(y_lo, v), y_hi = std::max(y_hi, v);
        }
        data += "\n\n";
        // One key entry per series: its name and the fitted exponent; the fit is its dashed line.
        std::string label = one ? "runs (mean over seeds)" : x.name.empty() ? "all" : clipped(x.name, 40);
        if (x.law.ok) label += ", exponent " + fixed(x.law.b, 3);
        const std::string lc = std::to_string(k % 8 + 1), pt = std::to_string(7 - 2 * int(k / 8 % 3));
        plot += std::string(plot.empty() ? "plot " : ", ") + "$points index " + std::to_string(k) + " using 1:2 with points pt " + pt + " ps 1.2 lc " + lc +
                " title " + gnuplot_quote(label);
        if (x.law.ok)
          plot += ", [" + exact_number(x.points.front().first) + ":" + exact_number(x.points.back().first) + "] " + exact_number(x.law.a) + " * x ** (" +
                  exact_number(x.law.b) + ") with lines lw 2 dt " + std::to_string(k / 8 % 4 + 2) + " lc " + lc + " notitle";
      }
      // The axes fit the points (a log axis would otherwise span whole decades around them), with
      // a tic at each size and five along the metric (a narrow log range gets no decade tics).
      std::string ranges = "set xrange [" + exact_number(x_lo / 1.25) + ":" + exact_number(x_hi * 1.25) + "]\nset yrange [" +
                           exact_number(y_lo / 1.03) + ":" + exact_number(y_hi * 1.03) + "]\nset xtics (";
      auto count = [](double n) {
        char b[32];
        std::snprintf(b, sizeof b, n >= 1e9 ? "%.3gG" : n >= 1e6 ? "%.3gM" : n >= 1e3 ? "%.3gk" : "%.3g", n >= 1e9 ? n / 1e9 : n >= 1e6 ? n / 1e6 : n >= 1e3 ? n / 1e3 : n);
        return std::string(b);
      };
      std::set<double> all, xs;
      for (const Series& x : scaling)
        for (const auto& [n, v] : x.points) all.insert(n);
      // Labels apart: a size within 30% of the last labelled one (swiglu's rounding) gets none.
      const double apart = std::max(1.3, std::pow(x_hi / x_lo, 1.0 / 8));
      for (double n : all)
        if (xs.empty() || n > *xs.rbegin() * apart) xs.insert(n);
      for (double n : xs) ranges += std::string(ranges.back() == '(' ? "" : ", ") + gnuplot_quote(count(n)) + " " + exact_number(n);
      ranges += ")\nset ytics (";
      for (int i = 0; i < 5; ++i) {
        const double y = y_lo * std::pow(y_hi / y_lo, i / 4.0);
        ranges += std::string(i ? ", " : "") + gnuplot_quote(fixed(y, 3)) + " " + exact_number(y);
      }
      ranges += ")\n";
      draw("set terminal pngcairo noenhanced size 900," + std::to_string(540 + 16 * ((scaling.size() + 1) / 2)) +
               " font ',10'\nset output ARG1\n$points << EOD\n" + data + "EOD\n" + ranges +
               "set logscale xy\nset key below horizontal maxcols 2\nset grid\nset xlabel 'non-embedding parameters (dashed: the fitted power law)'\nset ylabel " +
               gnuplot_quote("final validation " + m) + "\nset title " + gnuplot_quote(clipped(o_.name, 60) + ": " + m + " against model size (log-log)") +
               "\n" + plot + "\n",
           dir / "scaling.png");
    } else {
      draw("", dir / "scaling.png");
    }
  }
  // results.md and results.html: the same table.
  const std::string better = lower ? "lower is better" : "higher is better";
  std::string md = "# " + markdown_text(o_.name) + "\n\n" + (o_.model.empty() ? "" : "Model " + markdown_code(o_.model) + "; ") + "metric: final validation " + markdown_text(m) + " (" + better +
                   "); " + std::to_string(o_.seeds) + " seeds; baseline: the first value of each " +
                   (o_.one_at_a_time ? "key, each other configuration changing one key (" : "grid key (") + markdown_code(sums.front().config) + ").";
  if (!o_.fixed.empty()) {
    md += " Fixed:";
    for (const auto& [k, v] : o_.fixed) md += " " + markdown_code(k + "=" + v);
    md += ".";
  }
  md += std::string(numbered ? " The plots name the configurations by their label." : "") +
        "\n\n| " + (numbered ? "label | " : "") + "configuration | seeds | " + markdown_code(m) +
        " mean ± sd | 95% CI | vs baseline (paired) | 95% CI of the difference | train time | parameters (non-embedding) |\n|" + (numbered ? "---|" : "") +
        "---|---|---|---|---|---|---|---|\n";
  std::string rows_html;
  for (const Summary& s : sums) {
    const bool base = &s == &sums.front();
    const std::string label = numbered ? labels[std::size_t(&s - &sums.front())] : "";
    const std::string diff = base ? "baseline" : s.pairs ? signed_fixed(s.diff) : "";
    const std::string dci = base || s.pairs < 2 ? "" : "[" + signed_fixed(s.diff - s.diff_ci) + ", " + signed_fixed(s.diff + s.diff_ci) + "]";
    const std::string ci = s.n < 2 ? "" : "[" + fixed(s.mean - s.ci) + ", " + fixed(s.mean + s.ci) + "]";
    const std::string mean = s.n ? fixed(s.mean) + (s.n > 1 ? " ± " + fixed(s.sd) : "") : "not run";
    const std::string secs = !s.n ? "" : s.seconds < 60 ? fixed(s.seconds, 1) + " s" : format_duration(s.seconds);
    const std::string params = !s.parameters ? "" : std::to_string(s.parameters) + (s.non_embedding_parameters ? " (" + std::to_string(s.non_embedding_parameters) + ")" : "");
    const std::string seeds = std::to_string(s.n) + (s.failed ? " (" + std::to_string(s.failed) + " failed)" : "");
    md += "| " + (numbered ? label + " | " : "") + markdown_code(s.config) + " | " + seeds + " | " + mean + " | " + ci + " | " + diff + " | " + dci + " | " + secs + " | " + params + " |\n";
    rows_html += "<tr><td>" + (numbered ? html_escape(label) + ": " : "") + "<code>" + html_escape(s.config) + "</code></td><td>" + seeds + "</td><td>" + mean + "</td><td>" + ci + "</td><td>" +
                 diff + "</td><td>" + dci + "</td><td>" + secs + "</td><td>" + params + "</td></tr>\n";
  }
  for (std::size_t k = 1; k < all_metrics.size(); ++k) {
    const std::string& name = all_metrics[k];
    md += "\nValidation " + markdown_text(name) + " (" + (ablation::lower_is_better(name) ? "lower" : "higher") + " is better):\n\n| configuration | " + markdown_code(name) +
          " mean ± sd | vs baseline (paired) | 95% CI of the difference |\n|---|---|---|---|\n";
    rows_html += "<tr><th colspan='8' style='text-align:left'>validation " + html_escape(name) + "</th></tr>\n";
    for (std::size_t c = 0; c < per_metric[k].size(); ++c) {
      const Summary& s = per_metric[k][c];
      const bool base = c == 0;
      // A configuration whose runs finished but log no such metric (a dense model's moe.balance).
      const char* none = c < sums.size() && sums[c].n ? "not reported" : "not run";
      const std::string mean = s.n ? fixed(s.mean) + (s.n > 1 ? " ± " + fixed(s.sd) : "") : none;
      const std::string diff = base ? "baseline" : s.pairs ? signed_fixed(s.diff) : "";
      const std::string dci = base || s.pairs < 2 ? "" : "[" + signed_fixed(s.diff - s.diff_ci) + ", " + signed_fixed(s.diff + s.diff_ci) + "]";
      md += "| " + markdown_code(s.config) + " | " + mean + " | " + diff + " | " + dci + " |\n";
      rows_html += "<tr><td><code>" + html_escape(s.config) + "</code></td><td>" + std::to_string(s.n) + "</td><td>" + mean + "</td><td></td><td>" + diff +
                   "</td><td>" + dci + "</td><td></td><td></td></tr>\n";
    }
  }
  if (o_.seeds > 1)
    md += "\nA difference whose interval excludes 0 is one the seeds agree on; with " + std::to_string(o_.seeds) + " seeds an interval is mean ± " +
          fixed(t975(o_.seeds - 1), 2) + " sd / sqrt(" + std::to_string(o_.seeds) + ") (Student's t).\n";
  std::string scaling_text;
  for (const auto& x : scaling)
    if (x.law.ok)
      scaling_text += std::string(scaling_text.empty() ? "" : "; ") + (x.name.empty() || scaling.size() == 1 ? "" : x.name + ": ") + "exponent " +
                      fixed(x.law.b, 3) + " over " + std::to_string(x.points.size()) + " sizes";
  if (!scaling_text.empty())
    md += "\nScaling: the final " + markdown_text(m) + " against non-embedding parameters N, a power law a N^b fitted in log-log space (" +
          markdown_text(scaling_text) + ").\n";
  std::error_code ec;
  for (const char* png : {"curves.png", "final.png", "scaling.png"})
    if (fs::is_regular_file(fs::symlink_status(dir / png, ec))) md += "\n![" + std::string(png) + "](" + png + ")\n";
  checkpoint::write_atomically(dir / "results.md", md);
  std::string html = "<!doctype html><html><head><meta charset='utf-8'><title>" + html_escape(o_.name) +
                     "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
                     "padding:4px 8px;text-align:right}td:first-child{text-align:left}</style></head><body><h1>" +
                     html_escape(o_.name) + "</h1><p>" + html_escape(o_.model.empty() ? "" : "Model " + o_.model + "; ") + "metric: final validation " +
                     html_escape(m) + " (" + better + "); " + std::to_string(o_.seeds) + " seeds; baseline " + html_escape(sums.front().config) +
                     ".</p><table><tr><th>configuration</th><th>seeds</th><th>mean ± sd</th><th>95% CI</th><th>vs baseline (paired)</th>"
                     "<th>95% CI of the difference</th><th>train time</th><th>parameters (non-embedding)</th></tr>\n" + rows_html + "</table>\n";
  if (!scaling_text.empty()) html += "<p>Scaling: a power law a N^b fitted in log-log space (" + html_escape(scaling_text) + ").</p>\n";
  for (const char* png : {"curves.png", "final.png", "scaling.png"})
    if (fs::is_regular_file(fs::symlink_status(dir / png, ec))) html += "<p><img alt='" + std::string(png) + "' src='data:image/png;base64," + base64(read_text(dir / png)) + "'></p>\n";
  html += "</body></html>\n";
  checkpoint::write_atomically(dir / "results.html", html);
}

}  // namespace ctgrad::training::ablation
