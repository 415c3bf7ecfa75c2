// Dims and shapes as compile-time values.
//
// A Dim is coef * product(symbol^exp): 512 is static, Batch is a runtime symbol bound on the
// first run, Batch*Seq is what a reshape of [Batch, Seq, 512] to 2-D produces. Two dims are equal
// only if they are the same expression, so a Seq-versus-SeqKV mix-up is a compile error even
// though both are runtime values.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace ctgrad {

inline constexpr int kMaxRank = 6;
inline constexpr int kMaxSymbols = 6;

// Names of the runtime symbols, used in messages. 3..5 are free for user models.
inline constexpr std::array<std::string_view, kMaxSymbols> kSymbolNames{
    "Batch", "Seq", "SeqKV", "Sym3", "Sym4", "Sym5"};

struct Dim {
  std::int64_t coef = 1;
  std::array<std::uint8_t, kMaxSymbols> exp{};

  constexpr Dim() = default;
  constexpr Dim(std::int64_t c) : coef(c) {}  // NOLINT: a plain number is a static dim
  constexpr Dim(int c) : coef(c) {}           // NOLINT

  constexpr bool is_static() const {
    for (auto e : exp)
      if (e) return false;
    return true;
  }
  // Value once the symbols are bound.
  constexpr std::int64_t eval(const std::array<std::int64_t, kMaxSymbols>& sym) const {
    std::int64_t v = coef;
    for (int s = 0; s < kMaxSymbols; ++s)
      for (int e = 0; e < exp[s]; ++e) v *= sym[s];
    return v;
  }
  friend constexpr bool operator==(const Dim&, const Dim&) = default;
  friend constexpr Dim operator*(Dim a, const Dim& b) {
    a.coef *= b.coef;
    for (int s = 0; s < kMaxSymbols; ++s) a.exp[s] = std::uint8_t(a.exp[s] + b.exp[s]);
    return a;
  }
};

// A runtime symbol: a dim whose value is bound from the inputs when the program first runs.
constexpr Dim symbol(int id) {
  Dim d;
  d.exp[static_cast<std::size_t>(id)] = 1;
  return d;
}
inline constexpr Dim Batch = symbol(0);
inline constexpr Dim Seq = symbol(1);    // query / target length
inline constexpr Dim SeqKV = symbol(2);  // key / source length
inline constexpr Dim Sym3 = symbol(3);   // a third length (e.g. the source in a decoding step)
inline constexpr Dim Sym4 = symbol(4);
inline constexpr Dim Sym5 = symbol(5);

// A runtime symbol computed from the others instead of read from an input (Builder::derive):
// max(1, ceil(of * factor)), e.g. an expert's capacity Batch*Seq * 1.25 / experts.
struct DerivedSymbol {
  Dim of = 0;
  double factor = 0;  // 0: the symbol is not derived
  constexpr bool active() const { return factor > 0; }
  constexpr std::int64_t eval(const std::array<std::int64_t, kMaxSymbols>& sym) const {
    const double x = double(of.eval(sym)) * factor - 1e-9;  // (an exact product stays itself)
    const auto n = std::int64_t(x);
    return std::max<std::int64_t>(1, double(n) < x ? n + 1 : n);
  }
};

struct Shape {
  static constexpr Dim kOne{1};
  int rank = 0;
  std::array<Dim, kMaxRank> d{};

  constexpr Shape() = default;
  constexpr Shape(std::initializer_list<Dim> dims) {
    for (const Dim& x : dims) d[static_cast<std::size_t>(rank++)] = x;
  }
  // Reading past the rank gives a dim of 1: after a shape error (recorded, at compile time, while
  // the model function runs on) a layer reading a broken value's shape builds on, and the first
  // error is the one reported, not an out-of-bounds read.
  constexpr const Dim& operator[](int i) const { return i >= 0 && i < kMaxRank ? d[static_cast<std::size_t>(i)] : kOne; }
  constexpr Dim& operator[](int i) { return d[static_cast<std::size_t>(i)]; }
  // Negative index counts from the end, as in Python.
  constexpr const Dim& back(int i = 1) const { return (*this)[rank - i]; }
  constexpr Dim numel() const {
    Dim n = 1;
    for (int i = 0; i < rank; ++i) n = n * d[static_cast<std::size_t>(i)];
    return n;
  }
  constexpr bool is_static() const {
    for (int i = 0; i < rank; ++i)
      if (!d[static_cast<std::size_t>(i)].is_static()) return false;
    return true;
  }
  friend constexpr bool operator==(const Shape& a, const Shape& b) {
    if (a.rank != b.rank) return false;
    for (int i = 0; i < a.rank; ++i)
      if (!(a[i] == b[i])) return false;
    return true;
  }
};

// A fixed-capacity string usable in constant evaluation and as a template argument, so that a
// graph error can travel into a static_assert's instantiation context (its first line).
struct Msg {
  char s[200]{};
  int n = 0;

  constexpr Msg() = default;
  constexpr Msg(const char* p) { add(p); }  // NOLINT
  constexpr bool empty() const { return n == 0; }
  constexpr Msg& add(std::string_view p) {
    for (char c : p)
      if (n < int(sizeof(s)) - 1) s[n++] = c;
    return *this;
  }
  constexpr Msg& add(const char* p) { return add(std::string_view(p)); }
  constexpr Msg& add(std::int64_t v) {
    char buf[24]{};
    int k = 0;
    bool neg = v < 0;
    std::uint64_t u = neg ? std::uint64_t(-(v + 1)) + 1 : std::uint64_t(v);
    do {
      buf[k++] = char('0' + u % 10);
      u /= 10;
    } while (u);
    if (neg) buf[k++] = '-';
    while (k) add(std::string_view(&buf[--k], 1));
    return *this;
  }
  constexpr Msg& add(int v) { return add(std::int64_t(v)); }
  // A real number with up to 6 significant digits (0.1, 2.5e-07, -inf).
  constexpr Msg& add_number(double v) {
    if (v != v) return add("nan");
    if (v < 0) add("-"), v = -v;
    if (v > 1.7e308) return add("inf");
    if (v == 0) return add("0");
    int e10 = 0;
    while (v >= 10) v /= 10, ++e10;
    while (v < 1) v *= 10, --e10;
    std::int64_t digits = std::int64_t(v * 100000 + 0.5);  // 6 significant digits, d.ddddd
    if (digits >= 1000000) digits /= 10, ++e10;
    const bool sci = e10 >= 6 || e10 < -4;
    const int point = sci ? 0 : e10;  // digits before the decimal point, minus one
    char buf[32]{};
    int k = 0;
    if (point < 0) {
      buf[k++] = '0', buf[k++] = '.';
      for (int z = -1; z > point; --z) buf[k++] = '0';
    }
    for (int i = 0; i < 6; ++i) {
      std::int64_t div = 100000;
      for (int j = 0; j < i; ++j) div /= 10;
      buf[k++] = char('0' + (digits / div) % 10);
      if (i == point && i < 5) buf[k++] = '.';
    }
    {  // trim trailing zeros after a decimal point

      bool has_point = false;
      for (int i = 0; i < k; ++i) has_point |= buf[i] == '.';
      while (has_point && k > 0 && buf[k - 1] == '0') --k;
      if (k > 0 && buf[k - 1] == '.') --k;
    }
    add(std::string_view(buf, std::size_t(k)));
    if (sci) add("e").add(std::int64_t(e10));
    return *this;
  }

  constexpr Msg& add(const Dim& d) {
    bool first = true;
    if (d.coef != 1 || d.is_static()) {
      add(d.coef);
      first = false;
    }
    for (int s = 0; s < kMaxSymbols; ++s)
      for (int e = 0; e < d.exp[static_cast<std::size_t>(s)]; ++e) {
        if (!first) add("*");
        add(kSymbolNames[static_cast<std::size_t>(s)]);
        first = false;
      }
    return *this;
  }
  constexpr Msg& add(const Shape& sh) {
    add("[");
    for (int i = 0; i < sh.rank; ++i) {
      if (i) add(",");
      add(sh[i]);
    }
    return add("]");
  }
  constexpr Msg& add(const Msg& m) { return add(m.view()); }
  constexpr std::string_view view() const { return {s, static_cast<std::size_t>(n)}; }
};

}  // namespace ctgrad
