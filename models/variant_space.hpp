// Architecture variants of a model preset, compiled ahead of time for ablation studies.
//
// A model's architecture choices are fields of its compile-time config (GptConfig::norm, ::act, ...).
// A variant space names them as keys with values (the preset's value first):
//
//   constexpr VariantSpace<GptConfig, 2> space{{{
//       {"norm", {"pre", "post"}, [](GptConfig c, std::string_view v) { c.norm = v == "post" ? Norm::post : Norm::pre; return c; }},
//       {"act", {"gelu_tanh", "relu"}, [](GptConfig c, std::string_view v) { c.act = parse_act(v); return c; }}}},
//       /*order=*/2};
//
// and every combination of the keys' values that changes at most `order` keys from the preset is a
// variant (order = the number of keys: the whole cartesian product). The table of variants is a
// constexpr value (variant_table), so the configs are known to the compiler and each becomes its
// own compile-time graph; a program looks one up by the keys' values at run time (find_variant).
// Graphs stay flat values, the product is a constexpr loop, not a type list: no template depth
// grows with the number of keys or variants.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ctgrad/models/layers/options.hpp>

namespace ctgrad::models {

inline constexpr int kMaxVariantValues = 8;

template <class C>
struct VariantAxis {
  std::string_view key;
  std::array<std::string_view, kMaxVariantValues> values{};  // values[0]: the preset's own
  C (*apply)(C, std::string_view) = nullptr;                 // the config with this key set to a value
  bool alone = false;  // a variant changing this key changes no other (a key whose combinations a study does not need)

  constexpr int size() const {
    int n = 0;
    while (n < kMaxVariantValues && !values[std::size_t(n)].empty()) ++n;
    return n;
  }
};

template <class C, std::size_t A>
struct VariantSpace {
  std::array<VariantAxis<C>, A> axes{};
  int order = 1;  // variants change at most this many keys from the preset
  static constexpr std::size_t keys = A;
};

// One variant: the value index of every key (0: the preset's).
template <std::size_t A>
using VariantIndex = std::array<std::int8_t, A>;

// How many keys a variant changes from the preset.
template <std::size_t A>
constexpr int changed_keys(const VariantIndex<A>& v) {
  int n = 0;
  for (auto i : v) n += i != 0;
  return n;
}

// Whether a variant is in the space: at most `order` keys changed, and a key marked `alone` only by itself.
template <class C, std::size_t A>
constexpr bool in_space(const VariantSpace<C, A>& s, const VariantIndex<A>& v) {
  const int changed = changed_keys(v);
  if (changed > s.order) return false;
  for (std::size_t k = 0; k < A; ++k)
    if (v[k] != 0 && s.axes[k].alone && changed > 1) return false;
  return true;
}

namespace detail {
// Calls f(index) for every index of the cartesian product with at most `order` keys changed,
// the preset first, then in order of the product (the last key fastest); a key marked `alone`
// changes only by itself.
template <class C, std::size_t A, class F>
constexpr void for_each_variant(const VariantSpace<C, A>& s, F f) {
  VariantIndex<A> at{};
  for (;;) {
    if (in_space(s, at)) f(at);
    std::size_t k = A;
    for (; k-- > 0;) {
      if (++at[k] < s.axes[k].size()) break;
      at[k] = 0;
    }
    if (k == std::size_t(-1)) return;
  }
}
}  // namespace detail

template <class C, std::size_t A>
constexpr int variant_count(const VariantSpace<C, A>& s) {
  int n = 0;
  detail::for_each_variant(s, [&](const VariantIndex<A>&) { ++n; });
  return n;
}

// Every variant's index, the preset's (all zeros) first.
template <const auto& S>
constexpr auto variant_table() {
  constexpr std::size_t A = std::remove_cvref_t<decltype(S)>::keys;
  std::array<VariantIndex<A>, std::size_t(variant_count(S))> t{};
  std::size_t n = 0;
  detail::for_each_variant(S, [&](const VariantIndex<A>& v) { t[n++] = v; });
  return t;
}

template <const auto& S>
inline constexpr auto kVariantTable = variant_table<S>();

// The config of a variant of `preset`.
template <class C, std::size_t A>
constexpr C variant_config(C preset, const VariantSpace<C, A>& s, const VariantIndex<A>& v) {
  for (std::size_t k = 0; k < A; ++k) preset = s.axes[k].apply(preset, s.axes[k].values[std::size_t(v[k])]);
  return preset;
}

// The variant whose keys have these values (value(key) gives a key's value as configured), or -1.
template <class C, std::size_t A, std::size_t N, class Value>
int find_variant(const VariantSpace<C, A>& s, const std::array<VariantIndex<A>, N>& table, Value value) {
  VariantIndex<A> want{};
  for (std::size_t k = 0; k < A; ++k) {
    const std::string v = value(std::string(s.axes[k].key));
    int i = 0;
    while (i < s.axes[k].size() && s.axes[k].values[std::size_t(i)] != v) ++i;
    if (i == s.axes[k].size()) return -1;
    want[k] = std::int8_t(i);
  }
  for (std::size_t i = 0; i < N; ++i)
    if (table[i] == want) return int(i);
  return -1;
}

// What each variant of a preset makes: Make<config>::make for every variant's config, in the
// order of variant_table (the preset first), e.g. a function making the variant's program:
//   template <Arch A> struct Variant { static constexpr auto g = freeze<model<A>>();
//                                    static std::unique_ptr<Executor<float>> make(const Options& o) { ... } };
//   constexpr auto makers = variant_makers<Arch{}, kSpace, Variant>();   // makers[i](options)
template <auto Preset, const auto& Space, template <auto> class Make>
constexpr auto variant_makers() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return std::array{&Make<variant_config(Preset, Space, kVariantTable<Space>[I])>::make...};
  }(std::make_index_sequence<kVariantTable<Space>.size()>());
}

// A number written in a value ("8"), at compile time.
constexpr int parse_int(std::string_view v) {
  int n = 0;
  for (char c : v) n = n * 10 + (c - '0');
  return n;
}

namespace detail {
template <std::size_t N>
constexpr std::array<std::string_view, kMaxVariantValues> preset_first(std::string_view preset, const std::array<std::string_view, N>& all) {
  std::array<std::string_view, kMaxVariantValues> v{};
  v[0] = preset;
  std::size_t n = 1;
  for (auto a : all) {
    bool seen = false;
    for (std::size_t i = 0; i < n; ++i) seen = seen || v[i] == a;
    if (!seen) v[n++] = a;
  }
  return v;
}
inline constexpr std::array<std::string_view, 8> kCounts{"1", "2", "4", "8", "16", "32", "64", "128"};
constexpr std::string_view count_name(int n) {
  for (std::size_t i = 0; i < kCounts.size(); ++i)
    if (n == 1 << i) return kCounts[i];
  return {};
}
}  // namespace detail

// The keys every family shares, for a config C whose member `arch` is a layers::Arch; the
// preset's value first.
template <class C>
constexpr VariantAxis<C> norm_axis(const layers::Arch& a) {
  return {"norm", detail::preset_first(name(a.norm), std::array<std::string_view, 2>{"pre", "post"}),
          [](C c, std::string_view v) {
            c.arch.norm = layers::parse_norm(v);
            return c;
          }};
}
template <class C>
constexpr VariantAxis<C> norm_kind_axis(const layers::Arch& a) {
  return {"norm_kind", detail::preset_first(name(a.norm_kind), std::array<std::string_view, 2>{"layer", "rms"}),
          [](C c, std::string_view v) {
            c.arch.norm_kind = layers::parse_norm_kind(v);
            return c;
          }};
}
template <class C>
constexpr VariantAxis<C> act_axis(const layers::Arch& a) {
  return {"act", detail::preset_first(name(a.act), std::array<std::string_view, 4>{"relu", "gelu", "gelu_tanh", "swiglu"}),
          [](C c, std::string_view v) {
            c.arch.act = layers::parse_act(v);
            return c;
          }};
}
template <class C>
constexpr VariantAxis<C> pos_axis(const layers::Arch& a, bool with_rope = false) {
  const std::array<std::string_view, 4> all{"learned", "sinusoidal", "none", with_rope ? "rope" : "none"};
  return {"pos", detail::preset_first(name(a.pos), all),
          [](C c, std::string_view v) {
            c.arch.pos = layers::parse_pos(v);
            return c;
          }};
}
template <class C>
constexpr VariantAxis<C> tie_axis(const layers::Arch& a) {
  return {"tie_embeddings", detail::preset_first(a.tie ? "true" : "false", std::array<std::string_view, 2>{"true", "false"}),
          [](C c, std::string_view v) {
            c.arch.tie = v == "true";
            return c;
          }};
}
// Heads at a fixed d_model: the preset's, one, and twice the preset's (a power of two).
template <class C>
constexpr VariantAxis<C> heads_axis(int preset, C (*apply)(C, std::string_view)) {
  return {"heads", detail::preset_first(detail::count_name(preset), std::array<std::string_view, 2>{"1", detail::count_name(2 * preset)}), apply};
}

// "norm=post, act=relu" for the keys a variant changes ("the preset" for none).
template <class C, std::size_t A>
std::string describe_variant(const VariantSpace<C, A>& s, const VariantIndex<A>& v) {
  std::string out;
  for (std::size_t k = 0; k < A; ++k)
    if (v[k]) out += (out.empty() ? "" : ", ") + std::string(s.axes[k].key) + "=" + std::string(s.axes[k].values[std::size_t(v[k])]);
  return out.empty() ? "the preset" : out;
}

}  // namespace ctgrad::models
