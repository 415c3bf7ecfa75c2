// What `ctgrad train bert` and `ctgrad finetune bert` share: the vocabulary's specials, and the
// text (text_corpus.hpp).
#pragma once
#include <ctgrad/data/mlm.hpp>

#include "text_corpus.hpp"

namespace ctgrad::cli::bert {

// The specials, in SentencePiece's id order (pad 0, unk 1, then the user-defined symbols).
inline constexpr data::MlmSpecials kSpecials{.pad = 0, .unk = 1, .cls = 2, .sep = 3, .mask = 4, .first_regular = 5};

using corpus::held_out_from;
using corpus::paragraphs;

}  // namespace ctgrad::cli::bert
