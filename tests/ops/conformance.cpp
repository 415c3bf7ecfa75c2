// The op-conformance harness: every registered case runs, for several runtime shapes (size-1 dims,
// odd sizes that are not multiples of any SIMD width), (a) a gradcheck against central finite
// differences in double precision and (b) for every op in the case that has a plain scalar
// reference, the real kernel against that reference on random inputs.
//
// A new op is covered by adding one OP_CASE: each case registers itself as a Catch2 test case
// ("conformance: <name>", tag [conformance]).
//
// Every case runs twice. First its loss is sum(op(...) * probe) plus sum(x * probe_x) for each
// differentiable input x: x then has a second consumer whose gradient lands first, so a VJP that
// assigns instead of adding fails. Then without the probes of the inputs: the op is the first to
// write their gradients, and an op that declares `assigns` writes them into buffers gradcheck
// fills with NaN (GradcheckOptions::poison_assigned_gradients), so an op that adds to them, or
// leaves an element unwritten, fails. ctgrad tensors are dense; cases marked "permuted" feed an op a transposed tensor, which
// is how a non-contiguous view reaches an op here.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/base/random.hpp>

using namespace ctgrad;

namespace {

struct Domain {
  bool positive = false;  // real inputs > 0.5 (log, sqrt, pow)
  std::int32_t index_range = 3;
  std::int32_t target_lo = 0;  // input "t" (targets) from target_lo: -1 reaches an ignore_index of -1
};

struct CaseBuilder : Builder {
  bool input_probes = true;
};

// loss + sum(x * probe_x) for each x in `also`, when the case is built with input probes.
constexpr Value with_probes(CaseBuilder& g, Value loss, std::initializer_list<Value> also) {
  if (!g.input_probes) return loss;
  int k = 0;
  for (Value x : also) {
    std::string name = "probe_also_";
    name += char('0' + k++);
    loss = loss + sum(x * g.input(name, x.shape()));
  }
  return loss;
}

constexpr Value probe_loss(CaseBuilder& g, Value y, std::initializer_list<Value> also = {}) {
  return with_probes(g, sum(y * g.input("probe", y.shape())), also);
}

template <class C>
void run_case();

#define OP_CASE(NAME, DOMAIN, ...)                                         \
  struct case_##NAME {                                                     \
    static constexpr const char* name = #NAME;                             \
    static constexpr Domain domain = DOMAIN;                               \
    template <bool kInputProbes>                                           \
    static constexpr Builder build_as() {                                  \
      CaseBuilder g;                                                       \
      g.input_probes = kInputProbes;                                       \
      __VA_ARGS__;                                                         \
      return Builder(g);                                                   \
    }                                                                      \
    static constexpr auto build = [] { return build_as<true>(); };        \
    static constexpr auto build_first = [] { return build_as<false>(); }; \
  };                                                                       \
  TEST_CASE("conformance: " #NAME, "[ops][conformance]") { run_case<case_##NAME>(); }

constexpr Domain any{}, positive{.positive = true}, classes5{.index_range = 5}, binary_mask{.index_range = 2},
    classes5_ignored{.index_range = 5, .target_lo = -1}, positions40{.index_range = 40};

// --- elementwise ---
OP_CASE(add_broadcast, any, Value a = g.input("a", {Batch, 3, Seq}, {.grad = true});
        Value b = g.input("b", {3, 1}, {.grad = true}); g.loss(probe_loss(g, add(a, b), {a, b})))
OP_CASE(sub_broadcast, any, Value a = g.input("a", {2, 1, Seq}, {.grad = true});
        Value b = g.input("b", {3, Seq}, {.grad = true}); g.loss(probe_loss(g, sub(a, b), {a, b})))
// Equal shapes and a bias-shaped input 1: add and sub also run in place here (input 0 has the
// output's size); 37 columns leave a SIMD tail on every instruction set.
OP_CASE(add_same, any, Value a = g.input("a", {Batch, Seq, 37}, {.grad = true});
        Value b = g.input("b", {Batch, Seq, 37}, {.grad = true}); g.loss(probe_loss(g, add(a, b), {a, b})))
OP_CASE(sub_same, any, Value a = g.input("a", {Batch, Seq, 37}, {.grad = true});
        Value b = g.input("b", {Batch, Seq, 37}, {.grad = true}); g.loss(probe_loss(g, sub(a, b), {a, b})))
OP_CASE(sub_bias_wide, any, Value a = g.input("a", {Batch, 130}, {.grad = true});
        Value b = g.input("b", {130}, {.grad = true}); g.loss(probe_loss(g, sub(a, b), {a, b})))
OP_CASE(mul_broadcast, any, Value a = g.input("a", {Batch, Seq}, {.grad = true});
        Value b = g.input("b", {Seq}, {.grad = true}); g.loss(probe_loss(g, mul(a, b), {a, b})))
// A per-row scalar (a gate [N, k, 1] on [N, k, d]): the row-by-row paths, either operand.
OP_CASE(mul_row_scale, any, Value a = g.input("a", {Batch, Seq, 5}, {.grad = true});
        Value b = g.input("b", {Batch, Seq, 1}, {.grad = true}); g.loss(probe_loss(g, mul(a, b), {a, b})))
OP_CASE(sub_row_scalar_first, any, Value a = g.input("a", {Batch, Seq, 5}, {.grad = true});
        Value b = g.input("b", {Batch, Seq, 1}, {.grad = true}); g.loss(probe_loss(g, sub(b, a), {a, b})))
OP_CASE(mul_self, any, Value a = g.input("a", {Batch, 3}, {.grad = true}); g.loss(probe_loss(g, mul(a, a), {a})))
OP_CASE(add_bias_wide, any, Value a = g.input("a", {Batch, 130}, {.grad = true});
        Value b = g.input("b", {130}, {.grad = true}); g.loss(probe_loss(g, add(a, b), {a, b})))
OP_CASE(div_broadcast, positive, Value a = g.input("a", {Batch, Seq, 2}, {.grad = true});
        Value b = g.input("b", {Seq, 1}, {.grad = true}); g.loss(probe_loss(g, div(a, b), {a, b})))
OP_CASE(relu, any, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, relu(a), {a})))
OP_CASE(scale, any, Value a = g.input("a", {Batch, 4}, {.grad = true}); g.loss(probe_loss(g, scale(a, -2.5), {a})))
OP_CASE(neg, any, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, neg(a), {a})))
OP_CASE(exp, any, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, exp(a), {a})))
OP_CASE(log, positive, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, log(a), {a})))
OP_CASE(sqrt, positive, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, sqrt(a), {a})))
OP_CASE(rsqrt, positive, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, rsqrt(a), {a})))
OP_CASE(shift, any, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, shift(a, -0.75), {a})))
OP_CASE(pow, positive, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, pow(a, 1.7), {a})))
OP_CASE(tanh, any, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, tanh(a), {a})))
OP_CASE(sigmoid, any, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, sigmoid(a), {a})))
OP_CASE(softplus, any, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, softplus(scale(a, 8.0)), {a})))
OP_CASE(silu, any, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, silu(a), {a})))
OP_CASE(gelu, any, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, gelu(a), {a})))
OP_CASE(relu_squared, any, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, relu_squared(a), {a})))
OP_CASE(gelu_tanh, any, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, gelu_tanh(a), {a})))
OP_CASE(gelu_permuted, any, Value a = g.input("a", {Batch, Seq, 3}, {.grad = true});
        g.loss(probe_loss(g, gelu(transpose(a, 0, 2)), {a})))
// The unary ops whose VJP reads their output, fed an op's value so that the plan runs them in
// place (a graph input is never overwritten) and the gradcheck runs on the overwritten buffer.
OP_CASE(exp_in_place, any, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, exp(scale(a, 0.5)), {a})))
OP_CASE(sigmoid_in_place, any, Value a = g.input("a", {Batch, Seq}, {.grad = true});
        g.loss(probe_loss(g, sigmoid(scale(a, 0.5)), {a})))
OP_CASE(sqrt_in_place, positive, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, sqrt(scale(a, 0.5)), {a})))
OP_CASE(rsqrt_in_place, positive, Value a = g.input("a", {Batch, Seq}, {.grad = true});
        g.loss(probe_loss(g, rsqrt(scale(a, 0.5)), {a})))
OP_CASE(neg_in_place, any, Value a = g.input("a", {Batch, Seq}, {.grad = true}); g.loss(probe_loss(g, neg(scale(a, 0.5)), {a})))
// --- matmul ---
OP_CASE(matmul_nn_shared, any, Value a = g.input("a", {Batch, 3, 5}, {.grad = true});
        Value b = g.input("b", {5, 4}, {.grad = true}); g.loss(probe_loss(g, matmul(a, b), {a, b})))
OP_CASE(matmul_nt_batched, any, Value a = g.input("a", {Batch, Seq, 5}, {.grad = true});
        Value b = g.input("b", {Batch, 4, 5}, {.grad = true}); g.loss(probe_loss(g, matmul(a, b, {.trans_b = true}), {a, b})))
OP_CASE(matmul_tn_batched, any, Value a = g.input("a", {Batch, 5, Seq}, {.grad = true});
        Value b = g.input("b", {Batch, 5, 4}, {.grad = true}); g.loss(probe_loss(g, matmul(a, b, {.trans_a = true}), {a, b})))
OP_CASE(matmul_tt_shared, any, Value a = g.input("a", {Batch, 5, 3}, {.grad = true});
        Value b = g.input("b", {4, 5}, {.grad = true});
        g.loss(probe_loss(g, matmul(a, b, {.trans_a = true, .trans_b = true}), {a, b})))
OP_CASE(matmul_blocked, any, Value a = g.input("a", {Batch, 600, 40}, {.grad = true});
        Value b = g.input("b", {50, 40}, {.grad = true}); g.loss(probe_loss(g, matmul(a, b, {.trans_b = true}), {a, b})))
// --- reductions ---
OP_CASE(sum_axis_keepdim, any, Value a = g.input("a", {Batch, 3, Seq}, {.grad = true});
        g.loss(probe_loss(g, sum(a, 1, {.keepdim = true}), {a})))
OP_CASE(sum_all, any, Value a = g.input("a", {Batch, 3, 4}, {.grad = true}); g.loss(probe_loss(g, sum(a), {a})))
OP_CASE(sum_all_chunked, any, Value a = g.input("a", {Batch, 5000}, {.grad = true}); g.loss(probe_loss(g, sum(a), {a})))
OP_CASE(mean_last, any, Value a = g.input("a", {Batch, 3, Seq}, {.grad = true}); g.loss(probe_loss(g, mean(a, -1), {a})))
OP_CASE(mean_all, any, Value a = g.input("a", {Batch, 6}, {.grad = true}); g.loss(probe_loss(g, mean(a), {a})))
OP_CASE(max_axis, any, Value a = g.input("a", {Batch, Seq, 3}, {.grad = true}); g.loss(probe_loss(g, max(a, 1), {a})))
OP_CASE(max_all_keepdim, any, Value a = g.input("a", {Batch, 5}, {.grad = true});
        g.loss(probe_loss(g, max(a, {.keepdim = true}), {a})))
OP_CASE(var_axis_unbiased, any, Value a = g.input("a", {Batch, 4, Seq}, {.grad = true}); g.loss(probe_loss(g, var(a, 1), {a})))
OP_CASE(max_last, any, Value a = g.input("a", {Batch, 3, Seq}, {.grad = true}); g.loss(probe_loss(g, max(a, -1), {a})))
OP_CASE(var_last, any, Value a = g.input("a", {Batch, 3, Seq}, {.grad = true}); g.loss(probe_loss(g, var(a, -1), {a})))
OP_CASE(var_all_population, any, Value a = g.input("a", {Batch, 6}, {.grad = true});
        g.loss(probe_loss(g, var(a, {.correction = 0}), {a})))
// --- softmax, norms ---
OP_CASE(softmax, any, Value a = g.input("a", {Batch, 2, Seq}, {.grad = true}); g.loss(probe_loss(g, softmax(a), {a})))
OP_CASE(layer_norm, any, Value a = g.input("a", {Batch, 2, 6}, {.grad = true});
        Value gamma = g.input("gamma", {6}, {.grad = true}); Value beta = g.input("beta", {6}, {.grad = true});
        g.loss(probe_loss(g, layer_norm(a, gamma, beta), {a, gamma, beta})))
OP_CASE(layer_norm_wide, any, Value a = g.input("a", {Batch, 5, 100}, {.grad = true});
        Value gamma = g.input("gamma", {100}, {.grad = true}); Value beta = g.input("beta", {100}, {.grad = true});
        g.loss(probe_loss(g, layer_norm(a, gamma, beta), {a, gamma, beta})))
OP_CASE(layer_norm_std_eps, any, Value a = g.input("a", {Batch, Seq, 7}, {.grad = true});
        Value gamma = g.input("gamma", {7}, {.grad = true}); Value beta = g.input("beta", {7}, {.grad = true});
        g.loss(probe_loss(g, layer_norm(a, gamma, beta, {.eps = 1e-6, .form = NormForm::std_plus_eps}), {a, gamma, beta})))
OP_CASE(rms_norm, any, Value a = g.input("a", {Batch, Seq, 9}, {.grad = true});
        Value gamma = g.input("gamma", {9}, {.grad = true}); g.loss(probe_loss(g, rms_norm(a, gamma), {a, gamma})))
OP_CASE(log_softmax, any, Value a = g.input("a", {Batch, 2, Seq}, {.grad = true}); g.loss(probe_loss(g, log_softmax(a), {a})))
// --- shape ---
OP_CASE(reshape, any, Value a = g.input("a", {Batch, 2, 6}, {.grad = true}); g.loss(probe_loss(g, reshape(a, {Batch, 3, 4}), {a})))
// a read by an earlier op too: the reshape (the higher id of one level) is its gradient's first
// writer and assigns it, where alone it would share a's gradient buffer and run no VJP
OP_CASE(reshape_first_of_two, any, Value a = g.input("a", {Batch, 2, 6}, {.grad = true}); Value t = scale(a, 0.5);
        g.loss(probe_loss(g, reshape(a, {Batch, 3, 4}), {a}) + sum(t)))
OP_CASE(transpose, any, Value a = g.input("a", {Batch, 2, 3, Seq}, {.grad = true}); g.loss(probe_loss(g, transpose(a, 1, 3), {a})))
OP_CASE(permute, any, Value a = g.input("a", {Batch, 2, Seq, 3}, {.grad = true});
        g.loss(probe_loss(g, permute(a, {2, 0, 3, 1}), {a})))
OP_CASE(concat_last, any, Value a = g.input("a", {Batch, Seq, 2}, {.grad = true});
        Value b = g.input("b", {Batch, Seq, 3}, {.grad = true}); Value c = g.input("c", {Batch, Seq, 1}, {.grad = true});
        g.loss(probe_loss(g, concat({a, b, c}, -1), {a, b, c})))
OP_CASE(concat_seq, any, Value a = g.input("a", {Batch, Seq, 2}, {.grad = true});
        Value b = g.input("b", {Batch, Seq, 2}, {.grad = true}); g.loss(probe_loss(g, concat({a, b}, 1), {a, b})))
OP_CASE(slice_middle, any, Value a = g.input("a", {Batch, 7, Seq}, {.grad = true});
        g.loss(probe_loss(g, slice(a, 1, 2, 3), {a})))
OP_CASE(overwrite_tail_token, any, Value a = g.input("a", {Batch, Seq, 3}, {.grad = true});
        Value t = g.input("t", {Batch, 1, 3}, {.grad = true}); g.loss(probe_loss(g, overwrite_tail(a, t, 1), {a, t})))
OP_CASE(overwrite_tail_heads, any, Value a = g.input("a", {Batch, 2, 5, Seq}, {.grad = true});
        Value t = g.input("t", {Batch, 2, 2, Seq}, {.grad = true}); g.loss(probe_loss(g, overwrite_tail(a, t, 2), {a, t})))
OP_CASE(broadcast_to, any, Value a = g.input("a", {1, 1, 3}, {.grad = true}); g.input("batch", {Batch});
        g.loss(probe_loss(g, broadcast_to(a, {Batch, 2, 3}), {a})))
OP_CASE(broadcast_to_middle, any, Value a = g.input("a", {Batch, 1, Seq}, {.grad = true});
        g.loss(probe_loss(g, broadcast_to(a, {Batch, 4, Seq}), {a})))
OP_CASE(split_three, any, Value a = g.input("a", {Batch, Seq, 6}, {.grad = true});
        auto parts = split<3>(a, -1); g.loss(probe_loss(g, parts[0] * parts[2] + parts[1], {a})))
OP_CASE(index_select, classes5, Value a = g.input("a", {Batch, 5, Seq}, {.grad = true});
        Value idx = g.input("idx", {7}, {.dtype = DType::index}); g.loss(probe_loss(g, index_select(a, 1, idx), {a})))
OP_CASE(embedding, classes5, Value table = g.input("table", {5, 4}, {.grad = true});
        Value ids = g.input("ids", {Batch, Seq}, {.dtype = DType::index}); g.loss(probe_loss(g, embedding(table, ids), {table})))
// --- linear, patches, dropout ---
OP_CASE(linear, any, Value x = g.input("x", {Batch, Seq, 5}, {.grad = true}); Value w = g.input("w", {3, 5}, {.grad = true});
        Value b = g.input("b", {3}, {.grad = true}); g.loss(probe_loss(g, linear(x, w, b), {x, w, b})))
OP_CASE(patch_embed, any, Value img = g.input("img", {Batch, 2, 6, 4}, {.grad = true});
        Value w = g.input("w", {5, 8}, {.grad = true}); Value b = g.input("b", {5}, {.grad = true});
        g.loss(probe_loss(g, patch_embed(img, w, b, 2), {img, w, b})))
OP_CASE(dropout, any, Value a = g.input("a", {Batch, Seq, 3}, {.grad = true}); g.loss(probe_loss(g, dropout(a, 0.3), {a})))
// A constant 0 adds no node: a hyperparameter at 0 keeps the op, inactive.
OP_CASE(dropout_inactive, any, Value a = g.input("a", {Batch, Seq, 3}, {.grad = true});
        g.loss(probe_loss(g, dropout(a, g.hyper("dropout", 0.0)), {a})))
// --- fused attention ---
OP_CASE(attention_cross, any, Value q = g.input("q", {Batch, 2, Seq, 3}, {.grad = true});
        Value k = g.input("k", {Batch, 2, SeqKV, 3}, {.grad = true}); Value v = g.input("v", {Batch, 2, SeqKV, 4}, {.grad = true});
        g.loss(probe_loss(g, attention(q, k, v), {q, k, v})))
OP_CASE(attention_padding, binary_mask, Value q = g.input("q", {Batch, 2, Seq, 3}, {.grad = true});
        Value k = g.input("k", {Batch, 2, SeqKV, 3}, {.grad = true}); Value v = g.input("v", {Batch, 2, SeqKV, 3}, {.grad = true});
        Value m = g.input("m", {Batch, 1, 1, SeqKV}, {.dtype = DType::index});
        g.loss(probe_loss(g, attention(q, k, v, m, {.scale = 0.7}), {q, k, v})))
OP_CASE(attention_causal_dropout, any, Value q = g.input("q", {Batch, 2, Seq, 4}, {.grad = true});
        Value k = g.input("k", {Batch, 2, Seq, 4}, {.grad = true}); Value v = g.input("v", {Batch, 2, Seq, 2}, {.grad = true});
        g.loss(probe_loss(g, attention(q, k, v, {.dropout = 0.2, .causal = true}), {q, k, v})))
OP_CASE(attention_bias, any, Value q = g.input("q", {Batch, 2, Seq, 3}, {.grad = true});
        Value k = g.input("k", {Batch, 2, SeqKV, 3}, {.grad = true}); Value v = g.input("v", {Batch, 2, SeqKV, 2}, {.grad = true});
        Value b = g.input("b", {Batch, 2, Seq, SeqKV}, {.grad = true}); g.loss(probe_loss(g, attention(q, k, v, b), {q, k, v, b})))
// T5's shape: one bias [1, heads, Tq, Tk] for the whole batch, and a padding mask beside it.
OP_CASE(attention_shared_bias_and_mask, binary_mask, Value q = g.input("q", {Batch, 2, Seq, 3}, {.grad = true});
        Value k = g.input("k", {Batch, 2, SeqKV, 3}, {.grad = true}); Value v = g.input("v", {Batch, 2, SeqKV, 3}, {.grad = true});
        Value m = g.input("m", {Batch, 1, 1, SeqKV}, {.dtype = DType::index}); Value b = g.input("b", {1, 2, Seq, SeqKV}, {.grad = true});
        g.loss(probe_loss(g, attention(q, k, v, m, b, {.scale = 1.0}), {q, k, v, b})))
OP_CASE(attention_causal_bias_dropout, any, Value q = g.input("q", {Batch, 2, Seq, 4}, {.grad = true});
        Value k = g.input("k", {Batch, 2, Seq, 4}, {.grad = true}); Value v = g.input("v", {Batch, 2, Seq, 2}, {.grad = true});
        Value b = g.input("b", {2, 1, Seq}, {.grad = true});
        g.loss(probe_loss(g, attention(q, k, v, b, {.dropout = 0.2, .causal = true}), {q, k, v, b})))
// The [B, T, H, d] layout (seq_first): heads interleaved in each row, as a projection's output.
OP_CASE(attention_seq_first_causal_dropout, any, Value q = g.input("q", {Batch, Seq, 2, 4}, {.grad = true});
        Value k = g.input("k", {Batch, Seq, 2, 4}, {.grad = true}); Value v = g.input("v", {Batch, Seq, 2, 3}, {.grad = true});
        g.loss(probe_loss(g, attention(q, k, v, {.dropout = 0.2, .causal = true, .seq_first = true}), {q, k, v})))
OP_CASE(attention_seq_first_mask_bias, binary_mask, Value q = g.input("q", {Batch, Seq, 3, 2}, {.grad = true});
        Value k = g.input("k", {Batch, SeqKV, 3, 2}, {.grad = true}); Value v = g.input("v", {Batch, SeqKV, 3, 2}, {.grad = true});
        Value m = g.input("m", {Batch, 1, 1, SeqKV}, {.dtype = DType::index}); Value b = g.input("b", {1, 3, Seq, SeqKV}, {.grad = true});
        g.loss(probe_loss(g, attention(q, k, v, m, b, {.scale = 0.8, .seq_first = true}), {q, k, v, b})))
// packed_qkv: q, k, v as the slots of one [B, T, 3, H, d] input (a fused projection's output); a
// bias after it sits at input 2, so it is assigned when the op is its first contributor.
OP_CASE(attention_packed_causal_dropout, any, Value qkv = g.input("qkv", {Batch, Seq, 3, 2, 4}, {.grad = true});
        g.loss(probe_loss(g, attention_packed(qkv, {.dropout = 0.2, .causal = true}), {qkv})))
OP_CASE(attention_packed_mask_bias, binary_mask, Value qkv = g.input("qkv", {Batch, Seq, 3, 3, 2}, {.grad = true});
        Value m = g.input("m", {Batch, 1, 1, Seq}, {.dtype = DType::index}); Value b = g.input("b", {1, 3, Seq, Seq}, {.grad = true});
        g.loss(probe_loss(g, attention_packed(qkv, m, b, {.scale = 0.8}), {qkv, b})))
// Causal with more queries than keys (draws with Seq > SeqKV): the first queries see no key.
OP_CASE(attention_causal_cross, any, Value q = g.input("q", {Batch, 2, Seq, 3}, {.grad = true});
        Value k = g.input("k", {Batch, 2, SeqKV, 3}, {.grad = true}); Value v = g.input("v", {Batch, 2, SeqKV, 2}, {.grad = true});
        g.loss(probe_loss(g, attention(q, k, v, {.causal = true}), {q, k, v})))
OP_CASE(attention_seq_first_causal_cross, any, Value q = g.input("q", {Batch, Seq, 2, 3}, {.grad = true});
        Value k = g.input("k", {Batch, SeqKV, 2, 3}, {.grad = true}); Value v = g.input("v", {Batch, SeqKV, 2, 2}, {.grad = true});
        g.loss(probe_loss(g, attention(q, k, v, {.causal = true, .seq_first = true}), {q, k, v})))
// Grouped-query (4 query heads over 2 key/value heads) and multi-query (over 1) attention: each
// key/value head's gradient adds up over its group.
OP_CASE(attention_gqa_seq_first_causal_dropout, any, Value q = g.input("q", {Batch, Seq, 4, 3}, {.grad = true});
        Value k = g.input("k", {Batch, Seq, 2, 3}, {.grad = true}); Value v = g.input("v", {Batch, Seq, 2, 2}, {.grad = true});
        g.loss(probe_loss(g, attention(q, k, v, {.dropout = 0.2, .causal = true, .seq_first = true}), {q, k, v})))
OP_CASE(attention_mqa_seq_first_mask_bias, binary_mask, Value q = g.input("q", {Batch, Seq, 4, 2}, {.grad = true});
        Value k = g.input("k", {Batch, SeqKV, 1, 2}, {.grad = true}); Value v = g.input("v", {Batch, SeqKV, 1, 3}, {.grad = true});
        Value m = g.input("m", {Batch, 1, 1, SeqKV}, {.dtype = DType::index}); Value b = g.input("b", {1, 4, Seq, SeqKV}, {.grad = true});
        g.loss(probe_loss(g, attention(q, k, v, m, b, {.seq_first = true}), {q, k, v, b})))
OP_CASE(attention_gqa_cross_shared_bias, any, Value q = g.input("q", {Batch, 4, Seq, 3}, {.grad = true});
        Value k = g.input("k", {Batch, 2, SeqKV, 3}, {.grad = true}); Value v = g.input("v", {Batch, 2, SeqKV, 2}, {.grad = true});
        Value b = g.input("b", {1, 4, Seq, SeqKV}, {.grad = true}); g.loss(probe_loss(g, attention(q, k, v, b), {q, k, v, b})))
// Sliding-window causal attention (each query sees itself and the key before it), and soft-capped
// scores (c tanh(s / c), then the bias).
OP_CASE(attention_window_dropout, any, Value q = g.input("q", {Batch, 2, Seq, 3}, {.grad = true});
        Value k = g.input("k", {Batch, 2, Seq, 3}, {.grad = true}); Value v = g.input("v", {Batch, 2, Seq, 2}, {.grad = true});
        g.loss(probe_loss(g, attention(q, k, v, {.dropout = 0.2, .causal = true, .window = 2}), {q, k, v})))
OP_CASE(attention_gqa_window_cross, any, Value q = g.input("q", {Batch, Seq, 2, 3}, {.grad = true});
        Value k = g.input("k", {Batch, SeqKV, 1, 3}, {.grad = true}); Value v = g.input("v", {Batch, SeqKV, 1, 2}, {.grad = true});
        g.loss(probe_loss(g, attention(q, k, v, {.causal = true, .window = 3, .seq_first = true}), {q, k, v})))
OP_CASE(attention_softcap_bias, any, Value q = g.input("q", {Batch, 2, Seq, 3}, {.grad = true});
        Value k = g.input("k", {Batch, 2, SeqKV, 3}, {.grad = true}); Value v = g.input("v", {Batch, 2, SeqKV, 2}, {.grad = true});
        Value b = g.input("b", {Batch, 2, Seq, SeqKV}, {.grad = true});
        g.loss(probe_loss(g, attention(q, k, v, b, {.scale = 2.0, .softcap = 0.7}), {q, k, v, b})))
OP_CASE(attention_softcap_window_dropout, any, Value q = g.input("q", {Batch, Seq, 4, 3}, {.grad = true});
        Value k = g.input("k", {Batch, Seq, 2, 3}, {.grad = true}); Value v = g.input("v", {Batch, Seq, 2, 3}, {.grad = true});
        g.loss(probe_loss(g, attention(q, k, v, {.scale = 2.0, .dropout = 0.2, .causal = true, .window = 2, .softcap = 0.5,
                                                  .seq_first = true}), {q, k, v})))
// --- positions ---
// Selection for sparse layers: the top-k values (gradient through the values), a gather along the
// last axis, and rows scattered by index with -1 dropping a row (inputs "t" reach -1).
OP_CASE(top_k_values, any, Value a = g.input("a", {Batch, Seq, 5}, {.grad = true}); g.loss(probe_loss(g, top_k(a, 2).values, {a})))
OP_CASE(take_along_last, classes5, Value a = g.input("a", {Batch, 5}, {.grad = true});
        Value i = g.input("i", {Batch, 3}, {.dtype = DType::index}); g.loss(probe_loss(g, take_along_last(a, i), {a})))
OP_CASE(scatter_add_rows, classes5_ignored, Value a = g.input("a", {Seq, 3}, {.grad = true});
        Value t = g.input("t", {Seq}, {.dtype = DType::index}); g.loss(probe_loss(g, scatter_add_rows(a, t, 5), {a})))
// Routing to experts at a capacity derived from the tokens (3 experts, 2 choices each, a capacity of
// 0.6 of the tokens: some choices dropped at most shapes): dispatch by gather_rows, an expert's
// transform, the combine gathered back by slot; one_hot and negative_mask as constants in a loss.
OP_CASE(moe_dispatch_combine, any, Value x = g.input("x", {Seq, 3}, {.grad = true});
        Value t = g.input("t", {Seq, 2}, {.dtype = DType::index}); const Dim cap = g.derive(Sym3, Seq, 0.6);
        Value src = expert_sources(t, 3, cap); Value slots = expert_slots(t, src, 3);
        Value routed = reshape(tanh(reshape(gather_rows(x, src), {3, cap, 3})), {3 * cap, 3});
        g.loss(probe_loss(g, gather_rows(routed, reshape(slots, {Seq * 2})), {x})))
OP_CASE(one_hot_negative_mask, classes5_ignored, Value a = g.input("a", {Seq, 2, 5}, {.grad = true});
        Value t = g.input("t", {Seq, 2}, {.dtype = DType::index}); Value w = g.input("w", {Seq, 2});
        g.loss(probe_loss(g, a * one_hot(t, 5), {a}) + sum(negative_mask(t) * w)))
// Rotary positions: half-split and interleaved pairs, partial rotation, explicit positions (a
// decoding step's), the heads-first layout, and in place.
OP_CASE(rope_half, any, Value x = g.input("x", {Batch, Seq, 2, 6}, {.grad = true}); g.loss(probe_loss(g, rope(x), {x})))
OP_CASE(rope_interleaved_partial, any, Value x = g.input("x", {Batch, Seq, 3, 8}, {.grad = true});
        g.loss(probe_loss(g, rope(x, {.theta = 500, .fraction = 0.5, .interleaved = true}), {x})))
OP_CASE(rope_positions, positions40, Value x = g.input("x", {Batch, Seq, 2, 4}, {.grad = true});
        Value p = g.input("p", {Seq}, {.dtype = DType::index}); g.loss(probe_loss(g, rope(x, p, {.fraction = 0.75}), {x})))
OP_CASE(rope_heads_first, any, Value x = g.input("x", {Batch, 2, Seq, 6}, {.grad = true});
        g.loss(probe_loss(g, rope(x, {.interleaved = true, .axis = -2}), {x})))
OP_CASE(rope_linear_scaling, positions40, Value x = g.input("x", {Batch, Seq, 2, 6}, {.grad = true});
        Value p = g.input("p", {Seq}, {.dtype = DType::index}); g.loss(probe_loss(g, rope(x, p, {.scaling = RopeScaling::linear, .factor = 4}), {x})))
OP_CASE(rope_llama3_scaling, positions40, Value x = g.input("x", {Batch, Seq, 2, 16}, {.grad = true});
        Value p = g.input("p", {Seq}, {.dtype = DType::index});
        g.loss(probe_loss(g, rope(x, p, {.theta = 10000, .scaling = RopeScaling::llama3, .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                                         .original_context = 32}), {x})))
OP_CASE(rope_in_place, any, Value x = g.input("x", {Batch, Seq, 2, 4}, {.grad = true}); g.loss(probe_loss(g, rope(scale(x, 0.5)), {x})))
OP_CASE(prefix_rows, any, Value table = g.input("table", {40, 3}, {.grad = true});
        g.loss(probe_loss(g, prefix_rows(table, Seq), {table})))
OP_CASE(relative_position_bias, any, Value table = g.input("table", {8, 2}, {.grad = true});
        g.loss(probe_loss(g, relative_position_bias(table, Seq, SeqKV, {.buckets = 8, .max_distance = 20}), {table})))
// --- masks, losses ---
OP_CASE(causal_masked_softmax, any, Value s = g.input("s", {Batch, 2, Seq, Seq}, {.grad = true});
        g.loss(probe_loss(g, softmax(masked_fill(s, causal_mask(g, Seq), -1e9)), {s})))
OP_CASE(padding_masked_softmax, binary_mask, Value s = g.input("s", {Batch, 2, Seq, Seq}, {.grad = true});
        Value len = g.input("len", {Batch}, {.dtype = DType::index});
        g.loss(probe_loss(g, softmax(masked_fill(s, key_padding_mask(len, Seq), -1e9)), {s})))
OP_CASE(cross_entropy_smoothed, classes5, Value a = g.input("a", {Batch, Seq, 5}, {.grad = true});
        Value t = g.input("t", {Batch, Seq}, {.dtype = DType::index});
        g.loss(with_probes(g, cross_entropy(a, t, {.label_smoothing = 0.1}), {a})))
OP_CASE(masked_fill, binary_mask, Value a = g.input("a", {Batch, 3, Seq}, {.grad = true});
        Value m = g.input("m", {Batch, 1, Seq}, {.dtype = DType::index});
        g.loss(probe_loss(g, masked_fill(a, m, -7.0), {a})))
OP_CASE(mse, any, Value a = g.input("a", {Batch, 5}, {.grad = true}); Value b = g.input("b", {Batch, 5}, {.grad = true});
        g.loss(with_probes(g, mse(a, b), {a, b})))
OP_CASE(cross_entropy_ignore, classes5, Value a = g.input("a", {Batch, Seq, 5}, {.grad = true});
        Value t = g.input("t", {Batch, Seq}, {.dtype = DType::index});
        g.loss(with_probes(g, cross_entropy(a, t, {.ignore_index = 2}), {a})))
// Padding as BERT and T5 mark it: an ignore_index outside the classes.
OP_CASE(cross_entropy_ignore_outside, classes5_ignored, Value a = g.input("a", {Batch, Seq, 5}, {.grad = true});
        Value t = g.input("t", {Batch, Seq}, {.dtype = DType::index});
        g.loss(with_probes(g, cross_entropy(a, t, {.ignore_index = -1, .label_smoothing = 0.1}), {a})))


// Runtime shapes each case runs at: (Batch, Seq, SeqKV, ...). Size-1 dims; odd sizes; 33 > 32.
constexpr std::array<std::array<std::int64_t, kMaxSymbols>, 4> kDraws{
    {{1, 1, 1, 1, 1, 1}, {3, 4, 5, 2, 2, 2}, {2, 17, 3, 1, 1, 1}, {5, 33, 7, 1, 1, 1}}};

template <class C>
struct Frozen {
  static constexpr auto G = freeze<C::build>();
  static constexpr auto G_first = freeze<C::build_first>();  // the op writes its inputs' gradients first
};

// In the graph without input probes, the ops that can assign a gradient must be told to: the
// check above is then about them, not only about the loss's own mul and sum.
template <const auto& G>
bool op_assigns_somewhere() {
  const auto& p = Program<G, double>::train_plan;
  bool declared = false, told = false;
  for (int i = 0; i < G.size; ++i) {
    const Node& n = G[i];
    if (n.kind != NodeKind::op || std::string_view(n.op->name) == "mul" || std::string_view(n.op->name) == "sum_all") continue;
    bool input_grad = false;
    for (int k = 0; k < n.n_in; ++k)
      input_grad |= (n.op->assigns & kSaveInput(k)) && p.needs_grad[std::size_t(n.in[std::size_t(k)])];
    declared |= input_grad;
    // A view that alone writes its source's gradient shares that buffer and runs no VJP (its VJP
    // is checked in the graph with probes, where the source has a second consumer).
    told |= p.assigns[std::size_t(i)] != 0 || p.vjp_skip[std::size_t(i)];
  }
  return !declared || told;
}

// Runs each op node that has a scalar reference on fresh random inputs, kernel vs reference; an
// in-place op (OpDef::in_place) also with its output on input 0's bytes (where input 0 has the
// output's size), which must give the same bits.
template <const auto& G>
std::string check_references(const Domain& dom, const std::array<std::int64_t, kMaxSymbols>& sym, std::uint64_t seed,
                             int& checked) {
  std::string fails;
  for (int i = 0; i < G.size; ++i) {
    const Node& n = G[i];
    if (n.kind != NodeKind::op || (!n.op->reference[0] && !n.op->in_place)) continue;
    auto ref_of = [&](const Shape& s, DType dt, void* data) {
      TensorRef r;
      r.data = data, r.rank = s.rank, r.dtype = dt, r.numel = 1;
      for (int d = 0; d < s.rank; ++d) r.numel *= r.dim[std::size_t(d)] = s[d].eval(sym);
      return r;
    };
    std::vector<std::vector<float>> real(std::size_t(n.n_in));
    std::vector<std::vector<std::int32_t>> idx(std::size_t(n.n_in));
    std::array<TensorRef, kMaxInputs> in{};
    for (int k = 0; k < n.n_in; ++k) {
      const Node& src = G[n.in[std::size_t(k)]];
      TensorRef r = ref_of(src.shape, src.dtype, nullptr);
      const std::uint64_t key = random::key(seed, std::uint64_t(i), std::uint64_t(k));
      if (src.dtype == DType::index) {
        idx[std::size_t(k)].resize(std::size_t(r.numel));
        for (std::int64_t e = 0; e < r.numel; ++e)
          idx[std::size_t(k)][std::size_t(e)] = std::int32_t(random::bits(key, std::uint64_t(e)) % std::uint64_t(dom.index_range));
        r.data = idx[std::size_t(k)].data();
      } else {
        real[std::size_t(k)].resize(std::size_t(r.numel));
        for (std::int64_t e = 0; e < r.numel; ++e) {
          const double v = random::normal(key, std::uint64_t(e));
          real[std::size_t(k)][std::size_t(e)] = float(dom.positive ? 0.5 + std::abs(v) : v);
        }
        r.data = real[std::size_t(k)].data();
      }
      in[std::size_t(k)] = r;
    }
    TensorRef out = ref_of(n.shape, n.dtype, nullptr);
    std::vector<float> got(std::size_t(out.numel)), want(std::size_t(out.numel));
    std::vector<float> scratch1(std::size_t(std::max<std::int64_t>(1, n.scratch.eval(sym)))), scratch2 = scratch1;
    TensorRef s1{scratch1.data(), {std::int64_t(scratch1.size())}, 1, std::int64_t(scratch1.size())}, s2 = s1;
    s2.data = scratch2.data();
    out.data = got.data();
    n.op->forward[0](OpArgs{n.attr, in.data(), n.n_in, out, s1});
    // As the plan: in place only where input 0 is real and of the output's size (a broadcast
    // operand is not).
    if (n.op->in_place && G[n.in[0]].dtype == DType::real && n.dtype == DType::real && in[0].numel == out.numel) {
      std::vector<float> same(real[0]);
      std::array<TensorRef, kMaxInputs> in_same = in;
      in_same[0].data = same.data();
      TensorRef out_same = out;
      out_same.data = same.data();
      n.op->forward[0](OpArgs{n.attr, in_same.data(), n.n_in, out_same, s2});
      ++checked;
      if (std::memcmp(same.data(), got.data(), got.size() * sizeof(float)) != 0)
        fails += std::string("op ") + n.op->name + ": in place, the output differs from out of place\n";
    }
    if (!n.op->reference[0]) continue;
    TensorRef out2 = out;
    out2.data = want.data();
    n.op->reference[0](OpArgs{n.attr, in.data(), n.n_in, out2, s2});
    ++checked;
    // Float results differ by rounding order (SIMD lanes against one accumulator). The scale of
    // that error is what an output accumulates: about sum(|x|) over the elements reduced into it.
    double accumulated = 0;
    for (int k = 0; k < n.n_in; ++k) {
      if (in[std::size_t(k)].dtype != DType::real || in[std::size_t(k)].numel == 0) continue;
      double mean_abs = 0;
      for (float v : real[std::size_t(k)]) mean_abs += std::abs(v) / double(real[std::size_t(k)].size());
      accumulated += mean_abs * std::max(1.0, double(in[std::size_t(k)].numel) / double(std::max<std::int64_t>(1, out.numel)));
    }
    for (std::size_t e = 0; e < got.size(); ++e)
      if (!(std::abs(got[e] - want[e]) <= 1e-5 * std::max({1.0, double(std::abs(want[e])), accumulated}))) {
        fails += std::string("op ") + n.op->name + ": element " + std::to_string(e) + " kernel " +
                 std::to_string(got[e]) + " reference " + std::to_string(want[e]) + "\n";
        break;
      }
  }
  return fails;
}


// Every case: gradcheck at each draw of runtime dims, and each op with a scalar reference against it.
template <class C>
void run_case() {
  static constexpr const auto& G = Frozen<C>::G;
  CHECK(op_assigns_somewhere<Frozen<C>::G_first>());
  int references = 0;
  for (std::size_t d = 0; d < kDraws.size(); ++d) {
    const auto& sym = kDraws[d];
    RandomInputs in{.seed = 100 + d, .sym = sym, .index_range = C::domain.index_range, .positive = C::domain.positive,
                    .index_ranges = {{"t", C::domain.target_lo, C::domain.index_range}}};

    GradcheckResult r = gradcheck<G>(in, {.max_per_tensor = 24});
    INFO("case " << C::name << ", draw " << d << " (Batch=" << sym[0] << ", Seq=" << sym[1] << "): worst " << r.worst << "\n" << r.report);
    CHECK(r.checked > 0);
    CHECK(r.ok);
    GradcheckResult first = gradcheck<Frozen<C>::G_first>(in, {.max_per_tensor = 24});
    INFO("without input probes (the op writes its inputs' gradients first): worst " << first.worst << "\n" << first.report);
    CHECK(first.checked > 0);
    CHECK(first.ok);
    std::string fails = check_references<G>(C::domain, sym, 200 + d, references);
    INFO(fails);
    CHECK(fails.empty());
  }
}

}  // namespace

// The *_in_place cases are about the overwritten buffer: their unary op must take its input's
// buffer in the plans the gradchecks run (with and without input probes).
template <class C>
constexpr bool runs_in_place(std::string_view op) {
  auto check = [op](const auto& G, const auto& plan) {
    for (int i = 0; i < G.size; ++i)
      if (G[i].kind == NodeKind::op && std::string_view(G[i].op->name) == op) return plan.in_place_of[std::size_t(i)] >= 0;
    return false;
  };
  return check(Frozen<C>::G, Program<Frozen<C>::G, double>::train_plan) &&
         check(Frozen<C>::G_first, Program<Frozen<C>::G_first, double>::train_plan);
}
TEST_CASE("conformance: the in-place cases run their op in place in the gradchecks' plans", "[ops][conformance]") {
  STATIC_REQUIRE(runs_in_place<case_exp_in_place>("exp"));
  STATIC_REQUIRE(runs_in_place<case_sigmoid_in_place>("sigmoid"));
  STATIC_REQUIRE(runs_in_place<case_sqrt_in_place>("sqrt"));
  STATIC_REQUIRE(runs_in_place<case_rsqrt_in_place>("rsqrt"));
  STATIC_REQUIRE(runs_in_place<case_neg_in_place>("neg"));
  STATIC_REQUIRE(!runs_in_place<case_exp>("exp"));  // a graph input is never overwritten
}
