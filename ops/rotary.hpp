// Rotary position embedding (RoPE, Su et al. 2021): each pair of a head's first `rot` features is
// rotated by angle p * theta^(-2i / rot), p the token's position, i the pair's index. Two
// conventions pair the features: half-split (Llama, GPT-NeoX, Hugging Face's rotate_half: feature
// i with i + rot/2) and interleaved (GPT-J, Meta's original Llama code: 2i with 2i + 1). A partial
// rotary fraction rotates the first rot = fraction x d features (rounded down to even) and passes
// the rest through (GPT-NeoX's rotary_pct).
//   rope(x[, positions]): x [..., T, H, d] (a projection reshaped to heads, seq_first); with
//   `axis` = -2, x [..., H, T, d]. Positions are 0..T-1, or positions int32 [T] (decoding with a
//   key/value cache: the new tokens' absolute positions). The gradient is the inverse rotation.
// Frequency scaling (Hugging Face's rope_scaling, for contexts beyond the pretraining one): linear
// divides every frequency by `factor` (positions interpolated); llama3 divides the low frequencies
// (wavelength above original_context / low_freq_factor) by it, keeps the high ones (below
// original_context / high_freq_factor) and blends those between (Llama 3.1's rope_type "llama3").
// cos and sin come from one table per (theta, rot, scaling) shared by every graph of the process,
// grown (doubling) when a position past its end first appears: nothing is recomputed per step.
#pragma once
#include <ctgrad/ops/common.hpp>
#include <ctgrad/ops/rope_scaling.hpp>

namespace ctgrad {

struct RopeOptions {
  Real theta = 10000;       // the base
  Real fraction = 1;        // of the head dim rotated
  bool interleaved = false;  // pairs (2i, 2i+1) instead of (i, i + rot/2)
  int axis = -3;             // x's position axis: -3 for [..., T, H, d], -2 for [..., H, T, d]
  RopeScaling scaling = RopeScaling::none;
  Real factor = 1;                                 // linear, llama3: frequencies divided by it
  Real low_freq_factor = 1, high_freq_factor = 4;  // llama3
  Real original_context = 8192;                    // llama3: the pretraining context
};

// The frequency of pair i of `rot` rotated features: theta^(-2i / rot), scaled as `o` says.
double rope_frequency(const RopeOptions& o, int i, int rot);

// Features rotated: fraction x d, rounded down to even.
constexpr int rope_dims(std::int64_t d, double fraction) { return int(double(d) * fraction) / 2 * 2; }

// The largest position rope() takes (positions are int32; its table holds cos and sin up to the
// largest position seen).
inline constexpr std::int64_t kRopeMaxPosition = std::int64_t(1) << 24;

struct RopeOp {
  using Options = RopeOptions;
  static constexpr const char* name = "rope";
  static constexpr int arity = -1;  // x[, positions]
  static constexpr unsigned saves = kSaveInput(1);  // the positions
  static constexpr unsigned assigns = kSaveInput(0);
  static constexpr unsigned shares_grad = kSaveInput(0);  // a rotation pair is read before it is written
  static constexpr bool in_place = true;
  static constexpr ShapeResult shape(const ShapeCtx& c, const RopeOptions& o) {
    if (c.n_in > 2) return ShapeResult::fail("takes x and optional positions");
    const Shape& x = c.in[0];
    if (c.dtype[0] != DType::real) return ShapeResult::fail("x must be real");
    if (o.axis != -3 && o.axis != -2) return ShapeResult::fail(Msg("axis must be -3 ([..., T, H, d]) or -2 ([..., H, T, d]), got ").add(o.axis));
    if (x.rank < -o.axis) return ShapeResult::fail(Msg("x must have rank >= ").add(-o.axis).add(", got ").add(x));
    const Dim d = x.back(1);
    if (!d.is_static()) return ShapeResult::fail(Msg("the head dim must be static, got ").add(x));
    if (!(o.theta > 0)) return ShapeResult::fail(Msg("theta must be positive, got ").add_number(o.theta));
    if (!(o.fraction > 0 && o.fraction <= 1)) return ShapeResult::fail(Msg("fraction must be in (0, 1], got ").add_number(o.fraction));
    if (o.scaling != RopeScaling::none && !(o.factor >= 1)) return ShapeResult::fail(Msg("the scaling factor must be >= 1, got ").add_number(o.factor));
    if (o.scaling == RopeScaling::llama3 && !(o.low_freq_factor > 0 && o.high_freq_factor > o.low_freq_factor && o.original_context > 0))
      return ShapeResult::fail(Msg("llama3 scaling needs 0 < low_freq_factor < high_freq_factor and original_context > 0, got ")
                                   .add_number(o.low_freq_factor).add(", ").add_number(o.high_freq_factor).add(", ").add_number(o.original_context));
    if (rope_dims(d.coef, o.fraction) < 2)
      return ShapeResult::fail(Msg("rotates no pair: head dim ").add(d).add(" x fraction ").add_number(o.fraction).add(" < 2"));
    if (c.n_in == 2) {
      const Shape& p = c.in[1];
      if (c.dtype[1] != DType::index || p.rank != 1 || !(p[0] == x[x.rank + o.axis]))
        return ShapeResult::fail(Msg("positions must be int32 [").add(x[x.rank + o.axis]).add("] (one per token), got ").add(p));
    }
    ShapeResult r;
    r.shape = x;
    return r;
  }
  template <class T> static void forward(const OpArgs&);
  template <class T> static void vjp(const OpArgs&);
  template <class T> static void reference_forward(const OpArgs&);
};

constexpr Value rope(Value x, RopeOptions o = {}, Loc loc = Loc::current()) { return ops::apply<RopeOp>({x}, o, loc); }
constexpr Value rope(Value x, Value positions, RopeOptions o = {}, Loc loc = Loc::current()) {
  return ops::apply<RopeOp>({x, positions}, o, loc);
}

}  // namespace ctgrad
