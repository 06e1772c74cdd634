// Text -> embeddings on top of a Tokenizer and an Encoder: documents of any
// length (overflow policy: reject, truncate, or chunk into windows) and lists
// of short texts (sentences, labels), batched by length.
#ifndef DOCSPARSE_MODEL_ENCODER_TEXT_ENCODER_H_
#define DOCSPARSE_MODEL_ENCODER_TEXT_ENCODER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/attention/cost_model.h"
#include "model/checkpoint/serving_config.h"
#include "model/encoder/encoder.h"
#include "model/text/tokenizer.h"

namespace docsparse {

struct DocumentWindows {
  std::vector<std::vector<int32_t>> windows;  // framed with special tokens
  bool truncated = false;
};

// Both poolings of encoded sequences, unnormalised; rows in input order.
struct PooledSequences {
  at::Tensor mean;   // [sequences, h]
  at::Tensor first;  // [sequences, h]: the first ([CLS]) token
};

// A document's embedding from its windows' pooled rows [windows, h]: their
// mean weighted by window length (for mean pooling, exactly the mean over
// every token), normalised if asked. Returns [h].
at::Tensor CombineWindows(const at::Tensor& window_rows,
                          const std::vector<std::vector<int32_t>>& windows, bool normalize);

// Borrows the tokenizer and encoder, which must outlive it. Thread-safe.
class TextEncoder {
 public:
  TextEncoder(const Tokenizer& tokenizer, const Encoder& encoder, int max_batch_size);

  // Splits unframed document ids into framed windows of at most the model's
  // sequence length. REJECT of an over-long document is RESOURCE_EXHAUSTED
  // naming the limit.
  absl::StatusOr<DocumentWindows> Windows(const std::vector<int32_t>& ids,
                                          OverflowPolicy overflow) const;

  // Embeds each text (truncated to the model's length) in batches of similar
  // length; returns [texts, h] in input order.
  absl::StatusOr<at::Tensor> EmbedTexts(const std::vector<std::string>& texts, PoolingMode pooling,
                                        bool normalize, CostAccount* cost) const;

  // Encodes framed sequences in forward batches of similar length (at most
  // max_batch_size sequences each, none over 4x the batch's shortest), adding sequence i's cost to
  // row_costs[i] (empty: not counted). Requests batched together pass their sequences here at once,
  // with each sequence's attention options (empty: defaults).
  //
  // `abandoned` (may be empty) says whether nobody waits for sequence i any
  // more; it is polled before each forward batch and each layer, and such
  // sequences stop computing (EncoderBatch::abandoned). Their pooled rows
  // are zeros: the caller answers their requests without them.
  absl::StatusOr<PooledSequences> EncodeSequences(
      const std::vector<std::vector<int32_t>>& sequences,
      const std::vector<CostAccount*>& row_costs,
      const std::vector<ItemAttentionOptions>& attention = {},
      const std::function<bool(size_t sequence)>& abandoned = nullptr) const;

  // One pooling of already framed sequences, all costs to `cost`.
  absl::StatusOr<at::Tensor> EmbedSequences(const std::vector<std::vector<int32_t>>& sequences,
                                            PoolingMode pooling, bool normalize,
                                            CostAccount* cost) const;

  const Tokenizer& tokenizer() const { return tokenizer_; }
  const Encoder& encoder() const { return encoder_; }

 private:
  const Tokenizer& tokenizer_;
  const Encoder& encoder_;
  int max_batch_size_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ENCODER_TEXT_ENCODER_H_
