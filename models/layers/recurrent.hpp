// Recurrent layers on scan (graph/scan.hpp), with PyTorch's gate layouts and parameter names so
// that weights map one to one: GRU gates (r, z, n), LSTM gates (i, f, g, o), weight_ih [G*H, in],
// weight_hh [G*H, H], bias_ih and bias_hh [G*H], all initialised U(-1/sqrt(H), 1/sqrt(H)).
//   gru_step / lstm_step   one step, given the input's projection (for a body of your own)
//   gru_cell / lstm_cell   one step with its parameters (nn.GRUCell / nn.LSTMCell)
//   gru / lstm             layers over sequences [Batch, L, in]: several, bidirectional, masked
//                          (nn.GRU / nn.LSTM with batch_first and packed sequences)
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ctgrad/graph/scan.hpp>
#include <ctgrad/ops/elementwise.hpp>
#include <ctgrad/ops/index.hpp>
#include <ctgrad/ops/linear.hpp>
#include <ctgrad/ops/matmul.hpp>
#include <ctgrad/ops/random.hpp>
#include <ctgrad/ops/unary.hpp>

namespace ctgrad::layers {

// A recurrent layer's parameters (bias may be absent).
struct RecurrentWeights {
  Value w_ih, w_hh;
  std::optional<Value> b_ih, b_hh;
};

// "<scope>.weight_ih<suffix>" etc.: PyTorch's names (suffix "_l0", "_l1_reverse"; "" for a cell).
constexpr RecurrentWeights recurrent_weights(const Scope& s, int gates, Dim in, int hidden, bool bias, std::string_view suffix = "") {
  const auto at = s.enter();
  const Real k = 1 / ops::const_sqrt(double(hidden));
  auto name = [&](std::string_view base) {
    std::string n(base);
    n += suffix;
    return n;
  };
  RecurrentWeights w{s.param(name("weight_ih"), {gates * hidden, in}, init::uniform(-k, k)),
                     s.param(name("weight_hh"), {gates * hidden, hidden}, init::uniform(-k, k))};
  if (bias) {
    w.b_ih = s.param(name("bias_ih"), {gates * hidden}, init::uniform(-k, k));
    w.b_hh = s.param(name("bias_hh"), {gates * hidden}, init::uniform(-k, k));
  }
  return w;
}

// x [..., in] -> x W^T (+ b)
constexpr Value project(Value x, Value w, const std::optional<Value>& b) {
  return b ? linear(x, w, *b) : matmul(x, w, {.trans_b = true});
}
constexpr Value input_gates(Value x, const RecurrentWeights& w) { return project(x, w.w_ih, w.b_ih); }

// One GRU step from gx = x W_ih^T + b_ih [Batch, 3H] and h [Batch, H]:
//   r = s(gx_r + gh_r), z = s(gx_z + gh_z), n = tanh(gx_n + r * gh_n), h' = n + z * (h - n)
// with gh = h W_hh^T + b_hh (PyTorch's: the reset gate scales the hidden projection, bias included).
constexpr Value gru_step(Value gx, Value h, const RecurrentWeights& w) {
  const auto x3 = split<3>(gx, -1), h3 = split<3>(project(h, w.w_hh, w.b_hh), -1);
  const Value r = sigmoid(x3[0] + h3[0]), z = sigmoid(x3[1] + h3[1]);
  const Value n = tanh(x3[2] + r * h3[2]);
  return n + z * (h - n);
}

struct LstmState {
  Value h, c;
};
// One LSTM step from gx = x W_ih^T + b_ih [Batch, 4H]: i, f, o = s(.), g = tanh(.),
// c' = f * c + i * g, h' = o * tanh(c').
constexpr LstmState lstm_step(Value gx, LstmState state, const RecurrentWeights& w) {
  const auto g4 = split<4>(gx + project(state.h, w.w_hh, w.b_hh), -1);
  const Value i = sigmoid(g4[0]), f = sigmoid(g4[1]), g = tanh(g4[2]), o = sigmoid(g4[3]);
  const Value c = f * state.c + i * g;
  return {o * tanh(c), c};
}

struct RecurrentOptions {
  int hidden = 0;
  int layers = 1;
  bool bidirectional = false;
  bool bias = true;
  Real dropout = 0;        // on each layer's outputs but the last's, in training (PyTorch's)
  bool recompute = false;  // keep only the states between forward and backward (graph/scan.hpp)
};

// One step with its own parameters, x [Batch, in], h [Batch, H] (nn.GRUCell).
constexpr Value gru_cell(const Scope& s, Value x, Value h, int hidden, bool bias = true) {
  const auto at = s.enter();
  const RecurrentWeights w = recurrent_weights(s, 3, x.shape().back(1), hidden, bias);
  return gru_step(input_gates(x, w), h, w);
}
constexpr LstmState lstm_cell(const Scope& s, Value x, LstmState state, int hidden, bool bias = true) {
  const auto at = s.enter();
  const RecurrentWeights w = recurrent_weights(s, 4, x.shape().back(1), hidden, bias);
  return lstm_step(input_gates(x, w), state, w);
}

struct RecurrentInputs {
  Value x;                         // [Batch, L, in]
  std::optional<Value> mask;       // int32 [Batch, L]: padding (0) keeps the state, outputs zeros
  std::vector<Value> h0, c0;       // per layer and direction (layer 0 forward, layer 0 reverse, ...); none: zeros
};
struct RecurrentResult {
  Value out;                  // the last layer's outputs [Batch, L, H] (bidirectional: [Batch, L, 2H], forward first)
  std::vector<Value> h, c;    // the final states per layer and direction (PyTorch's h_n, c_n), [Batch, H]
};

namespace detail {
template <bool kLstm>
constexpr RecurrentResult recurrent(const Scope& s, const RecurrentInputs& in, const RecurrentOptions& o) {
  const auto at = s.enter();
  const int dirs = o.bidirectional ? 2 : 1, gates = kLstm ? 4 : 3;
  const Shape xs = in.x.shape();
  if (o.hidden <= 0 || o.layers <= 0)
    s.b->fail(Msg(kLstm ? "lstm" : "gru").add(" in '").add(s.prefix).add("': hidden and layers must be positive"), s.loc);
  const std::size_t states = std::size_t(o.layers * dirs);
  if ((!in.h0.empty() && in.h0.size() != states) || (!in.c0.empty() && in.c0.size() != states))
    s.b->fail(Msg(kLstm ? "lstm" : "gru").add(" in '").add(s.prefix).add("': give h0 (and c0) for every layer and direction (")
                  .add(int(states)).add(") or none"), s.loc);
  const Dim batch = xs.rank > 0 ? xs[0] : Dim(1);
  auto start = [&](const std::vector<Value>& v, std::size_t k) { return k < v.size() ? ScanInit(v[k]) : scan_zeros({batch, o.hidden}); };
  RecurrentResult r;
  Value x = in.x;
  for (int l = 0; l < o.layers; ++l) {
    Value outs[2];
    for (int d = 0; d < dirs; ++d) {
      std::string suffix = "_l" + Scope::digits(l);
      if (d) suffix += "_reverse";
      const RecurrentWeights w = recurrent_weights(s, gates, x.shape().back(1), o.hidden, o.bias, suffix);
      const Value gx = input_gates(x, w);  // every step's input projection: one GEMM outside the scan
      const std::size_t k = std::size_t(l * dirs + d);
      ScanInputs si{.init = {start(in.h0, k)}, .xs = {gx}, .mask = in.mask, .reverse = d == 1, .recompute = o.recompute};
      if constexpr (kLstm) si.init.push_back(start(in.c0, k));
      ScanResult sr = scan(s.scope("scan" + suffix), si, [&](const Scope&, const ScanStep& t) -> ScanStepResult {
        if constexpr (kLstm) {
          const LstmState n = lstm_step(t.x[0], {t.state[0], t.state[1]}, w);
          return {.state = {n.h, n.c}, .out = {n.h}};
        } else {
          const Value h = gru_step(t.x[0], t.state[0], w);
          return {.state = {h}, .out = {h}};
        }
      });
      outs[d] = sr.seq[0];
      r.h.push_back(sr.last[0]);
      if constexpr (kLstm) r.c.push_back(sr.last[1]);
    }
    x = dirs == 2 ? concat({outs[0], outs[1]}, -1) : outs[0];
    if (l + 1 < o.layers) x = dropout(x, o.dropout);
  }
  r.out = x;
  return r;
}
}  // namespace detail

constexpr RecurrentResult gru(const Scope& s, const RecurrentInputs& in, const RecurrentOptions& o) { return detail::recurrent<false>(s, in, o); }
constexpr RecurrentResult lstm(const Scope& s, const RecurrentInputs& in, const RecurrentOptions& o) { return detail::recurrent<true>(s, in, o); }

}  // namespace ctgrad::layers
