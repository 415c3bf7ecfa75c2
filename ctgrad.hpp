// ctgrad: the whole public API in one include.
#pragma once
#include <ctgrad/graph/gradcheck.hpp>
#include <ctgrad/graph/program.hpp>
#include <ctgrad/ops/ops.hpp>
#include <ctgrad/graph/repeated.hpp>
