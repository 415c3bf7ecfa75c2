// The executor: runs a planned graph. It is not a template over the graph — Program<G> hands it
// views of the compile-time tables — so it is compiled once, in the library, for float and double.
#pragma once
#include <functional>
#include <optional>
#include <memory>
#include <vector>

#include <ctgrad/graph/plan.hpp>
#include <ctgrad/graph/tensor.hpp>

namespace ctgrad {

struct BodyView;

struct GraphView {
  const Node* nodes;
  int n;
  const char* names;
  int loss;
  const DerivedSymbol* derived;  // [kMaxSymbols]
  const ScanInfo* scans = nullptr;  // graph/scan.hpp: [n_scans], each with its body's plans
  int n_scans = 0;
  const BodyView* bodies = nullptr;
  std::string_view str(int off, int len) const { return {names + off, static_cast<std::size_t>(len)}; }
  std::string_view name(int i) const { return str(nodes[i].name_off, nodes[i].name_len); }
};

struct PlanView {
  bool training;
  int n_fwd, n_bwd;
  const int *fwd_order, *fwd_begin, *bwd_order, *bwd_begin, *zero_order, *zero_begin;
  const bool *needs_grad, *runs_vjp, *grad_fresh, *vjp_skip;
  const unsigned* assigns;
  const Buffer* buffers;
  int n_buffers, n_slots;
  const int *value_buf, *grad_buf, *scratch_buf, *view_of;

  template <int N>
  static constexpr PlanView of(const Plan<N>& p) {
    return {p.training,         p.n_fwd,             p.n_bwd,
            p.fwd_order.data(), p.fwd_begin.data(),  p.bwd_order.data(),
            p.bwd_begin.data(), p.zero_order.data(), p.zero_begin.data(),
            p.needs_grad.data(), p.runs_vjp.data(),  p.grad_fresh.data(), p.vjp_skip.data(),
            p.assigns.data(),   p.buffers.data(),
            p.n_buffers,        p.n_slots,           p.value_buf.data(),
            p.grad_buf.data(),  p.scratch_buf.data(), p.view_of.data()};
  }
};

// A scan's body cut out as a graph of its own (graph/scan_plan.hpp): its nodes (the first
// n_captures stand for values it reads from outside), the model's node each stands for, its plans.
struct BodyView {
  const Node* nodes;
  int n;
  const int* outer;
  int n_captures;
  PlanView train, infer;
};

// One node's share of the time (Executor::op_profile). Nodes of one plan step run concurrently, so
// their times overlap: summed, they can exceed the step's wall time.
struct OpTime {
  std::string_view node, op;  // "layers.2.attn.softmax", "softmax"
  double forward_s = 0, vjp_s = 0;
  std::int64_t forward_runs = 0, vjp_runs = 0;
};
// A table of the time by op (all nodes of an op together), the costliest first, at most `rows`
// rows and a total; per step when `steps` > 0.
std::string format_op_profile(std::span<const OpTime> times, std::int64_t steps = 0, int rows = 20);

struct AlignedFree {
  std::size_t align = 64;  // what the block was made with: operator delete[] must be told the same
  void operator()(void* p) const noexcept;
};
template <class U>
using AlignedArray = std::unique_ptr<U[], AlignedFree>;

template <class T>
class Executor {
 public:
  Executor(GraphView g, PlanView train, PlanView infer, Options opts);
  virtual ~Executor();  // programs are held as Executor<T> (a Program<run_time> holds its tables)
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Copies an input in; its shape binds the runtime symbols (Batch, Seq, ...).
  void set_input(std::string_view name, std::span<const T> data, std::span<const std::int64_t> shape);
  void set_input(std::string_view name, std::span<const std::int32_t> data,
                 std::span<const std::int64_t> shape);
  void set_input(std::string_view name, std::span<const T> data, std::initializer_list<std::int64_t> shape) {
    set_input(name, data, std::span<const std::int64_t>(shape.begin(), shape.size()));
  }
  void set_input(std::string_view name, std::span<const std::int32_t> data,
                 std::initializer_list<std::int64_t> shape) {
    set_input(name, data, std::span<const std::int64_t>(shape.begin(), shape.size()));
  }

  void forward(Mode mode = Mode::train);
  // Adds d(loss)/d(param) into the parameter gradients. A graph without a loss is seeded with
  // the gradients given to set_output_grad for each of its outputs.
  void backward();
  void set_output_grad(std::string_view output, std::span<const T> grad);
  void zero_grad();
  // backward() runs in backward_steps() steps; after step b the gradient of parameter i is final
  // when gradient_ready_steps()[i] <= b (-1: no gradient flows to it). A hook called after each
  // step, on the calling thread, lets data parallelism send finished gradients while the rest of
  // the backward pass runs. Keep it short: it holds up the next step.
  int backward_steps() const { return plan_[0].n_bwd; }
  std::vector<int> gradient_ready_steps() const;
  void set_backward_hook(std::function<void(int step)> hook) { backward_hook_ = std::move(hook); }

  TensorView<T> output(std::string_view name) const;
  TensorView<const std::int32_t> index_output(std::string_view name) const;  // an int32 output (a mask, ids)

  T loss() const;
  TensorView<T> input_grad(std::string_view name) const;  // inputs declared In{.grad = true}
  // The stored data of a real input, writable in place (after a set_input).
  TensorView<T> input_data(std::string_view name);
  // Names of the inputs declared In{.grad = true}.
  std::vector<std::string_view> grad_inputs() const;

  std::span<const Parameter<T>> parameters() const { return params_; }
  std::int64_t parameter_count() const;  // elements of all parameters
  // Elements of the parameters read as embedding tables (the table of an `embedding` or a
  // `prefix_rows` op: token and learned position embeddings), which scaling laws leave out of a
  // model's size (Kaplan et al. 2020). A tied output projection counts as its embedding.
  std::int64_t embedding_parameter_count() const;
  const Parameter<T>& parameter(std::string_view name) const;
  // All parameter values (and gradients) as one contiguous span: vectorised optimizer updates.
  std::span<T> parameter_values() { return {param_values_.get(), param_total_}; }
  std::span<T> parameter_grads() { return {param_grads_.get(), param_total_}; }
  void init_parameters(std::uint64_t seed);

  // Hyperparameters (Scope::hyper): named numbers the ops read at run time. set_hyper checks the
  // value with the shape rule of every op that uses it (dropout in [0, 1), ...) and throws
  // std::invalid_argument naming the op, keeping the old value, if one refuses it. A value set
  // between a training forward() and its backward() applies from the next forward(): the
  // backward runs with the values its forward ran with (dropout's masks match).
  struct Hyper {
    std::string_view name;
    double value, default_value;
  };
  std::span<const Hyper> hypers() const { return hypers_; }
  double hyper(std::string_view name) const;
  void set_hyper(std::string_view name, double value);

  // Where a step's time goes, op by op (Options::profile_ops): each node's wall time in forward and
  // VJP summed over the runs since the last reset, in graph order; empty when not profiling.
  std::vector<OpTime> op_profile() const;
  void reset_op_profile();
  bool profiling_ops() const { return profile_; }

  int threads() const;
  // Runs f on this program's threads (its oneTBB arena): an optimizer step or other parallel work
  // between steps then uses Options::threads too, not every core of the machine.
  void execute(const std::function<void()>& f);
  std::int64_t symbol(Dim s) const;  // bound value of a runtime symbol, -1 if unbound
  std::size_t arena_bytes() const { return arena_bytes_ + scan_bytes_; }  // scans' memory included
  // Bytes the plan of a mode needs at the currently bound dims.
  std::size_t plan_bytes(Mode m) const;
  // Bytes the plan of a mode would need with the runtime symbols at these values (Batch, Seq,
  // ...), without binding them; empty when the size overflows 64 bits. For checking a config
  // against the machine before anything is allocated.
  std::optional<std::size_t> plan_bytes_at(Mode m, const std::array<std::int64_t, kMaxSymbols>& sym) const;
  // The RNG step: training forward() number n draws dropout masks from step n (Mode::infer does not count). Setting it replays the
  // same random numbers (gradcheck; resuming from a checkpoint).
  std::int64_t steps() const { return step_; }
  void set_steps(std::int64_t s) { step_ = s; }
  // The seed of the random ops (dropout); with steps() it is the whole RNG state.
  std::uint64_t seed() const { return dropout_seed_; }
  void set_seed(std::uint64_t s) { dropout_seed_ = s; }
  // Data parallelism: this process is shard `s` of equal shards of each global batch (rows
  // s x B .. (s + 1) x B); dropout then draws the masks of those rows of the global batch.
  std::uint64_t random_shard() const { return shard_; }
  void set_random_shard(std::uint64_t s) { shard_ = s; }

 private:
  struct Impl;
  int find_input(std::string_view name) const;
  int find_output(std::string_view name) const;
  void copy_input(int node, const void* data, std::size_t bytes, std::span<const std::int64_t> shape,
                  DType dt);
  void check_inputs();
  void layout(const PlanView& p, std::vector<std::size_t>& offsets, std::size_t& total) const;
  void place(Mode m);
  void run_step(const PlanView& p, const int* order, int begin, int end, bool vjp);
  // The nodes of a plan step, the model's or a scan body's (graph/executor_scan.cpp).
  struct NodeSet;
  void run_nodes(const PlanView& p, const NodeSet& set, const int* order, int begin, int end, bool vjp);
  void zero_step_gradients(const PlanView& p, const TensorRef* grad, int b);
  void place_scans();
  std::optional<std::size_t> scan_bytes_at(const std::array<std::int64_t, kMaxSymbols>& sym) const;
  void scan_forward(int node, Mode mode);
  void scan_backward(int node);
  void scan_result_forward(int node);
  void scan_result_vjp(int node);
  TensorRef ref(int node, void* data) const;
  [[noreturn]] void fail_input(int node, const std::string& why) const;

  int find_hyper(std::string_view name) const;
  double resolve(const Real& r) const;

  GraphView g_;
  PlanView plan_[2];  // [train, infer]
  Options opts_;
  std::uint64_t dropout_seed_ = 0, shard_ = 0;
  std::function<void(int)> backward_hook_;
  std::unique_ptr<Impl> impl_;
  std::vector<Hyper> hypers_;
  std::vector<int> hyper_index_;  // node -> index in hypers_, -1
  std::vector<AttrWords> attrs_;  // each node's options with the hyperparameters' current values


  std::vector<std::string> param_names_;
  std::vector<Parameter<T>> params_;
  std::vector<int> param_index_;  // node -> index in params_, -1
  std::size_t param_total_ = 0;
  AlignedArray<T> param_values_, param_grads_;

  std::array<std::int64_t, kMaxSymbols> sym_{};      // bound values
  std::array<std::int64_t, kMaxSymbols> sized_for_{};  // dims the arena was laid out for
  bool sized_ = false;
  Mode placed_mode_ = Mode::train;
  bool placed_ = false;

  struct InputStore {
    AlignedArray<std::byte> data;
    std::size_t capacity = 0;
    std::array<std::int64_t, kMaxRank> dims{};
    int rank = -1;  // -1: never set
  };
  std::vector<InputStore> inputs_;  // by node; empty for non-inputs
  std::vector<InputStore> seeds_;   // by node: output gradients for a graph without a loss

  AlignedArray<std::byte> arena_;
  std::size_t arena_bytes_ = 0, scan_bytes_ = 0;
  std::vector<std::size_t> offsets_[2];  // slot -> byte offset, per plan
  std::size_t total_[2] = {0, 0};
  std::vector<TensorRef> val_, grad_, scratch_;
  std::int64_t step_ = 0;
  bool have_forward_ = false;
  bool poison_ = false;  // Options::poison_assigned_gradients
  bool profile_ = false;  // Options::profile_ops
  struct NodeClock {
    std::int64_t ns[2] = {0, 0}, runs[2] = {0, 0};  // [0] forward, [1] VJP
  };
  std::vector<NodeClock> clocks_;  // one per node when profiling
  Mode last_mode_ = Mode::train;
};

extern template class Executor<float>;
extern template class Executor<double>;

}  // namespace ctgrad
