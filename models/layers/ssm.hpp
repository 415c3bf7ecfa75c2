// A minimal selective state-space layer (Mamba's S6, Gu & Dao 2023) on scan (graph/scan.hpp): a
// token mixer in place of attention, with a state of fixed size whatever the length.
//   [x, z] = x W_in                           (in_proj: d -> 2E, E = expand * d)
//   u = silu(x)
//   [dt_r, B, C] = u W_x                      (x_proj: E -> R + 2N, the selection: input-dependent)
//   dt = softplus(dt_r W_dt + b_dt)           (dt_proj: R -> E, steps starting in [1e-3, 1e-1])
//   h_t = exp(dt_t A) h_(t-1) + dt_t B_t u_t  per channel e and state n: h [Batch, E, N]
//   y_t = C_t h_t + D u_t                     A = -exp(A_log) [E, N] (decay rates in [1, N]), D [E]
//   out = (y * silu(z)) W_out                 (out_proj: E -> d)
// Decoding carries h from step to step (SsmInputs::state, SsmResult::state): O(1) a token.
// The projections run over all steps at once; the scan's body is the recurrence alone. Mamba's
// causal convolution before the SSM is left out (the minimal form). Parameter names are Mamba's
// (in_proj, x_proj, dt_proj, A_log, D, out_proj).
#pragma once
#include <optional>

#include <ctgrad/graph/scan.hpp>
#include <ctgrad/models/layers/linear.hpp>
#include <ctgrad/ops/elementwise.hpp>
#include <ctgrad/ops/index.hpp>
#include <ctgrad/ops/matmul.hpp>
#include <ctgrad/ops/shape.hpp>
#include <ctgrad/ops/unary.hpp>

namespace ctgrad::layers {

struct SelectiveSsmOptions {
  int state = 16;    // N
  int expand = 2;    // E = expand * d
  int width = 0;     // E when given (ssm_width_for: about attention's parameters)
  int dt_rank = 0;   // R (0: ceil(d / 16))
  bool bias = false;  // of in_proj and out_proj (Mamba: none)
  Init init = init::xavier_uniform();
  Init out_init = init::xavier_uniform();
  bool recompute = false;  // keep only the states between forward and backward
};

namespace detail {
// ln x for x > 0 in constant evaluation: 2 atanh((x - 1) / (x + 1)) by its series.
constexpr double const_log(double x) {
  const double y = (x - 1) / (x + 1);
  double sum = 0, term = y;
  for (int k = 0; k < 2000; ++k, term *= y * y) sum += term / (2 * k + 1);
  return 2 * sum;
}
}  // namespace detail

struct SsmInputs {
  std::optional<Value> mask;   // int32 [Batch, L]: padding keeps the state
  std::optional<Value> state;  // the state to start from [Batch, E, N] (decoding: the last step's); none: zeros
};
struct SsmResult {
  Value out;    // [Batch, L, d]
  Value state;  // after the last step [Batch, E, N]
};

// The width E of a layer with about the parameters of multi-head attention with biases (4d^2 + 4d):
// per channel of E, 3d (in_proj, out_proj) + 2R + 3N + 2 (x_proj, dt_proj, A_log, D).
constexpr int ssm_width_for(int d, int state, int dt_rank = 0) {
  const int R = dt_rank > 0 ? dt_rank : (d + 15) / 16;
  const int per = 3 * d + 2 * R + 3 * state + 2;
  return (4 * d * d + 4 * d + per / 2) / per;
}

// x [Batch, L, d] -> [Batch, L, d].
constexpr SsmResult selective_ssm(const Scope& s, Value x, const SelectiveSsmOptions& o = {}, const SsmInputs& in = {}) {
  const auto at = s.enter();
  const Shape xs = x.shape();
  const Dim d = xs.back(1);
  const int E = o.width > 0 ? o.width : int(d.coef) * o.expand, N = o.state, R = o.dt_rank > 0 ? o.dt_rank : int((d.coef + 15) / 16);
  if (xs.rank != 3 || !d.is_static() || o.state <= 0 || o.expand <= 0)
    s.b->fail(Msg("selective_ssm in '").add(s.prefix).add("': needs x [batch, L, d] with a static d and positive state and expand, got ").add(xs), s.loc);
  const Value xz = linear(s.scope("in_proj"), x, 2 * E, {.bias = o.bias, .init = o.init});
  const auto parts = split<2>(xz, -1);
  const Value u = silu(parts[0]), z = parts[1];                                       // [B, L, E]
  const Value dbc = linear(s.scope("x_proj"), u, R + 2 * N, {.bias = false, .init = o.init});
  const Value dt_r = slice(dbc, -1, 0, R), Bm = slice(dbc, -1, R, N), Cm = slice(dbc, -1, R + N, N);
  // Step sizes start between 1e-3 and 1e-1: the bias uniform between their softplus^-1 (Mamba draws
  // them log-uniform there).
  const Scope dtp = s.scope("dt_proj");
  const Value dt_w = dtp.param("weight", {E, R}, o.init);
  const Value dt_b = dtp.param("bias", {E}, init::uniform(-6.9, -2.25));
  const Value dt = softplus(ctgrad::linear(dt_r, dt_w, dt_b));
  // A = -exp(A_log): decay rates in [1, N] (Mamba's S4D-real init takes them 1..N per channel; drawn here).
  const Value a_log = s.param("A_log", {E, N}, init::uniform(0, detail::const_log(double(N))));
  const Value A = broadcast_to(neg(exp(a_log)), {xs[0], E, N});  // [B, E, N], once for every step
  const Value D = s.param("D", {E}, init::ones());
  // The body in ops of whole rows (a per-row scalar, equal shapes, batched products): no general
  // broadcast per step.
  ScanResult r = scan(s.scope("scan"), {.init = {in.state ? ScanInit(*in.state) : scan_zeros({xs[0], E, N})}, .xs = {u, dt, Bm, Cm}, .mask = in.mask,
                                        .recompute = o.recompute},
                      [&](const Scope&, const ScanStep& t) -> ScanStepResult {
                        const Value ut = t.x[0], dtt = t.x[1];                               // [B, E]
                        const Value dA = exp(A * reshape(dtt, {xs[0], E, 1}));              // [B, E, N]
                        const Value du = reshape(dtt * ut, {xs[0], E, 1});
                        const Value dBu = matmul(du, reshape(t.x[2], {xs[0], 1, N}));  // outer products
                        const Value decayed = dA * t.state[0];
                        const Value h = decayed + dBu;
                        const Value c_t = reshape(t.x[3], {xs[0], N, 1});
                        return {.state = {h}, .out = {reshape(matmul(h, c_t), {xs[0], E})}};  // y_t = h C_t
                      });
  const Value skip = u * D;
  const Value y_ssm = r.seq[0] + skip;
  const Value y = y_ssm * silu(z);
  return {linear(s.scope("out_proj"), y, d, {.bias = o.bias, .init = o.out_init}), r.last[0]};
}

}  // namespace ctgrad::layers
