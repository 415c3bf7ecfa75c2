// ctgrad: the whole public API in one include. The parts, for a narrower include:
//   graph/    Builder, Scope, Value, freeze, Program, gradcheck, Repeated   (ctgrad/graph/*.hpp)
//   ops/      every op, and ops/kernels.hpp for writing an op's kernels
//   models/layers/  linear, norm, embedding, feed_forward, attention, residual, transformer_block
//   optim/    SGD, Adam(W), Adafactor, LAMB, parameter groups, clipping, schedules
//   checkpoint/  safetensors files, training checkpoints
//   data/     the Debian corpora and data sets, tokenizers, batches
//   training/ config schemas, the run folder, the training log, the Trainer
// The model families (models/gpt.hpp, transformer.hpp, vit.hpp) are included on their own.
#pragma once
#include <ctgrad/graph/gradcheck.hpp>
#include <ctgrad/graph/program.hpp>
#include <ctgrad/graph/repeated.hpp>
#include <ctgrad/ops/kernels.hpp>
#include <ctgrad/ops/ops.hpp>

#include <ctgrad/models/layers/layers.hpp>

#include <ctgrad/optim/optimizers.hpp>
#include <ctgrad/optim/schedule.hpp>

#include <ctgrad/checkpoint/training.hpp>

#include <ctgrad/data/batches.hpp>
#include <ctgrad/data/idx.hpp>
#include <ctgrad/data/pairs.hpp>
#include <ctgrad/data/text.hpp>
#include <ctgrad/data/tokenizer.hpp>

#include <ctgrad/training/config.hpp>
#include <ctgrad/training/trainer.hpp>
