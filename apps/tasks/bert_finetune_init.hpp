// How `ctgrad finetune bert` starts (bert_finetune.cpp): the optimizer's parameter groups and the
// pretrained run it reads.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <ctgrad/data/tokenizer.hpp>
#include <ctgrad/graph/executor.hpp>
#include <ctgrad/optim/optimizer.hpp>

#include "../task.hpp"

namespace ctgrad::cli::bert {

// Frozen first (lr 0), then no decay on biases and norms, then the encoder at encoder_lr x lr;
// the head's weights take the default.
std::vector<optim::Group> finetune_groups(const Config& c);
// A new run: the pretrained run's tokenizer (checked against its checkpoint, copied into this
// run's `own` file) and, unless init=scratch, its encoder's weights by name into `model`.
data::SentencePieceTokenizer start_from_pretrained(const Config& c, Executor<float>& model, const std::filesystem::path& own);

}  // namespace ctgrad::cli::bert
