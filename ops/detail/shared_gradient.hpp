// For VJPs of ops that declare OpDef::shares_grad (dropout, add, sub).
#pragma once
#include <stdexcept>

#include <ctgrad/graph/op.hpp>

namespace ctgrad::kernel {

// Whether the plan gave input k's gradient the output gradient's buffer (OpDef::shares_grad): it
// then already holds g, and the VJP must leave it alone (another input's gradient may still read
// g). A shared gradient the VJP is told to add to would be doubled: a plan bug, thrown.
inline bool shared_gradient(const OpArgs& a, int k) {
  if (a.gin[k].data != a.gout->data) return false;
  if (!a.assign(k)) throw std::logic_error("ctgrad: a VJP shares a gradient but is told to add to it (a plan bug)");
  return true;
}

}  // namespace ctgrad::kernel
