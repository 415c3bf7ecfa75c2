// Every layer.
#pragma once
#include <ctgrad/models/layers/attention.hpp>
#include <ctgrad/models/layers/block.hpp>
#include <ctgrad/models/layers/embedding.hpp>
#include <ctgrad/models/layers/feed_forward.hpp>
#include <ctgrad/models/layers/linear.hpp>
#include <ctgrad/models/layers/norm.hpp>
#include <ctgrad/models/layers/recurrent.hpp>
#include <ctgrad/models/layers/residual.hpp>
