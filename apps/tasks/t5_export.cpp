// `ctgrad export-batches t5` (t5_common.hpp): the batches a run draws, for another framework.
#include <algorithm>
#include <cstdio>
#include <span>

#include <ctgrad/checkpoint/safetensors.hpp>

#include "t5_common.hpp"

namespace ctgrad::cli::t5 {

int export_span_batches(const Config& o, const Config& c, data::SpanCorruptionBatches& train_batches, data::SpanCorruptionBatches& val_batches,
                      std::int64_t val_count, std::int64_t batch_, const data::SpanLengths& lengths, int vocab) {
  struct Set {
    std::vector<std::int32_t> src, src_len, tgt_in, tgt_out, rows;
    void add(const data::SpanCorruptionBatches& b, std::int64_t batch, std::int64_t S, std::int64_t T) {
      auto put = [&](std::vector<std::int32_t>& to, std::span<const std::int32_t> from, std::int64_t from_len, std::int64_t len) {
        const std::size_t at = to.size();
        to.resize(at + std::size_t(batch * len), kPad);
        for (std::int64_t r = 0; r < b.batch(); ++r) std::copy_n(from.begin() + r * from_len, from_len, to.begin() + std::ptrdiff_t(at) + r * len);
      };
      put(src, b.inputs(), b.input_length(), S);
      put(tgt_in, b.decoder_inputs(), b.target_length(), T);
      put(tgt_out, b.targets(), b.target_length(), T);
      src_len.insert(src_len.end(), b.input_lengths().begin(), b.input_lengths().end());
      src_len.resize(src_len.size() + std::size_t(batch - b.batch()), 0);
      rows.push_back(std::int32_t(b.batch()));
    }
  } train, val;
  const std::int64_t steps = o.integer("steps"), S = lengths.inputs, T = lengths.targets;
  for (std::int64_t step = 1; step <= steps && !training::interrupted(); ++step) train_batches.draw(std::uint64_t(step)), train.add(train_batches, batch_, S, T);
  for (std::int64_t first = 0; first < val_count && !training::interrupted(); first += batch_)
    val_batches.rows(first, std::min<std::int64_t>(batch_, val_count - first)), val.add(val_batches, batch_, S, T);
  if (training::interrupted()) return 130;
  std::vector<checkpoint::TensorView> t;
  for (auto [name, set] : {std::pair{"train", &train}, std::pair{"val", &val}}) {
    const std::int64_t n = std::int64_t(set->rows.size());
    const std::string p(name);
    t.push_back(checkpoint::view_of<std::int32_t>(p + ".src", set->src, {n, batch_, S}));
    t.push_back(checkpoint::view_of<std::int32_t>(p + ".src_len", set->src_len, {n, batch_}));
    t.push_back(checkpoint::view_of<std::int32_t>(p + ".tgt_in", set->tgt_in, {n, batch_, T}));
    t.push_back(checkpoint::view_of<std::int32_t>(p + ".tgt_out", set->tgt_out, {n, batch_, T}));
    t.push_back(checkpoint::view_of<std::int32_t>(p + ".rows", set->rows, {n}));
  }
  checkpoint::save(o.text("out"), t, {{"vocab", std::to_string(vocab)}, {"config", c.to_json()}});
  std::printf("wrote %s: %lld training batches and %zu validation batches of %lld x (%lld inputs, %lld targets)\n", o.text("out").c_str(),
              (long long)steps, val.rows.size(), (long long)batch_, (long long)S, (long long)T);
  return 0;
}

}  // namespace ctgrad::cli::t5
