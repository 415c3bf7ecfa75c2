#include <ctgrad/training/image_grid.hpp>

#include <sstream>

#include <ctgrad/training/escape.hpp>
#include <ctgrad/training/log.hpp>
#include <ctgrad/training/plot_data.hpp>

namespace ctgrad::training {

bool plot_image_grid(const std::filesystem::path& png, const ImageGrid& g, const std::vector<ImagePanel>& panels) {
  std::ostringstream numbers;
  for (const ImagePanel& p : panels) {
    for (std::int64_t r = 0; r < g.rows; ++r)
      for (std::int64_t c = 0; c < g.cols; ++c) numbers << p.values[std::size_t(r * g.cols + c)] << (c + 1 < g.cols ? " " : "\n");
    numbers << "\n\n";
  }
  const PlotData data(png.parent_path().empty() ? std::filesystem::path(".") : png.parent_path(), numbers.str());
  auto tics = [](const std::vector<std::string>& t) {
    std::string s = "(";
    for (std::size_t i = 0; i < t.size(); ++i) s += (i ? ", " : "") + gnuplot_label(t[i]) + " " + std::to_string(i);
    return s + ")";
  };
  std::ostringstream s;
  s << "set terminal pngcairo noenhanced size " << g.width << "," << g.height << " font '," << g.font_size << "'\nset output ARG1\n"
    << "set multiplot layout " << g.layout_rows << "," << g.layout_cols << " title " << gnuplot_quote(g.title) << "\n"
    << "set palette grey negative\n" << (g.unit_range ? "set cbrange [0:1]\n" : "") << "unset colorbox\n"
    << "set yrange [" << g.rows << "-0.5:-0.5]\nset xrange [-0.5:" << g.cols << "-0.5]\n";
  if (g.x_labels.empty()) s << "unset xtics\n";
  else s << "set xtics rotate by 90 right " << tics(g.x_labels) << "\n";
  if (g.y_labels.empty()) s << "unset ytics\n";
  else s << "set ytics " << tics(g.y_labels) << "\n";
  s << "set size ratio -1\n";
  for (std::size_t i = 0; i < panels.size(); ++i)
    s << "set title " << gnuplot_quote(panels[i].title) << (panels[i].highlight ? " tc rgb 'red'" : " tc rgb 'black'") << "\nplot ARG2 index " << i
      << " matrix with image pixels notitle\n";
  s << "unset multiplot\n";
  return gnuplot(s.str(), png, {data.path()});
}

}  // namespace ctgrad::training
