// A mixture-of-experts feed-forward (Switch Transformer, GShard, Mixtral): a softmax router picks
// top_k of `experts` SwiGLU experts per token, each expert computes only the tokens routed to it,
// and the token's output is the gate-weighted sum of its experts' outputs.
//   x [..., d] -> tokens [N, d]                    N: the product of x's leading dims
//   p = softmax(gate(tokens))                      [N, E]   "<scope>.gate.weight" [E, d]
//   (g, e) = top_k(p)                              [N, k]   gates renormalised to sum 1 when k > 1
//   sources = expert_sources(e, E, C)              [E*C]    the token in each expert's row, or -1
//   h = experts(gather_rows(tokens, sources))      [E, C, d] batched: "<scope>.experts.gate_proj"
//                                                            [E, f, d], up_proj [E, f, d], down_proj [E, d, f]
//   y = sum_j g_j * gather_rows(h, slot_j)         [N, d]   a dropped choice adds 0
// Capacity: C = ceil(N k capacity_factor / E) rows per expert, a runtime symbol (Builder::derive)
// computed from the inputs' Batch and Seq. Choices beyond an expert's capacity (first choices
// before second ones, in token order) are dropped: the token keeps its residual path only.
// The auxiliary terms, scalars for the caller to weight into the loss and log:
//   balance  Switch's load-balancing loss E sum_e f_e P_e (f_e: the fraction of tokens whose first
//            choice is e, P_e: the mean router probability of e; 1 when uniform)
//   z        the router z-loss mean(logsumexp(logits)^2) (ST-MoE)
//   dropped  the fraction of the N k choices dropped (no gradient)
#pragma once
#include <string_view>

#include <ctgrad/models/layers/linear.hpp>
#include <ctgrad/models/layers/options.hpp>
#include <ctgrad/ops/reduce.hpp>
#include <ctgrad/ops/select.hpp>
#include <ctgrad/ops/shape.hpp>
#include <ctgrad/ops/softmax.hpp>
#include <ctgrad/ops/unary.hpp>

namespace ctgrad::layers {

struct MoeNames {
  std::string_view gate = "gate", experts = "experts", w_gate = "gate_proj", w_up = "up_proj", w_down = "down_proj";
};

struct MoeOptions {
  int experts = 4;
  int top_k = 2;
  double capacity_factor = 1.25;  // an expert's rows: N top_k / experts times this
  int d_ff = 2048;                // each expert's SwiGLU width
  Init init = init::normal(0.02);      // router and input projections
  Init out_init = init::normal(0.02);  // the experts' down projections
  Dim capacity_symbol = Sym3;     // the runtime symbol the capacity is (every MoE layer of a graph shares it)
  MoeNames names{};
};

struct MoeResult {
  Value y;                      // x's shape
  Value balance, z, dropped;    // scalars
};

constexpr MoeResult moe_feed_forward(const Scope& s, Value x, MoeOptions o = {}) {
  const auto at = s.enter();
  const Shape xs = x.shape();
  const Dim d = xs.back(1);
  Dim n = 1;
  for (int i = 0; i + 1 < xs.rank; ++i) n = n * xs[i];
  const int E = o.experts, k = o.top_k;
  if (k < 1 || k > E) s.b->fail(Msg("moe '").add(s.prefix).add("': top_k must be in [1, experts = ").add(E).add("], got ").add(k), s.loc);
  const Dim cap = s.b->derive(o.capacity_symbol, n, double(k) * o.capacity_factor / double(E), s.loc);
  Value tokens = reshape(x, {n, d});                                                                 // [N, d]
  Value logits = linear(s.scope(o.names.gate), tokens, E, {.bias = false, .init = o.init});         // [N, E]
  Value probs = softmax(logits);
  const TopK top = top_k(probs, k);                                                                   // [N, k]
  Value gates = k == 1 ? top.values : top.values / sum(top.values, -1, {.keepdim = true});
  Value sources = expert_sources(top.indices, E, cap);                                               // [E*C]
  Value slots = expert_slots(top.indices, sources, E);                                               // [N, k]
  // The experts, batched: each sees its C rows (zero rows where it has fewer tokens).
  const Scope ex = s.scope(o.names.experts);
  Value w_gate = ex.param(o.names.w_gate, {E, o.d_ff, d}, o.init), w_up = ex.param(o.names.w_up, {E, o.d_ff, d}, o.init);
  Value w_down = ex.param(o.names.w_down, {E, d, o.d_ff}, o.out_init);
  Value in = reshape(gather_rows(tokens, sources), {E, cap, d});                                    // [E, C, d]
  // (One op per statement where two would make nodes: the order of a call's arguments is the
  // compiler's, and a graph frozen at run time must be the one frozen at compile time.)
  const Value gate_act = silu(matmul(in, w_gate, {.trans_b = true}));
  Value h = mul(gate_act, matmul(in, w_up, {.trans_b = true}));  // [E, C, f]
  Value out = reshape(matmul(h, w_down, {.trans_b = true}), {Dim(E) * cap, d});                     // [E*C, d]
  Value picked = gather_rows(out, reshape(slots, {n * k}));                                          // [N*k, d]
  Value y = picked;
  if (k == 1) {
    y = mul(picked, gates);
  } else {
    const Value per_choice = reshape(picked, {n, k, d});
    y = sum(mul(per_choice, reshape(gates, {n, k, 1})), 1);
  }
  // Load balance: f from the first choices (constant), P from the router's probabilities.
  Value first = reshape(slice(top.indices, 1, 0, 1), {n});
  Value f = mean(one_hot(first, E), 0), p = mean(probs, 0);                                          // [E]
  Value balance = scale(sum(mul(f, p)), double(E));
  const Value top_logit = slice(logits, 1, 0, 1);
  Value lse = top_logit - slice(log_softmax(logits), 1, 0, 1);                                       // [N, 1]
  return {reshape(y, xs), balance, mean(mul(lse, lse)), mean(negative_mask(slots))};
}

}  // namespace ctgrad::layers
