// What the executor's files (executor*.cpp) share and nothing else includes: its allocation
// helpers and its private state.
#pragma once
#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>

#include <ctgrad/graph/executor.hpp>

namespace ctgrad::executor_detail {

constexpr std::size_t kAlign = 64;
constexpr std::size_t align_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

template <class T>
std::size_t elem_bytes(DType dt) {
  return dt == DType::index ? sizeof(std::int32_t) : sizeof(T);
}

// 64-byte aligned blocks. Blocks of 2 MB and more (parameters, gradients, the activation arena)
// start on a 2 MB boundary and ask the kernel for transparent huge pages: a GEMM's packing reads
// rows of an operand last touched long before, and with 4 KB pages each row can be a TLB miss
// (GPT medium's GEMMs 4-6% faster in its steps; docs/performance.md). The advice changes nothing
// where the host's THP mode is `never` or its kernel has none.

template <class U>
inline AlignedArray<U> aligned_array(std::size_t n) {
  constexpr std::size_t kHuge = std::size_t(2) << 20;
  n = std::max<std::size_t>(n, 1);
  if (n > (std::numeric_limits<std::size_t>::max() - kHuge) / sizeof(U)) throw std::bad_alloc();
  const std::size_t bytes = n * sizeof(U), align = bytes >= kHuge ? kHuge : kAlign;
  const std::size_t rounded = (bytes + align - 1) / align * align;  // whole huge pages for the advice
  void* p = ::operator new[](rounded, std::align_val_t(align));
#ifdef MADV_HUGEPAGE
  if (align == kHuge) ::madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return AlignedArray<U>(static_cast<U*>(p), AlignedFree{align});
}

inline AlignedArray<std::byte> alloc_bytes(std::size_t n) { return aligned_array<std::byte>(n); }

inline std::string declared(const Shape& s) { return std::string(Msg().add(s).view()); }

}  // namespace ctgrad::executor_detail

namespace ctgrad {

template <class T>
struct Executor<T>::NodeSet {
  const Node* nodes;
  TensorRef *val, *grad, *scratch;  // by node of `nodes`
  const int* outer = nullptr;       // a scan body's: the model's node each stands for (its options, clock)
  std::uint64_t tag = 0;            // a scan body's step, (t + 1) << 32, in the random ops' numbering
  bool replay = false;              // a step's forward run again in backward: the numbers it drew then
};

namespace executor_detail {
// One scan's run-time state (graph/executor_scan.cpp): its body's tensors, the layout of its
// memory at the bound dims, and what passes from its forward to its backward.
template <class T>
struct ScanRun {
  const ScanInfo* info = nullptr;
  const BodyView* body = nullptr;
  std::vector<TensorRef> val, grad, scratch;  // by body node
  std::vector<std::int8_t> carry_of, step_of;  // by body node: the state / sequence it is the input of, -1
  struct Layout {  // one plan's buffers: shared slots, then one block per step
    std::vector<std::size_t> off;  // by slot, within the shared part or within a step's block
    std::vector<char> per_step;    // by slot
    std::size_t shared = 0, step = 0;
  } layout[2];  // [train, infer]
  std::int64_t steps = 0, batch = 0;
  AlignedArray<std::byte> mem;
  std::size_t mem_bytes = 0, used = 0;
  // Regions after the plans' blocks: the sequences time-major [L, batch, ...] (one step a
  // row block, strided by xs_stride), the masked states [L, ...], zero starts, the gradients
  // passed between steps, those of the final states and of the stacked outputs.
  std::array<std::size_t, kMaxScanValues> xs_off{}, xs_stride{}, carry_off{}, carry_stride{}, zero_off{},
      carry_grad_off{}, seq_grad_off{};
  std::size_t mask_off = 0;  // the mask [batch, L], copied: the results read it after the scan's inputs may be gone
  std::array<bool, kMaxScanValues> have_seq_grad{}, have_last_grad{};
  std::array<const void*, kMaxScanValues> final_state{};
  int mode = 0;  // the plan of its last forward
};
}  // namespace executor_detail

template <class T>
struct Executor<T>::Impl {
  std::vector<executor_detail::ScanRun<T>> scans;
  tbb::task_arena arena;
  // The options the last training forward ran with, kept when set_hyper changes one before its
  // backward: the VJPs must see what the forward saw (dropout regenerates its mask from its rate).
  std::vector<AttrWords> forward_attrs;
  bool forward_attrs_kept = false;
  explicit Impl(int threads) : arena(threads > 0 ? threads : tbb::info::default_concurrency()) {}
};

}  // namespace ctgrad
