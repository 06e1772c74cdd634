#include "model/seq2seq/bart_encoder.h"

#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/layer_boundary.h"
#include "common/status_macros.h"
#include "model/attention/lsg_attention.h"
#include "model/attention/lsg_planner.h"
#include "model/attention/planner_registry.h"
#include "model/checkpoint/checkpoint_tensor.h"
#include "model/checkpoint/safetensors.h"
#include "model/encoder/linear.h"
#include "model/encoder/linear_precision.h"
#include "model/seq2seq/seq2seq_embeddings.h"

namespace docsparse {
namespace {

bool AllAbandoned(const std::function<bool(size_t)>& abandoned, size_t rows) {
  for (size_t row = 0; row < rows; ++row) {
    if (!abandoned(row)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<BartLayerWeights> ReadBartLayerWeights(const Checkpoint& checkpoint,
                                                      const std::string& p, int64_t h, int64_t ffn,
                                                      SelfAttentionNames names,
                                                      bool attention_bias) {
  const auto get = [&](const std::string& name, const std::vector<int64_t>& shape) {
    return ReadFloatTensor(checkpoint, p + name, shape);
  };
  // Three projections under `attention`, fused into one [3h, h] product.
  const auto fused = [&](const std::string& attention, std::initializer_list<const char*> projs,
                         at::Tensor* weight, at::Tensor* bias) -> absl::Status {
    std::vector<at::Tensor> weights, biases;
    for (const char* proj : projs) {
      ASSIGN_OR_RETURN(at::Tensor w, get(absl::StrCat(attention, proj, ".weight"), {h, h}));
      ASSIGN_OR_RETURN(at::Tensor b,
                       ReadBiasOrZeros(checkpoint, absl::StrCat(p, attention, proj, ".bias"), h,
                                       attention_bias));
      weights.push_back(w);
      biases.push_back(b);
    }
    *weight = at::cat(weights, 0);
    *bias = at::cat(biases, 0);
    return absl::OkStatus();
  };
  BartLayerWeights layer;
  if (names == SelfAttentionNames::kLongformer) {
    const std::string attention = "self_attn.longformer_self_attn.";
    RETURN_IF_ERROR(
        fused(attention, {"query", "key", "value"}, &layer.qkv_weight, &layer.qkv_bias));
    RETURN_IF_ERROR(fused(attention, {"query_global", "key_global", "value_global"},
                          &layer.global_qkv_weight, &layer.global_qkv_bias));
    ASSIGN_OR_RETURN(layer.out_weight, get("self_attn.output.weight", {h, h}));
    ASSIGN_OR_RETURN(layer.out_bias,
                     ReadBiasOrZeros(checkpoint, p + "self_attn.output.bias", h, attention_bias));
  } else if (names == SelfAttentionNames::kBigBird) {
    RETURN_IF_ERROR(
        fused("self_attn.self.", {"query", "key", "value"}, &layer.qkv_weight, &layer.qkv_bias));
    ASSIGN_OR_RETURN(layer.out_weight, get("self_attn.output.weight", {h, h}));
    ASSIGN_OR_RETURN(layer.out_bias,
                     ReadBiasOrZeros(checkpoint, p + "self_attn.output.bias", h, attention_bias));
  } else {
    RETURN_IF_ERROR(
        fused("self_attn.", {"q_proj", "k_proj", "v_proj"}, &layer.qkv_weight, &layer.qkv_bias));
    ASSIGN_OR_RETURN(layer.out_weight, get("self_attn.out_proj.weight", {h, h}));
    ASSIGN_OR_RETURN(layer.out_bias,
                     ReadBiasOrZeros(checkpoint, p + "self_attn.out_proj.bias", h, attention_bias));
  }
  ASSIGN_OR_RETURN(layer.attention_norm_weight, get("self_attn_layer_norm.weight", {h}));
  ASSIGN_OR_RETURN(layer.attention_norm_bias, get("self_attn_layer_norm.bias", {h}));
  ASSIGN_OR_RETURN(layer.fc1_weight, get("fc1.weight", {ffn, h}));
  ASSIGN_OR_RETURN(layer.fc1_bias, get("fc1.bias", {ffn}));
  ASSIGN_OR_RETURN(layer.fc2_weight, get("fc2.weight", {h, ffn}));
  ASSIGN_OR_RETURN(layer.fc2_bias, get("fc2.bias", {h}));
  ASSIGN_OR_RETURN(layer.final_norm_weight, get("final_layer_norm.weight", {h}));
  ASSIGN_OR_RETURN(layer.final_norm_bias, get("final_layer_norm.bias", {h}));
  return layer;
}

SelfAttentionNames EncoderSelfAttentionNames(const BartConfig& config) {
  switch (config.architecture) {
    case Seq2SeqArchitecture::kLed:
      return SelfAttentionNames::kLongformer;
    case Seq2SeqArchitecture::kBigBirdPegasus:
      return SelfAttentionNames::kBigBird;
    case Seq2SeqArchitecture::kBart:
    case Seq2SeqArchitecture::kPegasus:
      return SelfAttentionNames::kBart;
  }
  return SelfAttentionNames::kBart;
}

absl::StatusOr<BartEncoderWeights> LoadBartEncoderWeights(const std::string& model_dir,
                                                          const BartConfig& config) {
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::Open(model_dir));
  return LoadBartEncoderWeights(*checkpoint, config);
}

absl::StatusOr<BartEncoderWeights> LoadBartEncoderWeights(const Checkpoint& checkpoint,
                                                          const BartConfig& config) {
  ASSIGN_OR_RETURN(const std::string prefix, FindSeq2SeqPrefix(checkpoint));
  const auto get = [&](const std::string& name, const std::vector<int64_t>& shape) {
    return ReadFloatTensor(checkpoint, prefix + name, shape);
  };
  const int64_t h = config.hidden_size;
  BartEncoderWeights w;
  ASSIGN_OR_RETURN(w.token_embeddings, ReadTokenEmbeddings(checkpoint, prefix, "encoder", config));
  ASSIGN_OR_RETURN(w.position_embeddings, ReadPositionTable(checkpoint, prefix, "encoder", config));
  if (config.embedding_layer_norm()) {
    ASSIGN_OR_RETURN(w.embedding_norm_weight, get("encoder.layernorm_embedding.weight", {h}));
    ASSIGN_OR_RETURN(w.embedding_norm_bias, get("encoder.layernorm_embedding.bias", {h}));
  }
  if (config.pre_layer_norm()) {
    const std::string norm = "encoder." + config.final_norm_name();
    ASSIGN_OR_RETURN(w.final_norm_weight, get(norm + ".weight", {h}));
    ASSIGN_OR_RETURN(w.final_norm_bias, get(norm + ".bias", {h}));
  }
  if (config.lsg.has_value()) {
    // The reference allocates 512 rows whatever num_global_tokens is.
    ASSIGN_OR_RETURN(w.global_embeddings, get("encoder.global_embeddings.weight", {512, h}));
  }
  for (int i = 0; i < config.num_layers; ++i) {
    ASSIGN_OR_RETURN(
        BartLayerWeights layer,
        ReadBartLayerWeights(checkpoint, absl::StrCat(prefix, "encoder.layers.", i, "."), h,
                             config.intermediate_size, EncoderSelfAttentionNames(config),
                             config.attention_bias()));
    w.layers.push_back(std::move(layer));
  }
  return w;
}

absl::StatusOr<std::unique_ptr<BartEncoder>> BartEncoder::Create(
    const std::string& model_dir, const BartConfig& config,
    std::unique_ptr<AttentionMechanism> attention) {
  ASSIGN_OR_RETURN(BartEncoderWeights weights, LoadBartEncoderWeights(model_dir, config));
  return std::make_unique<BartEncoder>(config, std::move(weights), std::move(attention));
}

at::ScalarType Seq2SeqElementType(Precision precision) {
  TORCH_CHECK(precision != Precision::kAuto, "a summarizer runs fp32, bf16, fp16 or int8");
  return ActivationType(precision);
}

void PlaceTensors(at::Device device, at::ScalarType type,
                  std::initializer_list<at::Tensor*> tensors) {
  for (at::Tensor* t : tensors) {
    if (t->defined()) *t = t->to(device, type).contiguous();
  }
}

BartEncoder::BartEncoder(BartConfig config, BartEncoderWeights weights,
                         std::unique_ptr<AttentionMechanism> attention, at::Device device,
                         Precision precision)
    : config_(std::move(config)),
      device_(device),
      type_(Seq2SeqElementType(precision)),
      precision_(precision),
      weights_(std::move(weights)),
      attention_(std::move(attention)) {
  PlaceTensors(
      device_, type_,
      {&weights_.token_embeddings, &weights_.position_embeddings, &weights_.embedding_norm_weight,
       &weights_.embedding_norm_bias, &weights_.final_norm_weight, &weights_.final_norm_bias,
       &weights_.global_embeddings});
  const auto product = [&](at::Tensor* weight, at::Tensor* bias,
                           std::optional<Activation> activation = std::nullopt) {
    Linear linear(*weight, *bias, precision, Linear::Bias::kInProduct, activation, device_);
    // Held once, by the product.
    *weight = at::Tensor();
    *bias = at::Tensor();
    return linear;
  };
  for (BartLayerWeights& w : weights_.layers) {
    products_.push_back(BartEncoderLayerProducts{
        product(&w.qkv_weight, &w.qkv_bias), product(&w.out_weight, &w.out_bias),
        product(&w.fc1_weight, &w.fc1_bias, config_.activation),
        product(&w.fc2_weight, &w.fc2_bias)});
    PlaceTensors(device_, type_,
                 {&w.attention_norm_weight, &w.attention_norm_bias, &w.final_norm_weight,
                  &w.final_norm_bias, &w.global_qkv_weight, &w.global_qkv_bias});
  }
}

EncoderShape BartEncoder::shape() const { return EncoderShapeOf(config_); }

int64_t BartEncoder::global_rows() const {
  return config_.lsg.has_value() && config_.pass_global_tokens_to_decoder
             ? config_.lsg->num_global_tokens
             : 0;
}

at::Tensor BartEncoder::Layer(const at::Tensor& x, const BartLayerWeights& w,
                              const BartEncoderLayerProducts& p,
                              const std::vector<int64_t>& lengths,
                              const std::vector<ItemAttentionOptions>& options, int layer,
                              std::vector<ItemAttentionCost>* item_costs) const {
  const int64_t batch = x.size(0);
  const int64_t seq = x.size(1);
  const int64_t h = config_.hidden_size;
  // Pre-LN (Pegasus) projects the normalised input; post-LN (BART) the input.
  const at::Tensor attention_input =
      config_.pre_layer_norm() ? at::layer_norm(x, {h}, w.attention_norm_weight,
                                                w.attention_norm_bias, config_.layer_norm_eps)
                               : x;
  // [batch, seq, 3, heads, head_dim] -> three [batch, heads, seq, head_dim]
  const at::Tensor qkv = p.qkv(attention_input)
                             .view({batch, seq, 3, config_.num_heads, config_.head_dim()})
                             .permute({2, 0, 3, 1, 4});
  const Precision attention_precision = AttentionPrecision(type_);
  AttentionInputs inputs{
      qkv[0].contiguous(), qkv[1].contiguous(), qkv[2].contiguous(), lengths, layer, options,
      attention_precision};
  if (w.global_qkv_weight.defined()) {
    // LED: the global tokens' rows from projections of their own, made only
    // when a plan has global rows.
    inputs.global_projections = [&attention_input, &w, this](int64_t query_rows) {
      const int64_t h = config_.hidden_size;
      return SplitGlobalHeads(
          at::linear(attention_input.narrow(1, 0, query_rows), w.global_qkv_weight.narrow(0, 0, h),
                     w.global_qkv_bias.narrow(0, 0, h)),
          at::linear(attention_input, w.global_qkv_weight.narrow(0, h, 2 * h),
                     w.global_qkv_bias.narrow(0, h, 2 * h)),
          config_.num_heads);
    };
  }
  const at::Tensor context = attention_->Forward(inputs, item_costs)
                                 .to(type_)
                                 .permute({0, 2, 1, 3})
                                 .reshape({batch, seq, h});
  const double eps = config_.layer_norm_eps;
  if (config_.pre_layer_norm()) {
    // PegasusEncoderLayer: x + f(norm(x)) for attention, then the FFN.
    const at::Tensor attended = p.out(context) + x;
    const at::Tensor normed =
        at::layer_norm(attended, {h}, w.final_norm_weight, w.final_norm_bias, eps);
    return p.fc2(p.fc1(normed)) + attended;
  }
  // Post-LN, as BartEncoderLayer.
  const at::Tensor attended =
      at::layer_norm(p.out(context) + x, {h}, w.attention_norm_weight, w.attention_norm_bias, eps);
  return at::layer_norm(p.fc2(p.fc1(attended)) + attended, {h}, w.final_norm_weight,
                        w.final_norm_bias, eps);
}

absl::StatusOr<EncoderOutput> BartEncoder::Forward(
    const EncoderBatch& batch, const std::vector<CostAccount*>& row_costs) const {
  const size_t rows = batch.sequences.size();
  if (rows == 0) return absl::InvalidArgumentError("empty batch");
  if (!row_costs.empty() && row_costs.size() != rows) {
    return absl::InvalidArgumentError("row_costs: one entry per sequence expected");
  }
  if (!batch.attention_options.empty() && batch.attention_options.size() != rows) {
    return absl::InvalidArgumentError("attention_options: one entry per sequence expected");
  }
  if (!batch.token_types.empty()) {
    return absl::InvalidArgumentError("token_types: BART has no token type embeddings");
  }
  const int64_t global = config_.lsg.has_value() ? config_.lsg->num_global_tokens : 0;
  EncoderOutput output;
  // Rows each sequence runs on alone: LSG pads it up to a multiple of its
  // block size (unless it takes the full-attention fallback).
  int64_t longest = 0;
  int64_t width = 0;
  for (size_t i = 0; i < rows; ++i) {
    const std::vector<int32_t>& sequence = batch.sequences[i];
    const int64_t length = static_cast<int64_t>(sequence.size());
    if (length == 0) return absl::InvalidArgumentError(absl::StrCat("sequence ", i, " is empty"));
    for (int32_t id : sequence) {
      if (id < 0 || id >= config_.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", id, " outside the vocabulary [0, ", config_.vocab_size, ")"));
      }
    }
    int64_t padded = length;
    if (config_.lsg.has_value()) {
      const ItemAttentionOptions options =
          batch.attention_options.empty() ? ItemAttentionOptions{} : batch.attention_options[i];
      padded = LayoutLsgSequence(ApplyLsgKnobs(*config_.lsg, options), static_cast<int32_t>(global),
                                 static_cast<int32_t>(length))
                   .padded_tokens;
    }
    if (padded > config_.max_position_embeddings) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence ", i, " has ", length, " tokens (", padded,
          " with LSG's padding); the model's limit is ", config_.max_position_embeddings));
    }
    output.lengths.push_back(length);
    longest = std::max(longest, length);
    width = std::max(width, padded);
  }

  try {
    c10::InferenceMode inference_mode;
    // Every row beyond a sequence's tokens holds pad_token_id: the
    // reference's adaptive padding is pad tokens with their positions, which
    // bos_pooling lets reach real tokens; batch padding beyond that is masked.
    at::Tensor ids = at::full({static_cast<int64_t>(rows), width}, config_.pad_token_id, at::kLong);
    for (size_t i = 0; i < rows; ++i) {
      std::copy(batch.sequences[i].begin(), batch.sequences[i].end(),
                ids[static_cast<int64_t>(i)].data_ptr<int64_t>());
    }
    ids = ids.to(device_);
    const int64_t offset = config_.position_offset();
    const at::Tensor positions =
        at::arange(offset, width + offset, at::TensorOptions().dtype(at::kLong).device(device_));
    at::Tensor x = at::embedding(weights_.token_embeddings, ids);
    if (config_.scale_embedding) x = x * std::sqrt(static_cast<double>(config_.hidden_size));
    x = x + at::embedding(weights_.position_embeddings, positions).unsqueeze(0);
    if (global > 0) {
      const at::Tensor globals =
          weights_.global_embeddings.narrow(0, 0, global)
              .unsqueeze(0)
              .expand({static_cast<int64_t>(rows), global, config_.hidden_size});
      x = at::cat({globals, x}, 1);
    }
    if (config_.embedding_layer_norm()) {
      x = at::layer_norm(x, {config_.hidden_size}, weights_.embedding_norm_weight,
                         weights_.embedding_norm_bias, config_.layer_norm_eps);
    }

    // Real rows per sequence: the LSG mechanism expects [global ; tokens].
    std::vector<int64_t> real_rows;
    for (int64_t length : output.lengths) real_rows.push_back(global + length);
    std::vector<ItemAttentionCost> item_costs;
    for (int layer = 0; layer < config_.num_layers; ++layer) {
      // Every row's request gone: nothing left worth a layer. (Single rows
      // are not dropped: decoding needs the batch's encoder output whole.)
      if (batch.abandoned && AllAbandoned(batch.abandoned, rows)) {
        return absl::CancelledError("every sequence of the batch was abandoned");
      }
      AtLayerBoundary();
      x = Layer(x, weights_.layers[layer], products_[layer], real_rows, batch.attention_options,
                layer, &item_costs);
      for (size_t row = 0; row < row_costs.size(); ++row) {
        if (row_costs[row] != nullptr) row_costs[row]->AddAttention(layer, item_costs[row]);
      }
    }
    if (config_.pre_layer_norm()) {
      x = at::layer_norm(x, {config_.hidden_size}, weights_.final_norm_weight,
                         weights_.final_norm_bias, config_.layer_norm_eps);
    }
    const int64_t run_length = x.size(1);
    if (global > 0 && !config_.pass_global_tokens_to_decoder) {
      // LSGBartEncoder.forward: pooling only when the globals are dropped.
      if (config_.lsg->pool_with_global) x.select(1, global).copy_(x.select(1, 0));
      x = x.narrow(1, global, longest);
    } else {
      x = x.narrow(1, 0, global + longest);
    }
    output.hidden = x;
    for (size_t row = 0; row < row_costs.size(); ++row) {
      if (row_costs[row] != nullptr) row_costs[row]->AddSequence(real_rows[row], run_length);
    }
  } catch (const c10::Error& error) {
    return absl::InternalError(
        absl::StrCat(std::string(Seq2SeqArchitectureName(config_.architecture)),
                     " encoder forward failed: ", error.what_without_backtrace()));
  }
  return output;
}

}  // namespace docsparse
