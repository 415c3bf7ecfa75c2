#include <ctgrad/ops/rotary.hpp>
#include <ctgrad/ops/detail/kernel.hpp>
#include <ctgrad/ops/detail/shared_gradient.hpp>

#include <cmath>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <string>
#include <vector>

namespace ctgrad {

double rope_frequency(const RopeOptions& o, int i, int rot) {
  const double base = std::pow(double(o.theta), -2.0 * double(i) / double(rot)), factor = double(o.factor);
  switch (o.scaling) {
    case RopeScaling::none: return base;
    case RopeScaling::linear: return base / factor;
    case RopeScaling::llama3: {  // Hugging Face's _compute_llama3_parameters, in double
      const double pi = 3.14159265358979323846, wavelength = 2 * pi / base, context = double(o.original_context);
      const double low = double(o.low_freq_factor), high = double(o.high_freq_factor);
      if (wavelength < context / high) return base;
      if (wavelength > context / low) return base / factor;
      const double smooth = (context / wavelength - low) / (high - low);
      return (1 - smooth) * base / factor + smooth * base;
    }
  }
  return base;
}

namespace {

// The options that set the frequencies: one table per distinct set.
struct FrequencyKey {
  double theta, factor, low, high, context;
  RopeScaling scaling;
  explicit FrequencyKey(const RopeOptions& o)
      : theta(double(o.theta)), factor(double(o.factor)), low(double(o.low_freq_factor)), high(double(o.high_freq_factor)),
        context(double(o.original_context)), scaling(o.scaling) {
    if (scaling == RopeScaling::none) factor = low = high = context = 0;  // unused: equal tables
    if (scaling == RopeScaling::linear) low = high = context = 0;
  }
  bool operator==(const FrequencyKey&) const = default;
  RopeOptions options() const {
    return {.theta = theta, .scaling = scaling, .factor = factor, .low_freq_factor = low, .high_freq_factor = high, .original_context = context};
  }
};

// cos and sin of position p times frequency i (i < rot/2), at [p * rot/2 + i], in double and
// float, for positions [0, positions).
struct RopeTable {
  FrequencyKey key;
  int rot;
  std::int64_t positions;
  std::vector<double> cos_d, sin_d;
  std::vector<float> cos_f, sin_f;
  template <class T> const T* cos() const {
    if constexpr (std::is_same_v<T, double>) return cos_d.data(); else return cos_f.data();
  }
  template <class T> const T* sin() const {
    if constexpr (std::is_same_v<T, double>) return sin_d.data(); else return sin_f.data();
  }
};

std::shared_ptr<const RopeTable> make_table(const FrequencyKey& key, int rot, std::int64_t positions) {
  auto t = std::make_shared<RopeTable>(RopeTable{key, rot, positions, {}, {}, {}, {}});
  const RopeOptions o = key.options();
  const std::int64_t half = rot / 2, n = positions * half;
  t->cos_d.resize(std::size_t(n)), t->sin_d.resize(std::size_t(n));
  t->cos_f.resize(std::size_t(n)), t->sin_f.resize(std::size_t(n));
  std::vector<double> freq(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i) freq[std::size_t(i)] = rope_frequency(o, int(i), rot);
  kernel::parallel(positions, 64, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t p = b; p < e; ++p)
      for (std::int64_t i = 0; i < half; ++i) {
        const double angle = double(p) * freq[std::size_t(i)];
        const std::size_t at = std::size_t(p * half + i);
        t->cos_d[at] = std::cos(angle), t->sin_d[at] = std::sin(angle);
        t->cos_f[at] = float(t->cos_d[at]), t->sin_f[at] = float(t->sin_d[at]);
      }
  });
  return t;
}

// The table for (frequencies, rot) covering positions [0, needed): built on first use and rebuilt twice
// as long when a later position exceeds it; callers keep the snapshot they got.
std::shared_ptr<const RopeTable> rope_table(const RopeOptions& o, int rot, std::int64_t needed) {
  static std::mutex mutex;
  static std::vector<std::shared_ptr<const RopeTable>> tables;
  const FrequencyKey key(o);
  const std::lock_guard<std::mutex> lock(mutex);
  for (auto& t : tables)
    if (t->key == key && t->rot == rot) {
      if (t->positions < needed) t = make_table(key, rot, std::min(kRopeMaxPosition, std::max(needed, 2 * t->positions)));
      return t;
    }
  tables.push_back(make_table(key, rot, std::max<std::int64_t>(needed, 256)));
  return tables.back();
}

struct RopeGeometry {
  std::int64_t rows, T, inner, d;  // rows of d features; token t of row r: (r / inner) % T
  int rot;
  bool interleaved;
  const std::int32_t* positions;   // null: 0..T-1
  std::int64_t position(std::int64_t r) const {
    const std::int64_t t = (r / inner) % T;
    return positions ? positions[t] : t;
  }
};

RopeGeometry rope_geometry(const OpArgs& a) {
  const RopeOptions o = a.attrs<RopeOp>();
  const TensorRef& x = a.in[0];
  RopeGeometry g;
  g.d = x.size(-1);
  g.rows = x.numel / std::max<std::int64_t>(g.d, 1);
  g.T = x.size(o.axis);
  g.inner = o.axis == -3 ? x.size(-2) : 1;
  g.rot = rope_dims(g.d, double(o.fraction));
  g.interleaved = o.interleaved;
  g.positions = a.n_in > 1 ? a.in[1].as<std::int32_t>() : nullptr;
  return g;
}

// The largest position plus one; a position outside [0, kRopeMaxPosition) is refused by name.
std::int64_t positions_needed(const RopeGeometry& g) {
  if (!g.positions) return g.T;
  std::int64_t top = 0;
  for (std::int64_t t = 0; t < g.T; ++t) {
    const std::int64_t p = g.positions[t];
    if (p < 0 || p >= kRopeMaxPosition)
      throw std::out_of_range("ctgrad: op rope: position " + std::to_string(p) + " of token " + std::to_string(t) + " is outside [0, " +
                              std::to_string(kRopeMaxPosition) + ")");
    top = std::max(top, p + 1);
  }
  return top;
}

// y = R(sign * angle) x per row (sign -1: the inverse rotation, the VJP); features past rot are
// copied (or added, `add`). Each pair is read before it is written, so y may be x.
template <class T>
void rotate(const RopeGeometry& g, const RopeTable& table, const T* x, T* y, T sign, bool add) {
  const std::int64_t half = g.rot / 2;
  const T* cos_t = table.cos<T>();
  const T* sin_t = table.sin<T>();
  kernel::parallel(g.rows, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(g.d, 1)), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const T* xr = x + r * g.d;
      T* yr = y + r * g.d;
      const T* c = cos_t + g.position(r) * half;
      const T* s = sin_t + g.position(r) * half;
      // Pair i: (a, b) = features (i, i + half), or (2i, 2i + 1) interleaved.
      const std::int64_t stride = g.interleaved ? 2 : 1, second = g.interleaved ? 1 : half;
      if (add) {
#pragma omp simd
        for (std::int64_t i = 0; i < half; ++i) {
          const T a = xr[i * stride], bb = xr[i * stride + second], si = sign * s[i];
          yr[i * stride] += a * c[i] - bb * si;
          yr[i * stride + second] += bb * c[i] + a * si;
        }
        for (std::int64_t j = g.rot; j < g.d; ++j) yr[j] += xr[j];
      } else {
#pragma omp simd
        for (std::int64_t i = 0; i < half; ++i) {
          const T a = xr[i * stride], bb = xr[i * stride + second], si = sign * s[i];
          yr[i * stride] = a * c[i] - bb * si;
          yr[i * stride + second] = bb * c[i] + a * si;
        }
        if (yr != xr)
          for (std::int64_t j = g.rot; j < g.d; ++j) yr[j] = xr[j];
      }
    }
  });
}

}  // namespace

template <class T>
void RopeOp::forward(const OpArgs& a) {
  const RopeGeometry g = rope_geometry(a);
  const auto table = rope_table(a.attrs<RopeOp>(), g.rot, positions_needed(g));
  rotate<T>(g, *table, a.in[0].as<T>(), a.out.as<T>(), T(1), false);
}

template <class T>
void RopeOp::vjp(const OpArgs& a) {
  T* gx = a.gin[0].as<T>();
  if (!gx) return;
  const RopeGeometry g = rope_geometry(a);
  const auto table = rope_table(a.attrs<RopeOp>(), g.rot, positions_needed(g));
  // A shared gradient (the output gradient's buffer) is rotated back in place.
  rotate<T>(g, *table, a.gout->as<T>(), gx, T(-1), !a.assign(0));
}

// From the definition: angles in double per element, no table.
template <class T>
void RopeOp::reference_forward(const OpArgs& a) {
  const RopeGeometry g = rope_geometry(a);
  const RopeOptions o = a.attrs<RopeOp>();
  positions_needed(g);
  const T* x = a.in[0].as<T>();
  std::vector<T> row(std::size_t(g.d));
  T* y = a.out.as<T>();
  for (std::int64_t r = 0; r < g.rows; ++r) {
    std::copy(x + r * g.d, x + (r + 1) * g.d, row.begin());
    for (std::int64_t i = 0; i < g.rot / 2; ++i) {
      const std::int64_t ia = g.interleaved ? 2 * i : i, ib = g.interleaved ? 2 * i + 1 : i + g.rot / 2;
      const double angle = double(g.position(r)) * rope_frequency(o, int(i), g.rot);
      const double va = double(row[std::size_t(ia)]), vb = double(row[std::size_t(ib)]);
      y[r * g.d + ia] = T(va * std::cos(angle) - vb * std::sin(angle));
      y[r * g.d + ib] = T(vb * std::cos(angle) + va * std::sin(angle));
    }
    for (std::int64_t j = g.rot; j < g.d; ++j) y[r * g.d + j] = row[std::size_t(j)];
  }
}

template void RopeOp::reference_forward<float>(const OpArgs&);
template void RopeOp::reference_forward<double>(const OpArgs&);
CTGRAD_INSTANTIATE_OP(RopeOp)

}  // namespace ctgrad
