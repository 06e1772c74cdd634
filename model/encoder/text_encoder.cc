#include "model/encoder/text_encoder.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/encoder/pooling.h"

namespace docsparse {

TextEncoder::TextEncoder(const Tokenizer& tokenizer, const Encoder& encoder, int max_batch_size)
    : tokenizer_(tokenizer), encoder_(encoder), max_batch_size_(std::max(1, max_batch_size)) {}

absl::StatusOr<DocumentWindows> TextEncoder::Windows(const std::vector<int32_t>& ids,
                                                     OverflowPolicy overflow) const {
  const size_t limit = static_cast<size_t>(encoder_.max_sequence_length());
  const size_t room = limit - 2;  // [CLS] ... [SEP]
  DocumentWindows result;
  if (ids.size() <= room) {
    result.windows.push_back(tokenizer_.Frame(ids, limit));
    return result;
  }
  switch (overflow) {
    case OverflowPolicy::kReject:
      return absl::ResourceExhaustedError(
          absl::StrCat("document has ", ids.size() + 2, " tokens; the model reads at most ", limit,
                       " (set options.overflow to TRUNCATE or CHUNK)"));
    case OverflowPolicy::kTruncate:
      result.windows.push_back(tokenizer_.Frame(ids, limit));
      result.truncated = true;
      return result;
    case OverflowPolicy::kChunk:
      // Equal-sized windows rather than full ones plus a short tail, so the
      // last window carries as much context as the others.
      const size_t count = (ids.size() + room - 1) / room;
      const size_t size = (ids.size() + count - 1) / count;
      for (size_t begin = 0; begin < ids.size(); begin += size) {
        const size_t end = std::min(ids.size(), begin + size);
        result.windows.push_back(
            tokenizer_.Frame(std::vector<int32_t>(ids.begin() + begin, ids.begin() + end), limit));
      }
      return result;
  }
  return absl::InvalidArgumentError("unknown overflow policy");
}

absl::StatusOr<PooledSequences> TextEncoder::EncodeSequences(
    const std::vector<std::vector<int32_t>>& sequences, const std::vector<CostAccount*>& row_costs,
    const std::vector<ItemAttentionOptions>& attention,
    const std::function<bool(size_t sequence)>& abandoned) const {
  const int64_t hidden = encoder_.config().hidden_size;
  const int64_t count = static_cast<int64_t>(sequences.size());
  PooledSequences pooled{at::zeros({count, hidden}, at::kFloat),
                         at::zeros({count, hidden}, at::kFloat)};
  if (!row_costs.empty() && row_costs.size() != sequences.size()) {
    return absl::InvalidArgumentError("row_costs: one entry per sequence expected");
  }
  if (!attention.empty() && attention.size() != sequences.size()) {
    return absl::InvalidArgumentError("attention: one entry per sequence expected");
  }
  // Sort by length so each forward batch pads little.
  std::vector<size_t> order(sequences.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sequences[a].size() < sequences[b].size(); });
  // Sequences nobody waits for leave before their forward batch forms.
  if (abandoned) {
    order.erase(std::remove_if(order.begin(), order.end(), abandoned), order.end());
  }
  c10::InferenceMode inference_mode;
  for (size_t first = 0, last = 0; first < order.size(); first = last) {
    // At most max_batch_size sequences, and none over 4x the shortest: a
    // long document and its short label prompts pad to the document's
    // length otherwise (7x the feed-forward work for 6 labels).
    last = first + 1;
    while (last < order.size() && last - first < static_cast<size_t>(max_batch_size_) &&
           sequences[order[last]].size() <= 4 * sequences[order[first]].size()) {
      ++last;
    }
    EncoderBatch batch;
    std::vector<CostAccount*> costs;
    for (size_t i = first; i < last; ++i) {
      batch.sequences.push_back(sequences[order[i]]);
      costs.push_back(row_costs.empty() ? nullptr : row_costs[order[i]]);
      if (!attention.empty()) batch.attention_options.push_back(attention[order[i]]);
    }
    if (abandoned) {
      batch.abandoned = [&abandoned, &order, first](size_t row) {
        return abandoned(order[first + row]);
      };
    }
    absl::StatusOr<EncoderOutput> forward = encoder_.Forward(batch, costs);
    // Every sequence of this forward batch was abandoned while it ran.
    if (abandoned && absl::IsCancelled(forward.status())) continue;
    ASSIGN_OR_RETURN(EncoderOutput output, std::move(forward));
    const at::Tensor mean = Pool(output.hidden, output.lengths, PoolingMode::kMean);
    const at::Tensor cls = Pool(output.hidden, output.lengths, PoolingMode::kCls);
    for (size_t i = first; i < last; ++i) {
      const int64_t row = static_cast<int64_t>(order[i]);
      pooled.mean[row].copy_(mean[static_cast<int64_t>(i - first)]);
      pooled.first[row].copy_(cls[static_cast<int64_t>(i - first)]);
    }
  }
  return pooled;
}

absl::StatusOr<at::Tensor> TextEncoder::EmbedSequences(
    const std::vector<std::vector<int32_t>>& sequences, PoolingMode pooling, bool normalize,
    CostAccount* cost) const {
  ASSIGN_OR_RETURN(PooledSequences pooled,
                   EncodeSequences(sequences, std::vector<CostAccount*>(sequences.size(), cost)));
  c10::InferenceMode inference_mode;
  at::Tensor rows = pooling == PoolingMode::kCls ? pooled.first : pooled.mean;
  return normalize ? L2Normalize(rows) : rows;
}

absl::StatusOr<at::Tensor> TextEncoder::EmbedTexts(const std::vector<std::string>& texts,
                                                   PoolingMode pooling, bool normalize,
                                                   CostAccount* cost) const {
  std::vector<std::vector<int32_t>> sequences;
  sequences.reserve(texts.size());
  const size_t limit = static_cast<size_t>(encoder_.max_sequence_length());
  for (const std::string& text : texts) {
    sequences.push_back(tokenizer_.Frame(tokenizer_.Encode(text), limit));
  }
  return EmbedSequences(sequences, pooling, normalize, cost);
}

at::Tensor CombineWindows(const at::Tensor& window_rows,
                          const std::vector<std::vector<int32_t>>& windows, bool normalize) {
  c10::InferenceMode inference_mode;
  std::vector<float> weights;
  for (const std::vector<int32_t>& window : windows) {
    weights.push_back(static_cast<float>(window.size()));
  }
  const at::Tensor w = at::tensor(weights, at::kFloat).unsqueeze(1);
  const at::Tensor embedding = (window_rows * w).sum(0) / w.sum();
  return normalize ? L2Normalize(embedding.unsqueeze(0)).squeeze(0) : embedding;
}

}  // namespace docsparse
