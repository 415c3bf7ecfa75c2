// What the graph records of a scan (graph/scan.hpp): where its body's nodes are and what plays
// which part. The executor runs the body from this, the compile-time plans cut it out by it.
#pragma once
#include <array>

namespace ctgrad {

inline constexpr int kMaxScanValues = 8;  // states, sequences and step outputs of one scan, each

struct ScanInfo {
  int node = -1;                     // the scan op (its value is a one-element token)
  int region = 0;                    // Node::region of its body's nodes
  int body_begin = 0, body_end = 0;  // the body's nodes: [body_begin, body_end) of the node table
  int n_states = 0, n_xs = 0, n_outs = 0;
  bool reverse = false;    // from the last step to the first
  bool recompute = false;  // backward runs each step's forward again instead of keeping its values
  int mask_input = -1;     // the scan op's input holding the int32 mask [Batch, L], -1: none
  int first_capture = 0, n_captures = 0;  // the scan op's inputs the body reads from outside
  // Per state k: its body input (carry), its new value (a body node), the scan op's input holding
  // its initial value (-1: zeros) and the node reading its final value.
  std::array<int, kMaxScanValues> carry{}, state_out{}, init_input{}, last{};
  // Per sequence k: its step slice (a body input) and the scan op's input holding it.
  std::array<int, kMaxScanValues> step{}, xs_input{};
  // Per step output k: the body node and the node holding all steps stacked.
  std::array<int, kMaxScanValues> out{}, seq{};
};

}  // namespace ctgrad
