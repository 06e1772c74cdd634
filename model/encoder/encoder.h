// BERT-family encoder (BERT, RoBERTa, DistilBERT, Longformer, ModernBERT) in LibTorch,
// with the attention delegated to an AttentionMechanism so sparse planners
// plug in.
#ifndef DOCSPARSE_MODEL_ENCODER_ENCODER_H_
#define DOCSPARSE_MODEL_ENCODER_ENCODER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/attention/attention.h"
#include "model/attention/cost_model.h"
#include "model/checkpoint/hf_config.h"
#include "model/checkpoint/precision.h"
#include "model/encoder/linear.h"

namespace docsparse {

struct EncoderLayerWeights {
  at::Tensor qkv_weight, qkv_bias;  // [3h, h], [3h]: q, k, v fused
  at::Tensor output_weight, output_bias;
  at::Tensor attention_norm_weight, attention_norm_bias;
  at::Tensor intermediate_weight, intermediate_bias;
  at::Tensor ffn_output_weight, ffn_output_bias;
  at::Tensor output_norm_weight, output_norm_bias;
  // Longformer: query_global, key_global, value_global fused like qkv;
  // undefined for the other architectures.
  at::Tensor global_qkv_weight, global_qkv_bias;
};

// One layer as it runs: the products packed for the encoder's precision
// (linear.h), the LayerNorm parameters in fp32.
struct EncoderLayer {
  Linear qkv, output, intermediate, ffn_output;
  at::Tensor attention_norm_weight, attention_norm_bias;
  at::Tensor output_norm_weight, output_norm_bias;
  // Longformer's projections for its global tokens
  // (AttentionInputs::global_projections): query_global, and key_global
  // with value_global fused; empty otherwise.
  std::optional<Linear> global_query, global_key_value;
};

struct EncoderWeights {
  at::Tensor word_embeddings;        // [vocab, h]
  at::Tensor position_embeddings;    // [positions, h]
  at::Tensor token_type_embeddings;  // [types, h]; undefined for DistilBERT
  at::Tensor embedding_norm_weight, embedding_norm_bias;
  // LSG checkpoints: [512, h], the reference's table of global token
  // embeddings (the first num_global_tokens rows are used).
  at::Tensor global_embeddings;
  // ModernBERT: the final LayerNorm after the last layer; undefined
  // otherwise. (ModernBERT also has no position table, and its first layer
  // no attention norm: those tensors are undefined.)
  at::Tensor final_norm_weight, final_norm_bias;
  std::vector<EncoderLayerWeights> layers;
};

// Reads the weights of `config`'s architecture from a checkpoint folder
// (model.safetensors or a sharded index), accepting both bare names and the
// "bert." / "roberta." / "distilbert." / "longformer." / "model." (ModernBERT)
// prefixes of task checkpoints (biases a ModernBERT config leaves out are
// zeros), and
// converting F16/BF16 to F32. Shapes are checked against the config.
absl::StatusOr<EncoderWeights> LoadEncoderWeights(const std::string& model_dir,
                                                  const EncoderConfig& config);

// A padded batch: one row of ids per sequence, with special tokens.
struct EncoderBatch {
  std::vector<std::vector<int32_t>> sequences;
  // Optional segment ids (sentence pairs), shaped like `sequences`; empty
  // means segment 0 everywhere.
  std::vector<std::vector<int32_t>> token_types;
  // Per sequence, what its request's budget chose; empty means defaults.
  std::vector<ItemAttentionOptions> attention_options;
  // Optional: whether nobody waits any more for sequence i's result (its
  // client left, its deadline passed). Polled before every layer, so that
  // abandoned work stops within one layer: the encoder drops such rows from
  // the batch (their output rows are zeros, their costs stop growing), and
  // stops with CANCELLED once every row is gone. Encoders that cannot drop
  // single rows (the seq2seq encoder) stop only when all are gone.
  std::function<bool(size_t sequence)> abandoned;
};

struct EncoderOutput {
  at::Tensor hidden;             // [batch, longest, hidden], float32
  std::vector<int64_t> lengths;  // [batch] real tokens per row
};

// Immutable after Create; Forward may run on several threads at once.
//
// LSG checkpoints (config.lsg set) run as the reference's LSG models do:
// the global token embeddings go in front of the token embeddings before the
// embedding LayerNorm; each sequence gets adaptive zero padding up to a
// multiple of the block size; after the last layer, with pool_with_global,
// global token 0's output replaces the first token's; the global tokens are
// then dropped from the output. Costs count the global tokens as real
// tokens (they are queries and keys like any other).
//
// `precision` is what the layers run in (linear_precision.h): kAuto is
// resolved against this CPU at construction; precision() says what
// runs. The fp32 encoder is the reference the others are tested against.
//
// On a CUDA `device` the weights live there and every operation runs there
// (LibTorch's, and our attention executors); kAuto is bf16 there, kInt8 is
// refused (CPU-only). Forward takes and returns host data: token ids go up,
// the hidden states come back as fp32 on the CPU.
class Encoder {
 public:
  static absl::StatusOr<std::unique_ptr<Encoder>> Create(
      const std::string& model_dir, const EncoderConfig& config,
      std::unique_ptr<AttentionMechanism> attention, Precision precision = Precision::kFp32,
      at::Device device = at::kCPU);
  Encoder(EncoderConfig config, EncoderWeights weights,
          std::unique_ptr<AttentionMechanism> attention, Precision precision = Precision::kFp32,
          at::Device device = at::kCPU);

  // Runs the sequences as one right-padded batch. Adds sequence i's cost to
  // row_costs[i] (entries may be null or repeat; an empty vector counts
  // nothing). InvalidArgument for an empty batch, an empty or too long
  // sequence, an id outside the vocabulary, or row_costs of the wrong size;
  // Cancelled when batch.abandoned says every sequence was abandoned.
  absl::StatusOr<EncoderOutput> Forward(const EncoderBatch& batch,
                                        const std::vector<CostAccount*>& row_costs) const;
  // Every sequence's cost to `cost` (may be null).
  absl::StatusOr<EncoderOutput> Forward(const EncoderBatch& batch, CostAccount* cost) const {
    return Forward(batch, std::vector<CostAccount*>(batch.sequences.size(), cost));
  }

  const EncoderConfig& config() const { return config_; }
  EncoderShape shape() const;
  const AttentionMechanism& attention() const { return *attention_; }
  Precision precision() const { return precision_; }  // kFp32, kBf16 or kInt8
  at::Device device() const { return device_; }
  // Longest sequence (special tokens included) the position table allows.
  int64_t max_sequence_length() const;

 private:
  // [batch, seq] position ids: 0.. (BERT, DistilBERT), or RoBERTa's and
  // Longformer's from padding_idx + 1 on real tokens.
  at::Tensor PositionIds(const at::Tensor& ids, const std::vector<int64_t>& lengths) const;
  // out[r] = LayerNorm(table[ids[r]] + position[positions[r]] + token_type[types[r]])
  // for `rows` rows of `out` ([rows, h], rows contiguous), in out's type
  // (kernels/embedding_layer_norm); null positions or types leave that term out.
  void EmbedRows(const at::Tensor& table, const int64_t* ids, const int64_t* positions,
                 const int64_t* types, int64_t rows, at::Tensor out) const;
  // LayerNorm(table[ids] + position[positions] + token_type[types]) with
  // LibTorch on the device: ids [rows] or [batch, seq]; undefined positions
  // or types leave that term out. In the activations' type.
  at::Tensor EmbedOnDevice(const at::Tensor& table, const at::Tensor& ids,
                           const at::Tensor& positions, const at::Tensor& types) const;
  // The normalised embeddings [batch, seq, h] in the activations' type.
  at::Tensor Embed(const at::Tensor& ids, const at::Tensor& token_types,
                   const std::vector<int64_t>& lengths) const;
  // LSG: the normalised global embeddings in front, then the tokens', then
  // zeros to the adaptive padding; returns [batch, global + padded, h] and
  // sets `positions` to each row's real positions (global tokens included).
  at::Tensor EmbedWithGlobalTokens(const at::Tensor& ids, const at::Tensor& token_types,
                                   const EncoderBatch& batch, const std::vector<int64_t>& lengths,
                                   std::vector<int64_t>* positions) const;
  // The mechanism's context for `inputs` (q, k, v [batch, heads, seq,
  // head_dim], lengths, layer, options; the precision is set here) as
  // [batch, seq, hidden] in the activations' type.
  at::Tensor Attend(AttentionInputs inputs, std::vector<ItemAttentionCost>* item_costs) const;
  at::Tensor Layer(const at::Tensor& x, const EncoderLayer& w, const std::vector<int64_t>& lengths,
                   const std::vector<ItemAttentionOptions>& options, int layer,
                   std::vector<ItemAttentionCost>* item_costs) const;
  // The rest of a layer after its attention's context: a = LayerNorm(Wo·context
  // + bo + x), then LayerNorm(W2·act(W1·a + b1) + b2 + a), chunk by chunk of
  // rows, each chunk through all five steps before the next starts. A 16k-token
  // document's [rows, intermediate] activations (50 MB in bf16) exceed glibc's
  // largest mmap threshold (32 MiB), so whole they were mapped and
  // page-faulted in afresh at every layer; and a chunk's output product and
  // LayerNorm are still in the cache when its feed-forward reads them.
  at::Tensor AfterAttention(const at::Tensor& context, const at::Tensor& x,
                            const EncoderLayer& w) const;
  // ModernBERT's layer: pre-norm attention on rotated q and k, then a
  // pre-norm GeGLU feed-forward, each added to its input.
  at::Tensor ModernBertLayer(const at::Tensor& x, const EncoderLayer& w,
                             const std::vector<int64_t>& lengths,
                             const std::vector<ItemAttentionOptions>& options, int layer,
                             std::vector<ItemAttentionCost>* item_costs) const;
  // LayerNorm over the hidden size with a layer's parameters, in x's type.
  at::Tensor Norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const;
  // On the CPU a GELU and the feed-forward's first bias run as one pass after
  // the product (kernels/bias_gelu.h), bf16 or fp32: oneDNN's erf inside the
  // product cost twice as much (6.5 of a 16k-token minilm-lsg bf16 layer's
  // ~80 ms; ~2.5 of a 512-token fp32 forward's 54).
  bool fused_bias_gelu() const {
    return device_.is_cpu() && config_.activation != Activation::kRelu &&
           !config_.modernbert.has_value();
  }

  EncoderConfig config_;
  at::Device device_;
  Precision precision_;
  at::ScalarType activations_;  // between operations: ActivationType(precision_)
  // The embeddings (weights_.layers is emptied once layers_ is built).
  EncoderWeights weights_;
  std::vector<EncoderLayer> layers_;
  std::unique_ptr<AttentionMechanism> attention_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ENCODER_ENCODER_H_
