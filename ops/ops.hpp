// Every built-in op.
#pragma once
#include <ctgrad/ops/elementwise.hpp>
#include <ctgrad/ops/loss.hpp>
#include <ctgrad/ops/mask.hpp>
#include <ctgrad/ops/matmul.hpp>
#include <ctgrad/ops/norm.hpp>
#include <ctgrad/ops/reduce.hpp>
#include <ctgrad/ops/shape.hpp>
#include <ctgrad/ops/softmax.hpp>
#include <ctgrad/ops/unary.hpp>
#include <ctgrad/ops/index.hpp>
#include <ctgrad/ops/linear.hpp>
#include <ctgrad/ops/random.hpp>
#include <ctgrad/ops/attention.hpp>
#include <ctgrad/ops/position.hpp>
#include <ctgrad/ops/rotary.hpp>
#include <ctgrad/ops/select.hpp>
