// The decoder half of BART and Pegasus (and of LSG-BART / LSG-Pegasus, whose
// decoders are BART's / Pegasus') with its LM head, in LibTorch: causal
// self-attention with a KV cache, cross-attention over the encoder output,
// final_logits_bias.
//
// Cross-attention keys and values are kept per *sequence*, not per decoder
// row: every beam of a request attends to the same encoder output, so rows
// only carry the index of their sequence. Hugging Face repeats the encoder
// output per beam (repeat_interleave) and projects it per row; the numbers
// are the same, and a 16k-token input with 4 beams costs a quarter of the
// memory. Each sequence's keys stop at its last real encoder row, so no
// padding mask is needed.
#ifndef DOCSPARSE_MODEL_SEQ2SEQ_BART_DECODER_H_
#define DOCSPARSE_MODEL_SEQ2SEQ_BART_DECODER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint/bart_config.h"
#include "model/checkpoint/safetensors.h"
#include "model/encoder/linear.h"
#include "model/seq2seq/bart_encoder.h"

namespace docsparse {

// A decoder layer's products as every step runs them: fp32 weights packed
// once for oneDNN (model/encoder/linear.h), fc1 with its activation inside
// the product. Through at::linear, OpenBLAS copied ("packed") each weight
// matrix at every step, 60% of a greedy step. cross_kv runs once per
// request, on the encoder's output (StartDecoding).
struct BartDecoderLayerProducts {
  Linear self_qkv, self_out, cross_q, cross_kv, cross_out, fc1, fc2;
};

struct BartCrossAttentionWeights {
  at::Tensor q_weight, q_bias;    // encoder_attn.q_proj: [h, h], [h]
  at::Tensor kv_weight, kv_bias;  // k_proj, v_proj fused: [2h, h], [2h]
  at::Tensor out_weight, out_bias;
  at::Tensor norm_weight, norm_bias;  // encoder_attn_layer_norm
};

struct BartDecoderLayerWeights {
  // self_attn, self_attn_layer_norm, fc1, fc2, final_layer_norm.
  BartLayerWeights self;
  BartCrossAttentionWeights cross;
};

struct BartDecoderWeights {
  at::Tensor token_embeddings;     // [vocab, h]: shared / decoder.embed_tokens
  at::Tensor position_embeddings;  // [max_position_embeddings + position_offset(), h]
  at::Tensor embedding_norm_weight, embedding_norm_bias;  // BART: layernorm_embedding
  at::Tensor final_norm_weight, final_norm_bias;          // Pegasus: decoder.layer_norm
  std::vector<BartDecoderLayerWeights> layers;
  at::Tensor lm_head;            // [vocab, h]
  at::Tensor final_logits_bias;  // [vocab]
};

// Reads the decoder and LM head of a BART/Pegasus checkpoint (bare or under
// "model."). The LM head is the token embedding when tie_word_embeddings
// (HF ties it whatever lm_head.weight holds), else `lm_head.weight`;
// `final_logits_bias` ([1, vocab]) is zeros when absent, as HF's
// _keys_to_ignore_on_load_missing makes it. Errors name the tensor.
absl::StatusOr<BartDecoderWeights> LoadBartDecoderWeights(const Checkpoint& checkpoint,
                                                          const BartConfig& config);

// Cross-attention keys and values of a batch of encoder outputs, one entry
// per layer and sequence: [heads, valid_rows, head_dim].
struct CrossAttentionMemory {
  std::vector<std::vector<at::Tensor>> keys;    // [layer][sequence]
  std::vector<std::vector<at::Tensor>> values;  // [layer][sequence]
  int64_t sequences() const { return keys.empty() ? 0 : static_cast<int64_t>(keys[0].size()); }
};

// The self-attention cache of the decoder rows: per layer a [rows, heads,
// capacity, head_dim] buffer whose positions [0, past) hold the keys (values
// alike). All rows have the same `past` (they step together). A step writes
// its keys in place; the buffers double when full, so a token costs no copy
// of the cache (concatenating copied it whole at every step and layer).
struct SelfAttentionCache {
  std::vector<at::Tensor> keys;    // [layer]; undefined until the first step
  std::vector<at::Tensor> values;  // [layer]
  int64_t past = 0;

  // Writes the step's `k` and `v` ([rows, heads, steps, head_dim]) at
  // positions [past, past + steps) of `layer` (growing its buffers as
  // needed) and returns that layer's keys and values [0, past + steps) as
  // views. `past` itself moves on when the whole step is done.
  std::pair<at::Tensor, at::Tensor> Append(int layer, const at::Tensor& k, const at::Tensor& v);

  // Keeps rows `source` ([new_rows] int64, on the CPU) in that order. Rows
  // whose source is themselves are not touched; with the row count
  // unchanged only the rows that change are copied, in place.
  void SelectRows(const at::Tensor& source);
};

// Immutable; every method may run on several threads at once (the caches
// are the caller's).
class BartDecoder {
 public:
  // On a CUDA `device` the weights live there in `precision`'s type (kFp32
  // or kBf16); Forward takes tokens on any device and returns the logits
  // there, in that type.
  BartDecoder(BartConfig config, BartDecoderWeights weights, at::Device device = at::kCPU,
              Precision precision = Precision::kFp32);

  // Projects every layer's cross-attention keys/values once. `hidden`:
  // [batch, rows, h] float32; sequence b's real rows are [0, valid_rows[b]).
  // Adds the projection FLOPs to *flops. InvalidArgument on a shape
  // mismatch or a valid_rows entry outside [1, rows].
  absl::StatusOr<CrossAttentionMemory> Attend(const at::Tensor& hidden,
                                              const std::vector<int64_t>& valid_rows,
                                              double* flops) const;

  // Runs `tokens` ([rows, steps] int64: each row's next `steps` tokens, at
  // positions cache->past ...) with causal self-attention over the cache and
  // the new tokens, and cross-attention of row r over sequence
  // row_sequence[r] of `memory`. Appends the new keys/values to *cache and
  // returns the logits [rows, steps, vocab] float32 (final_logits_bias
  // included). steps = 1 is one generation step; steps > 1 with an empty
  // cache is the teacher-forced forward. Adds the matmul FLOPs to *flops.
  // InvalidArgument for ids outside the vocabulary, positions beyond
  // max_positions(), or rows that do not match the cache / row_sequence
  // (the cache is unchanged); after an Internal error the cache is unusable.
  absl::StatusOr<at::Tensor> Forward(const at::Tensor& tokens,
                                     const std::vector<int64_t>& row_sequence,
                                     const CrossAttentionMemory& memory, SelfAttentionCache* cache,
                                     double* flops) const;

  // Decoder positions the position table has room for.
  int64_t max_positions() const { return config_.decoder_max_position_embeddings; }
  at::Device device() const { return device_; }
  const BartConfig& config() const { return config_; }

 private:
  at::Tensor SelfAttention(const at::Tensor& x, const BartDecoderLayerProducts& p, int layer,
                           SelfAttentionCache* cache, double* flops) const;
  at::Tensor CrossAttention(const at::Tensor& x, const BartDecoderLayerProducts& p,
                            const std::vector<at::Tensor>& keys,
                            const std::vector<at::Tensor>& values,
                            const std::vector<int64_t>& row_sequence, double* flops) const;
  at::Tensor LayerNorm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const;

  BartConfig config_;
  at::Device device_;
  at::ScalarType type_;
  // Whether a step's attention runs on our CPU executors
  // (decoder_attention.h), else on LibTorch's products.
  bool attention_in_place_;
  // The layers' products live in products_ (their tensors in
  // weights_.layers are released); the embeddings and norms stay tensors.
  BartDecoderWeights weights_;
  std::vector<BartDecoderLayerProducts> products_;
  Linear lm_head_;  // lm_head and final_logits_bias
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_SEQ2SEQ_BART_DECODER_H_
