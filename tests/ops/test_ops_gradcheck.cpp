// One finite-difference gradient check (double precision) per op and per op variant.
#include <catch2/catch.hpp>

#include <string>

#include <ctgrad/ctgrad.hpp>

using namespace ctgrad;

namespace {

template <const auto& G>
void check(const char* what, RandomInputs in = {}) {
  auto r = gradcheck<G>(in);
  INFO(what << ": worst " << r.worst << "\n" << r.report);
  CHECK(r.checked > 0);
  CHECK(r.ok);
}

// Loss = sum(op(...) * probe) with a random probe, so every output element gets its own weight,
// plus sum(x * probe_x) for each input x listed in `also`: x then has a second consumer whose
// gradient lands first, so a VJP that assigns (=) instead of adding (+=) fails the check.
constexpr Value probe_loss(Builder& g, Value y, std::initializer_list<Value> also = {}) {
  Value loss = sum(y * g.input("probe", y.shape()));
  int k = 0;
  for (Value x : also) {
    std::string name = "probe_also_";
    name += char('0' + k++);
    loss = loss + sum(x * g.input(name, x.shape()));
  }
  return loss;
}

#define OP_GRAPH(NAME, BODY)                        \
  constexpr auto NAME##_fn = [] {                   \
    Builder g;                                      \
    BODY;                                           \
    return g;                                       \
  };                                                \
  static constexpr auto NAME = freeze<NAME##_fn>();

OP_GRAPH(ADD_BCAST, {
  Value a = g.input("a", {Batch, 3, 4}, {.grad = true});
  Value b = g.input("b", {3, 1}, {.grad = true});
  g.loss(probe_loss(g, add(a, b), {a, b}));
})
OP_GRAPH(SUB_BCAST, {
  Value a = g.input("a", {2, 1, 5}, {.grad = true});
  Value b = g.input("b", {3, 5}, {.grad = true});
  g.loss(probe_loss(g, sub(a, b), {a, b}));
})
OP_GRAPH(MUL_BCAST, {
  Value a = g.input("a", {Batch, 7}, {.grad = true});
  Value b = g.input("b", {7}, {.grad = true});
  g.loss(probe_loss(g, mul(a, b), {a, b}));
})
OP_GRAPH(MUL_SELF, {
  Value a = g.input("a", {Batch, 3}, {.grad = true});
  g.loss(probe_loss(g, mul(a, a), {a}));
})
OP_GRAPH(RELU, {
  Value a = g.input("a", {Batch, 9}, {.grad = true});
  g.loss(probe_loss(g, relu(a), {a}));
})
OP_GRAPH(SCALE, {
  Value a = g.input("a", {Batch, 4}, {.grad = true});
  g.loss(probe_loss(g, scale(a, -2.5), {a}));
})
OP_GRAPH(MATMUL_NN, {
  Value a = g.input("a", {Batch, 3, 5}, {.grad = true});
  Value b = g.input("b", {5, 4}, {.grad = true});
  g.loss(probe_loss(g, matmul(a, b), {a, b}));
})
OP_GRAPH(MATMUL_NT_BATCHED, {
  Value a = g.input("a", {Batch, 3, 5}, {.grad = true});
  Value b = g.input("b", {Batch, 4, 5}, {.grad = true});
  g.loss(probe_loss(g, matmul(a, b, {.trans_b = true}), {a, b}));
})
OP_GRAPH(MATMUL_TN, {
  Value a = g.input("a", {Batch, 5, 3}, {.grad = true});
  Value b = g.input("b", {Batch, 5, 4}, {.grad = true});
  g.loss(probe_loss(g, matmul(a, b, {.trans_a = true}), {a, b}));
})
OP_GRAPH(MATMUL_TT_SHARED, {
  Value a = g.input("a", {Batch, 5, 3}, {.grad = true});
  Value b = g.input("b", {4, 5}, {.grad = true});
  g.loss(probe_loss(g, matmul(a, b, {.trans_a = true, .trans_b = true}), {a, b}));
})
OP_GRAPH(SUM_AXIS, {
  Value a = g.input("a", {Batch, 3, 4}, {.grad = true});
  g.loss(probe_loss(g, sum(a, 1, {.keepdim = true}), {a}));
})
OP_GRAPH(SUM_ALL, {
  Value a = g.input("a", {Batch, 3, 4}, {.grad = true});
  g.loss(probe_loss(g, sum(a), {a}));
})
OP_GRAPH(MEAN_AXIS, {
  Value a = g.input("a", {Batch, 3, 4}, {.grad = true});
  g.loss(probe_loss(g, mean(a, -1), {a}));
})
OP_GRAPH(MEAN_ALL, {
  Value a = g.input("a", {Batch, 6}, {.grad = true});
  g.loss(probe_loss(g, mean(a), {a}));
})
OP_GRAPH(SOFTMAX, {
  Value a = g.input("a", {Batch, 2, 7}, {.grad = true});
  g.loss(probe_loss(g, softmax(a), {a}));
})
OP_GRAPH(LAYER_NORM, {
  Value a = g.input("a", {Batch, 2, 6}, {.grad = true});
  Value gamma = g.input("gamma", {6}, {.grad = true});
  Value beta = g.input("beta", {6}, {.grad = true});
  g.loss(probe_loss(g, layer_norm(a, gamma, beta), {a, gamma, beta}));
})
OP_GRAPH(RESHAPE, {
  Value a = g.input("a", {Batch, 2, 6}, {.grad = true});
  g.loss(probe_loss(g, reshape(a, {Batch, 3, 4}), {a}));
})
OP_GRAPH(TRANSPOSE, {
  Value a = g.input("a", {Batch, 2, 3, 4}, {.grad = true});
  g.loss(probe_loss(g, transpose(a, 1, 3), {a}));
})
OP_GRAPH(MASKED_FILL, {
  Value a = g.input("a", {Batch, 3, 4}, {.grad = true});
  Value m = g.input("m", {Batch, 1, 4}, {.dtype = DType::index});
  g.loss(probe_loss(g, masked_fill(a, m, -7.0), {a}));
})
OP_GRAPH(MSE, {
  Value a = g.input("a", {Batch, 5}, {.grad = true});
  Value b = g.input("b", {Batch, 5}, {.grad = true});
  g.loss(mse(a, b) + sum(a * g.input("pa", a.shape())) + sum(b * g.input("pb", b.shape())));
})
OP_GRAPH(CROSS_ENTROPY, {
  Value a = g.input("a", {Batch, Seq, 5}, {.grad = true});
  Value t = g.input("t", {Batch, Seq}, {.dtype = DType::index});
  g.loss(cross_entropy(a, t, {.ignore_index = 2}) + sum(a * g.input("pa", a.shape())));
})

// Shapes large enough for the chunked kernel paths: bias reduction over > 64 columns, layer-norm
// parameter gradients with D > 64, a full sum over several 4096-element chunks, a matmul big
// enough to be split into GEMM blocks.
OP_GRAPH(ADD_BIAS_WIDE, {
  Value a = g.input("a", {Batch, 130}, {.grad = true});
  Value b = g.input("b", {130}, {.grad = true});
  g.loss(probe_loss(g, add(a, b), {a, b}));
})
OP_GRAPH(LAYER_NORM_WIDE, {
  Value a = g.input("a", {Batch, 5, 100}, {.grad = true});
  Value gamma = g.input("gamma", {100}, {.grad = true});
  Value beta = g.input("beta", {100}, {.grad = true});
  g.loss(probe_loss(g, layer_norm(a, gamma, beta), {a, gamma, beta}));
})
OP_GRAPH(SUM_ALL_CHUNKED, {
  Value a = g.input("a", {Batch, 5000}, {.grad = true});
  g.loss(probe_loss(g, sum(a), {a}));
})
OP_GRAPH(MATMUL_BLOCKED, {
  Value a = g.input("a", {Batch, 600, 40}, {.grad = true});
  Value b = g.input("b", {50, 40}, {.grad = true});
  g.loss(probe_loss(g, matmul(a, b, {.trans_b = true}), {a, b}));
})

}  // namespace

TEST_CASE("gradcheck: kernels' chunked and blocked paths", "[ops][gradcheck]") {
  check<ADD_BIAS_WIDE>("add bias over 130 columns");
  check<LAYER_NORM_WIDE>("layer_norm D=100");
  check<SUM_ALL_CHUNKED>("sum over 15000 elements");
  check<MATMUL_BLOCKED>("matmul split into GEMM blocks");
}

TEST_CASE("gradcheck: elementwise ops with broadcasting", "[ops][gradcheck]") {
  check<ADD_BCAST>("add [B,3,4]+[3,1]");
  check<SUB_BCAST>("sub [2,1,5]-[3,5]");
  check<MUL_BCAST>("mul [B,7]*[7]");
  check<MUL_SELF>("mul a*a (aliased gradients)");
  check<RELU>("relu");
  check<SCALE>("scale");
}

TEST_CASE("gradcheck: matmul in every transpose form", "[ops][gradcheck]") {
  check<MATMUL_NN>("matmul NN, shared b");
  check<MATMUL_NT_BATCHED>("matmul NT, batched");
  check<MATMUL_TN>("matmul TN, batched");
  check<MATMUL_TT_SHARED>("matmul TT, shared b");
}

TEST_CASE("gradcheck: reductions", "[ops][gradcheck]") {
  check<SUM_AXIS>("sum axis 1 keepdim");
  check<SUM_ALL>("sum all");
  check<MEAN_AXIS>("mean axis -1");
  check<MEAN_ALL>("mean all");
}

TEST_CASE("gradcheck: softmax, layer_norm, shape ops, masks, losses", "[ops][gradcheck]") {
  check<SOFTMAX>("softmax");
  check<LAYER_NORM>("layer_norm");
  check<RESHAPE>("reshape");
  check<TRANSPOSE>("transpose 1<->3");
  check<MASKED_FILL>("masked_fill", {.index_range = 2});
  check<MSE>("mse");
  check<CROSS_ENTROPY>("cross_entropy with ignore_index", {.index_range = 5});
}
