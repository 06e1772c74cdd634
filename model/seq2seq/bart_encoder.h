// The encoder half of BART and Pegasus in LibTorch, plain or LSG
// (ccdv-ai/convert_checkpoint_to_lsg, LSGBartEncoder / LSGPegasusEncoder),
// and of LED (BART's layers around Longformer's self-attention, whose global
// tokens' projections go to the mechanism as
// AttentionInputs::global_projections), with the attention delegated to an
// AttentionMechanism. The decoder is
// model/seq2seq/bart_decoder.h.
#ifndef DOCSPARSE_MODEL_SEQ2SEQ_BART_ENCODER_H_
#define DOCSPARSE_MODEL_SEQ2SEQ_BART_ENCODER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/attention/attention.h"
#include "model/attention/cost_model.h"
#include "model/checkpoint/bart_config.h"
#include "model/checkpoint/safetensors.h"
#include "model/encoder/encoder.h"
#include "model/encoder/linear.h"

namespace docsparse {

struct BartLayerWeights {
  at::Tensor qkv_weight, qkv_bias;  // [3h, h], [3h]: q_proj, k_proj, v_proj fused
  at::Tensor out_weight, out_bias;  // self_attn.out_proj
  at::Tensor attention_norm_weight, attention_norm_bias;  // self_attn_layer_norm
  at::Tensor fc1_weight, fc1_bias;                        // [ffn, h], [ffn]
  at::Tensor fc2_weight, fc2_bias;                        // [h, ffn], [h]
  at::Tensor final_norm_weight, final_norm_bias;          // final_layer_norm
  // LED's encoder: query_global, key_global, value_global fused like qkv;
  // undefined otherwise.
  at::Tensor global_qkv_weight, global_qkv_bias;
};

// Where a layer keeps its self-attention: BART's q_proj, k_proj, v_proj
// and out_proj under self_attn, LED's encoder layers' Longformer attention
// (self_attn.longformer_self_attn.{query,key,value} and their _global
// twins, self_attn.output), or BigBird-Pegasus' encoder layers'
// (self_attn.self.{query,key,value}, self_attn.output).
// An encoder layer's products in the model's precision (model/encoder/linear.h):
// weights packed once for oneDNN, fc1 with its activation inside the product,
// int8 weights for kInt8 as in the decoder. Through at::linear the fp32
// products ran on OpenBLAS, 25-30% slower than oneDNN on an AVX2 Zen 3.
struct BartEncoderLayerProducts {
  Linear qkv, out, fc1, fc2;
};

enum class SelfAttentionNames { kBart, kLongformer, kBigBird };

// Reads the self-attention, fc1, fc2 and the two norms of one layer
// (encoder layer, or the self-attention/FFN half of a decoder layer) under
// `layer_prefix`. Without `attention_bias` the attention projections have
// no biases in the checkpoint (zeros here).
absl::StatusOr<BartLayerWeights> ReadBartLayerWeights(
    const Checkpoint& checkpoint, const std::string& layer_prefix, int64_t h, int64_t ffn,
    SelfAttentionNames names = SelfAttentionNames::kBart, bool attention_bias = true);

// The names of an encoder layer's self-attention in `config`'s checkpoints.
SelfAttentionNames EncoderSelfAttentionNames(const BartConfig& config);

struct BartEncoderWeights {
  at::Tensor token_embeddings;  // [vocab, h]: shared / encoder.embed_tokens
  // [max_position_embeddings + position_offset(), h]
  at::Tensor position_embeddings;
  at::Tensor embedding_norm_weight, embedding_norm_bias;  // BART: layernorm_embedding
  at::Tensor final_norm_weight, final_norm_bias;          // Pegasus: encoder.layer_norm
  // LSG: [512, h], the reference's table of global token embeddings (the
  // first num_global_tokens rows are used).
  at::Tensor global_embeddings;
  std::vector<BartLayerWeights> layers;
};

// Reads the encoder weights from a checkpoint folder (model.safetensors or a
// sharded index): bare names (BartModel) or under "model." (task models such
// as BartForConditionalGeneration); token embeddings from "shared.weight",
// else "encoder.embed_tokens.weight"; positions as ReadPositionTable
// (model/seq2seq/seq2seq_embeddings.h). F16/BF16 become F32; shapes are checked
// against the config. Decoder tensors are not read.
absl::StatusOr<BartEncoderWeights> LoadBartEncoderWeights(const std::string& model_dir,
                                                          const BartConfig& config);
absl::StatusOr<BartEncoderWeights> LoadBartEncoderWeights(const Checkpoint& checkpoint,
                                                          const BartConfig& config);

// The element type of a summarizer's activations (and weights outside the
// products) in `precision`: kFp32 -> fp32, kBf16 -> bf16, kInt8 -> bf16 where
// the CPU multiplies bf16 natively, else fp32 (its products' weights are
// int8; CPU only, which Seq2SeqModel::Create checks). Throws for kAuto.
at::ScalarType Seq2SeqElementType(Precision precision);

// Moves each defined tensor to `device` in `type`, contiguous.
void PlaceTensors(at::Device device, at::ScalarType type,
                  std::initializer_list<at::Tensor*> tensors);

// Immutable after Create; Forward may run on several threads at once.
//
// Each sequence runs as the reference runs it alone (a batch of one), so a
// result never depends on the rest of the batch. Pegasus: pre-LN layers, no
// embedding LayerNorm, encoder.layer_norm after the last layer. LSG: the
// global token embeddings (no position, no embedding scale) go in front of
// the token embeddings, before BART's layernorm_embedding; Pegasus'
// encoder.layer_norm covers the global rows too. A sequence longer than
// 2·block_size is padded up to a multiple of the block size with
// pad_token_id *tokens* (embedded, with their positions, as LSGBartEncoder
// and LSGPegasusEncoder pad input_ids; BERT-family LSG pads with zero hidden
// states instead); a shorter one runs full attention. Costs count the global
// tokens as real tokens.
//
// On a CUDA `device` the weights live there in `precision`'s type (kFp32 or
// kBf16), every operation runs there, and Forward's hidden states stay there
// (the decoder reads them in place).
class BartEncoder {
 public:
  static absl::StatusOr<std::unique_ptr<BartEncoder>> Create(
      const std::string& model_dir, const BartConfig& config,
      std::unique_ptr<AttentionMechanism> attention);
  BartEncoder(BartConfig config, BartEncoderWeights weights,
              std::unique_ptr<AttentionMechanism> attention, at::Device device = at::kCPU,
              Precision precision = Precision::kFp32);

  // Runs the sequences (ids with BART's <s> … </s>; token_types must be
  // empty) as one right-padded batch. `hidden` is [batch, global_rows() +
  // longest, h], float32: with LSG and pass_global_tokens_to_decoder the
  // global tokens' rows come first, unchanged by pool_with_global (what
  // LSGBartEncoder hands its decoder); otherwise only the tokens, with
  // pool_with_global applied for LSG; on the encoder's device, in its type. Row i's valid rows are
  // [0, global_rows() + lengths[i]). Adds sequence i's cost to row_costs[i] (entries may be null or
  // repeat; empty counts nothing). InvalidArgument for an empty batch, an empty sequence, one whose
  // (adaptively padded) length exceeds the position table, an id outside the vocabulary, token
  // types, or per-sequence vectors of the wrong size.
  absl::StatusOr<EncoderOutput> Forward(const EncoderBatch& batch,
                                        const std::vector<CostAccount*>& row_costs) const;
  absl::StatusOr<EncoderOutput> Forward(const EncoderBatch& batch, CostAccount* cost) const {
    return Forward(batch, std::vector<CostAccount*>(batch.sequences.size(), cost));
  }

  const BartConfig& config() const { return config_; }
  EncoderShape shape() const;
  const AttentionMechanism& attention() const { return *attention_; }
  at::Device device() const { return device_; }
  at::ScalarType type() const { return type_; }       // of the weights and activations
  Precision precision() const { return precision_; }  // kFp32, kBf16 or kInt8
  // Leading global-token rows of Forward's output: num_global_tokens with LSG
  // and pass_global_tokens_to_decoder, else 0.
  int64_t global_rows() const;

 private:
  at::Tensor Layer(const at::Tensor& x, const BartLayerWeights& w,
                   const BartEncoderLayerProducts& p, const std::vector<int64_t>& lengths,
                   const std::vector<ItemAttentionOptions>& options, int layer,
                   std::vector<ItemAttentionCost>* item_costs) const;

  BartConfig config_;
  at::Device device_;
  at::ScalarType type_;
  Precision precision_;
  // The layers' norms and LED's global projections; the weights of the
  // products live in products_.
  BartEncoderWeights weights_;
  std::vector<BartEncoderLayerProducts> products_;
  std::unique_ptr<AttentionMechanism> attention_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_SEQ2SEQ_BART_ENCODER_H_
