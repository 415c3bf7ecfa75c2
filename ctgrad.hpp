// ctgrad: declaring, checking and training models, in one include:
//   graph/          Builder, Scope, Value, freeze, Program, gradcheck, Repeated, scan
//   ops/            every op; ops/kernels.hpp for writing an op's kernels
//   models/layers/  linear, norm, embedding, feed_forward, attention, residual, transformer_block
//   optim/          SGD, Adam(W), Adafactor, LAMB, parameter groups, clipping, schedules
// and, each its own include so that a model's translation unit does not compile them:
//   <ctgrad/training/trainer.hpp>     the Trainer, run folders, the training log
//   <ctgrad/training/config.hpp>      config schemas
//   <ctgrad/checkpoint/training.hpp>  training checkpoints (safetensors)
//   <ctgrad/data/...>                 the Debian corpora and data sets, tokenizers, batches
//   <ctgrad/models/gpt.hpp>, transformer.hpp, vit.hpp   the model families
#pragma once
#include <ctgrad/graph/gradcheck.hpp>
#include <ctgrad/graph/program.hpp>
#include <ctgrad/graph/repeated.hpp>
#include <ctgrad/graph/scan.hpp>
#include <ctgrad/ops/kernels.hpp>
#include <ctgrad/ops/ops.hpp>

#include <ctgrad/models/layers/layers.hpp>

#include <ctgrad/optim/optimizers.hpp>
#include <ctgrad/optim/schedule.hpp>
