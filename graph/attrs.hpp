// Op attributes. An op's options struct is its attribute record: `matmul(a, b, {.trans_b = true})`
// stores a MatmulOptions in the node, and the op reads it back typed, `a.attrs<MatmulOp>()`.
//
// The node keeps the record as a row of 8-byte words, the struct's fields flattened in declaration
// order at compile time (a byte copy would carry padding, which constant evaluation refuses). Any
// aggregate of these field types works, nested aggregates included, with no code per op:
//   bool, integers, enums, double        1 word
//   Real (a number or a hyperparameter)  2 words: the value, the hyperparameter's node id + 1
//   Dim                                  2 words;  Shape: 1 + 2 per dim
// A Real that names a hyperparameter (Scope::hyper) is resolved by the Program to its current
// value before the op sees it, so an op reads every Real as a plain number.
#pragma once
#include <array>
#include <bit>
#include <cstdint>
#include <type_traits>

#include <ctgrad/graph/dim.hpp>

namespace ctgrad {

// A real-valued option that may be a runtime hyperparameter: a constant, or a named value of the
// graph (Scope::hyper) that Program::set_hyper changes between steps without a rebuild.
struct Real {
  double value = 0;
  int hyper = -1;  // node id of the hyperparameter; -1: a constant

  constexpr Real() = default;
  constexpr Real(double v) : value(v) {}  // NOLINT: a number is a constant Real
  constexpr Real(int v) : value(v) {}     // NOLINT
  constexpr operator double() const { return value; }  // NOLINT: ops read Reals as numbers
  constexpr bool is_hyper() const { return hyper >= 0; }
};

inline constexpr int kAttrWords = 16;

struct AttrWords {
  std::array<std::uint64_t, kAttrWords> w{};
  std::uint16_t real_at = 0;  // bit k: w[k] is a Real's value and w[k + 1] its hyperparameter id + 1
  std::uint8_t n = 0;         // words used
  bool overflow = false;      // the record needs more than kAttrWords words
};

// An op without options.
struct NoOptions {};

namespace detail::attr {

struct AnyField {
  template <class T>
  constexpr operator T() const noexcept;  // NOLINT: only named in unevaluated contexts
};

// Number of fields of an aggregate: the longest brace list of AnyField it accepts.
template <class T, class... F>
consteval int field_count() {
  if constexpr (requires { T{F{}..., AnyField{}}; })
    return field_count<T, F..., AnyField>();
  else
    return int(sizeof...(F));
}

// Calls f on each field of the aggregate t, in declaration order.
template <class T, class Fn>
constexpr void for_each_field(T& t, Fn&& f) {
  constexpr int n = field_count<std::remove_cv_t<T>>();
  static_assert(n <= 12, "ctgrad: an options struct has at most 12 fields (group some into a nested struct)");
  if constexpr (n == 1) {
    auto& [a] = t;
    f(a);
  } else if constexpr (n == 2) {
    auto& [a, b] = t;
    f(a), f(b);
  } else if constexpr (n == 3) {
    auto& [a, b, c] = t;
    f(a), f(b), f(c);
  } else if constexpr (n == 4) {
    auto& [a, b, c, d] = t;
    f(a), f(b), f(c), f(d);
  } else if constexpr (n == 5) {
    auto& [a, b, c, d, e] = t;
    f(a), f(b), f(c), f(d), f(e);
  } else if constexpr (n == 6) {
    auto& [a, b, c, d, e, g] = t;
    f(a), f(b), f(c), f(d), f(e), f(g);
  } else if constexpr (n == 7) {
    auto& [a, b, c, d, e, g, h] = t;
    f(a), f(b), f(c), f(d), f(e), f(g), f(h);
  } else if constexpr (n == 8) {
    auto& [a, b, c, d, e, g, h, i] = t;
    f(a), f(b), f(c), f(d), f(e), f(g), f(h), f(i);
  } else if constexpr (n == 9) {
    auto& [a, b, c, d, e, g, h, i, j] = t;
    f(a), f(b), f(c), f(d), f(e), f(g), f(h), f(i), f(j);
  } else if constexpr (n == 10) {
    auto& [a, b, c, d, e, g, h, i, j, k] = t;
    f(a), f(b), f(c), f(d), f(e), f(g), f(h), f(i), f(j), f(k);
  } else if constexpr (n == 11) {
    auto& [a, b, c, d, e, g, h, i, j, k, l] = t;
    f(a), f(b), f(c), f(d), f(e), f(g), f(h), f(i), f(j), f(k), f(l);
  } else if constexpr (n == 12) {
    auto& [a, b, c, d, e, g, h, i, j, k, l, m] = t;
    f(a), f(b), f(c), f(d), f(e), f(g), f(h), f(i), f(j), f(k), f(l), f(m);
  }
}

template <class V>
struct is_std_array : std::false_type {};
template <class V, std::size_t N>
struct is_std_array<std::array<V, N>> : std::true_type {};

constexpr std::uint64_t pack_exp(const Dim& d) {
  std::uint64_t e = 0;
  for (int s = 0; s < kMaxSymbols; ++s) e |= std::uint64_t(d.exp[std::size_t(s)]) << (8 * s);
  return e;
}
constexpr void unpack_exp(Dim& d, std::uint64_t e) {
  for (int s = 0; s < kMaxSymbols; ++s) d.exp[std::size_t(s)] = std::uint8_t(e >> (8 * s));
}

struct Writer {
  AttrWords out;
  constexpr void word(std::uint64_t v) {
    if (out.n == kAttrWords) {
      out.overflow = true;
      return;
    }
    out.w[out.n++] = v;
  }
  template <class V>
  constexpr void put(const V& v) {
    if constexpr (std::is_same_v<V, Real>) {
      if (out.n + 1 < kAttrWords) out.real_at = std::uint16_t(out.real_at | (1u << out.n));
      word(std::bit_cast<std::uint64_t>(v.value));
      word(std::uint64_t(std::int64_t(v.hyper) + 1));
    } else if constexpr (std::is_same_v<V, bool> || std::is_integral_v<V>) {
      word(std::uint64_t(std::int64_t(v)));
    } else if constexpr (std::is_enum_v<V>) {
      word(std::uint64_t(std::int64_t(v)));
    } else if constexpr (std::is_floating_point_v<V>) {
      word(std::bit_cast<std::uint64_t>(double(v)));
    } else if constexpr (std::is_same_v<V, Dim>) {
      word(std::uint64_t(v.coef));
      word(pack_exp(v));
    } else if constexpr (std::is_same_v<V, Shape>) {
      word(std::uint64_t(v.rank));
      for (int i = 0; i < v.rank; ++i) put(v[i]);
    } else if constexpr (is_std_array<V>::value) {
      for (const auto& e : v) put(e);
    } else {
      static_assert(std::is_aggregate_v<V>, "ctgrad: an option field must be a number, enum, Real, Dim, Shape or an aggregate of these");
      for_each_field(v, [&](const auto& f) { put(f); });
    }
  }
};

struct Reader {
  const AttrWords& in;
  int at = 0;
  constexpr std::uint64_t word() { return at < in.n ? in.w[std::size_t(at++)] : 0; }
  template <class V>
  constexpr void get(V& v) {
    if constexpr (std::is_same_v<V, Real>) {
      v.value = std::bit_cast<double>(word());
      v.hyper = int(std::int64_t(word())) - 1;
    } else if constexpr (std::is_same_v<V, bool>) {
      v = word() != 0;
    } else if constexpr (std::is_integral_v<V> || std::is_enum_v<V>) {
      v = V(std::int64_t(word()));
    } else if constexpr (std::is_floating_point_v<V>) {
      v = V(std::bit_cast<double>(word()));
    } else if constexpr (std::is_same_v<V, Dim>) {
      v.coef = std::int64_t(word());
      unpack_exp(v, word());
    } else if constexpr (std::is_same_v<V, Shape>) {
      v = Shape{};
      v.rank = int(word());
      for (int i = 0; i < v.rank && i < kMaxRank; ++i) get(v[i]);
    } else if constexpr (is_std_array<V>::value) {
      for (auto& e : v) get(e);
    } else {

      for_each_field(v, [&](auto& f) { get(f); });
    }
  }
};

}  // namespace detail::attr

template <class O>
constexpr AttrWords encode_attrs(const O& o) {
  detail::attr::Writer w;
  if constexpr (!std::is_same_v<O, NoOptions>) w.put(o);
  return w.out;
}

template <class O>
constexpr O decode_attrs(const AttrWords& words) {
  O o{};
  if constexpr (!std::is_same_v<O, NoOptions>) {
    detail::attr::Reader r{words};
    r.get(o);
  }
  return o;
}

// The options type of an op: Op::Options, or NoOptions.
template <class Op>
struct options_of {
  using type = NoOptions;
};
template <class Op>
  requires requires { typename Op::Options; }
struct options_of<Op> {
  using type = typename Op::Options;
};
template <class Op>
using options_t = typename options_of<Op>::type;

}  // namespace ctgrad
