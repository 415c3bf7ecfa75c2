// Matrices drawn as grey images side by side in one PNG, by gnuplot (log.hpp): attention maps
// with tokens on the axes (as d2l shows them), a grid of images with their labels. The numbers go
// to a new hidden file of their own (PlotData), every string through gnuplot_quote.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ctgrad::training {

struct ImagePanel {
  std::string title;
  bool highlight = false;       // the title in red (a wrong prediction)
  std::vector<double> values;   // rows x cols of the grid, row-major
};

struct ImageGrid {
  std::string title;
  int layout_rows = 1, layout_cols = 1;  // panels per column and per row
  int width = 800, height = 600, font_size = 9;
  std::int64_t rows = 0, cols = 0;       // of every panel
  bool unit_range = false;               // values in [0, 1] (else the palette spans each panel)
  std::vector<std::string> x_labels, y_labels;  // a label per column and per row, or none
};

// False, with a warning, when gnuplot is missing or fails (gnuplot()).
bool plot_image_grid(const std::filesystem::path& png, const ImageGrid& grid, const std::vector<ImagePanel>& panels);

}  // namespace ctgrad::training
