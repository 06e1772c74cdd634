#include "model/encoder/encoder.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/layer_boundary.h"
#include "common/status_macros.h"
#include "kernels/embedding_layer_norm.h"
#include "model/attention/compute_device.h"
#include "model/attention/lsg_attention.h"
#include "model/attention/lsg_planner.h"
#include "model/attention/planner_registry.h"
#include "model/encoder/bias_gelu.h"
#include "model/encoder/linear_precision.h"
#include "model/encoder/live_rows.h"
#include "model/encoder/residual_layer_norm.h"

namespace docsparse {

namespace {

// The q, k and v projection is stored head by head (Encoder::Layer) above
// this size. minilm-lsg at 16,384 tokens (38 MB in bf16), alternated: the
// forward 414-439 -> 388-416 ms in bf16 (a layer's attention 29-30 -> 24-26
// ms), 1,678-1,703 -> 1,590-1,669 ms in fp32. At 4,096 and 8,192 tokens, and
// for minilm at 512, it was as fast or 3-10% slower: the projection's output
// still sits in the caches there, and its 256-row pieces and the regrouping
// cost more than attention saves.
constexpr int64_t kHeadMajorMinBytes = int64_t{32} << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<Encoder>> Encoder::Create(
    const std::string& model_dir, const EncoderConfig& config,
    std::unique_ptr<AttentionMechanism> attention, Precision precision, at::Device device) {
  RETURN_IF_ERROR(CheckPrecisionOn(precision, device, "an encoder"));
  ASSIGN_OR_RETURN(EncoderWeights weights, LoadEncoderWeights(model_dir, config));
  try {
    return std::make_unique<Encoder>(config, std::move(weights), std::move(attention), precision,
                                     device);
  } catch (const c10::Error& error) {
    return absl::InternalError(absl::StrCat("placing the encoder on ", device.str(),
                                            " failed: ", error.what_without_backtrace()));
  }
}

namespace {

// kAuto on a CUDA device is bf16 (tensor cores, fp32 accumulation); on the
// CPU it depends on the CPU.
Precision ResolveOn(at::Device device, Precision precision) {
  if (!device.is_cpu() && precision == Precision::kAuto) return Precision::kBf16;
  return ResolvePrecision(precision, HostCpuFeatures());
}

}  // namespace

Encoder::Encoder(EncoderConfig config, EncoderWeights weights,
                 std::unique_ptr<AttentionMechanism> attention, Precision precision,
                 at::Device device)
    : config_(std::move(config)),
      device_(device),
      precision_(ResolveOn(device, precision)),
      activations_(ActivationType(precision_)),
      weights_(std::move(weights)),
      attention_(std::move(attention)) {
  const absl::Status placeable = CheckPrecisionOn(precision_, device_, "an encoder");
  TORCH_CHECK(placeable.ok(), "Encoder: ", placeable.message());
  // The embedding tables as kernels/embedding_layer_norm reads them (fp32;
  // on a device, where LibTorch's ops read them, fp32 too: the sum and its
  // LayerNorm are rounded once, to the activations' type).
  for (at::Tensor* table : {&weights_.word_embeddings, &weights_.position_embeddings,
                            &weights_.token_type_embeddings, &weights_.global_embeddings,
                            &weights_.embedding_norm_weight, &weights_.embedding_norm_bias}) {
    if (table->defined()) *table = table->to(device_, at::kFloat).contiguous();
  }
  // LayerNorm scales and shifts: fp32 on the CPU (ResidualLayerNorm takes
  // them so), the activations' type on a device (LibTorch's LayerNorm).
  const at::ScalarType norm_type = device_.is_cpu() ? at::kFloat : activations_;
  // On the CPU the feed-forward's first product leaves its bias and GELU to
  // one pass of kernels/bias_gelu (fused_bias_gelu); a ReLU runs inside the
  // product (a oneDNN post-op), and a device applies the activation after it.
  const Linear::Bias intermediate_bias =
      fused_bias_gelu() ? Linear::Bias::kByCaller : Linear::Bias::kInProduct;
  // ModernBERT's GeGLU applies the activation to half of Wi's output, after it.
  const std::optional<Activation> intermediate_activation =
      fused_bias_gelu() || config_.modernbert.has_value()
          ? std::nullopt
          : std::optional<Activation>(config_.activation);
  // ModernBERT's first layer has no attention norm.
  const auto place_norm = [&](const at::Tensor& t) {
    return t.defined() ? t.to(device_, norm_type) : at::Tensor();
  };
  weights_.final_norm_weight = place_norm(weights_.final_norm_weight);
  weights_.final_norm_bias = place_norm(weights_.final_norm_bias);
  for (const EncoderLayerWeights& w : weights_.layers) {
    // Global rows are few: their queries are a product of their own, the
    // keys and values (of every token) one fused product.
    std::optional<Linear> global_query, global_key_value;
    if (w.global_qkv_weight.defined()) {
      const int64_t h = config_.hidden_size;
      global_query.emplace(w.global_qkv_weight.narrow(0, 0, h), w.global_qkv_bias.narrow(0, 0, h),
                           precision_, Linear::Bias::kInProduct, std::nullopt, device_);
      global_key_value.emplace(w.global_qkv_weight.narrow(0, h, 2 * h),
                               w.global_qkv_bias.narrow(0, h, 2 * h), precision_,
                               Linear::Bias::kInProduct, std::nullopt, device_);
    }
    layers_.push_back(EncoderLayer{Linear(w.qkv_weight, w.qkv_bias, precision_,
                                          Linear::Bias::kInProduct, std::nullopt, device_),
                                   Linear(w.output_weight, w.output_bias, precision_,
                                          Linear::Bias::kInProduct, std::nullopt, device_),
                                   Linear(w.intermediate_weight, w.intermediate_bias, precision_,
                                          intermediate_bias, intermediate_activation, device_),
                                   Linear(w.ffn_output_weight, w.ffn_output_bias, precision_,
                                          Linear::Bias::kInProduct, std::nullopt, device_),
                                   place_norm(w.attention_norm_weight),
                                   place_norm(w.attention_norm_bias),
                                   place_norm(w.output_norm_weight), place_norm(w.output_norm_bias),
                                   std::move(global_query), std::move(global_key_value)});
  }
  weights_.layers.clear();
}

EncoderShape Encoder::shape() const { return EncoderShapeOf(config_); }

int64_t Encoder::max_sequence_length() const {
  // RoBERTa numbers positions from padding_idx + 1.
  if (NumbersPositionsAfterPadding(config_.architecture)) {
    return config_.max_position_embeddings - config_.pad_token_id - 1;
  }
  return config_.max_position_embeddings;
}

at::Tensor Encoder::PositionIds(const at::Tensor& ids, const std::vector<int64_t>& lengths) const {
  const int64_t batch = ids.size(0);
  const int64_t seq = ids.size(1);
  at::Tensor positions = at::arange(seq, at::kLong).unsqueeze(0).expand({batch, seq}).contiguous();
  if (NumbersPositionsAfterPadding(config_.architecture)) {
    // HF create_position_ids_from_input_ids: padding_idx + cumsum(mask) on
    // real tokens, padding_idx on padding.
    at::Tensor real = positions.lt(at::tensor(lengths, at::kLong).unsqueeze(1));
    positions = (real.to(at::kLong).cumsum(1).mul(real) + config_.pad_token_id).contiguous();
  }
  return positions;
}

void Encoder::EmbedRows(const at::Tensor& table, const int64_t* ids, const int64_t* positions,
                        const int64_t* types, int64_t rows, at::Tensor out) const {
  const bool with_types = types != nullptr && weights_.token_type_embeddings.defined();
  const EmbeddingLayerNormParams params{
      table.data_ptr<float>(),
      ids,
      positions == nullptr ? nullptr : weights_.position_embeddings.data_ptr<float>(),
      positions,
      with_types ? weights_.token_type_embeddings.data_ptr<float>() : nullptr,
      types,
      weights_.embedding_norm_weight.data_ptr<float>(),
      weights_.embedding_norm_bias.data_ptr<float>(),
      out.data_ptr(),
      out.stride(0),
      out.scalar_type() == at::kBFloat16,
      config_.hidden_size,
      static_cast<float>(config_.layer_norm_eps)};
  at::parallel_for(0, rows, 64, [&params](int64_t begin, int64_t end) {
    EmbeddingLayerNormRows(params, begin, end);
  });
}

at::Tensor Encoder::EmbedOnDevice(const at::Tensor& table, const at::Tensor& ids,
                                  const at::Tensor& positions, const at::Tensor& types) const {
  at::Tensor sum = at::embedding(table, ids.to(device_));
  if (positions.defined()) {
    sum = sum + at::embedding(weights_.position_embeddings, positions.to(device_));
  }
  if (types.defined() && weights_.token_type_embeddings.defined()) {
    sum = sum + at::embedding(weights_.token_type_embeddings, types.to(device_));
  }
  return at::layer_norm(sum, {config_.hidden_size}, weights_.embedding_norm_weight,
                        weights_.embedding_norm_bias, config_.layer_norm_eps)
      .to(activations_);
}

at::Tensor Encoder::Embed(const at::Tensor& ids, const at::Tensor& token_types,
                          const std::vector<int64_t>& lengths) const {
  // ModernBERT has no position table: its positions rotate q and k.
  const at::Tensor positions =
      weights_.position_embeddings.defined() ? PositionIds(ids, lengths) : at::Tensor();
  if (!device_.is_cpu()) {
    return EmbedOnDevice(weights_.word_embeddings, ids, positions, token_types);
  }
  at::Tensor x = at::empty({ids.size(0), ids.size(1), config_.hidden_size},
                           at::TensorOptions().dtype(activations_));
  EmbedRows(weights_.word_embeddings, ids.data_ptr<int64_t>(),
            positions.defined() ? positions.data_ptr<int64_t>() : nullptr,
            token_types.data_ptr<int64_t>(), ids.numel(), x.view({-1, config_.hidden_size}));
  return x;
}

at::Tensor Encoder::EmbedWithGlobalTokens(const at::Tensor& ids, const at::Tensor& token_types,
                                          const EncoderBatch& batch,
                                          const std::vector<int64_t>& lengths,
                                          std::vector<int64_t>* positions) const {
  const LsgConfig& native = *config_.lsg;
  const int64_t global = native.num_global_tokens;
  const int64_t rows = ids.size(0);
  // The longest adaptive padding any sequence needs under its own knobs.
  int64_t padded = ids.size(1);
  for (int64_t row = 0; row < rows; ++row) {
    const ItemAttentionOptions options =
        batch.attention_options.empty() ? ItemAttentionOptions{} : batch.attention_options[row];
    const LsgLayout layout =
        LayoutLsgSequence(ApplyLsgKnobs(native, options), static_cast<int32_t>(global),
                          static_cast<int32_t>(lengths[row]));
    padded = std::max<int64_t>(padded, layout.padded_tokens);
    positions->push_back(global + lengths[row]);
  }
  // [global ; tokens ; zeros]: the reference normalises the global and token
  // embeddings and appends zero rows (LSG*Encoder.forward); a sequence alone
  // has no batch padding, only those zeros.
  const at::Tensor token_positions = PositionIds(ids, lengths);
  at::Tensor x = at::zeros({rows, global + padded, config_.hidden_size},
                           at::TensorOptions().dtype(activations_).device(device_));
  if (!device_.is_cpu()) {
    const at::Tensor globals = EmbedOnDevice(
        weights_.global_embeddings, at::arange(global, at::kLong), at::Tensor(), at::Tensor());
    for (int64_t row = 0; row < rows; ++row) {
      x[row].narrow(0, 0, global).copy_(globals);
      x[row]
          .narrow(0, global, lengths[row])
          .copy_(EmbedOnDevice(weights_.word_embeddings, ids[row].narrow(0, 0, lengths[row]),
                               token_positions[row].narrow(0, 0, lengths[row]),
                               token_types[row].narrow(0, 0, lengths[row])));
    }
    return x;
  }
  std::vector<int64_t> global_ids(static_cast<size_t>(global));
  for (int64_t g = 0; g < global; ++g) global_ids[g] = g;
  for (int64_t row = 0; row < rows; ++row) {
    EmbedRows(weights_.global_embeddings, global_ids.data(), nullptr, nullptr, global,
              x[row].narrow(0, 0, global));
    EmbedRows(weights_.word_embeddings, ids[row].data_ptr<int64_t>(),
              token_positions[row].data_ptr<int64_t>(), token_types[row].data_ptr<int64_t>(),
              lengths[row], x[row].narrow(0, global, lengths[row]));
  }
  return x;
}

at::Tensor Encoder::Attend(AttentionInputs inputs,
                           std::vector<ItemAttentionCost>* item_costs) const {
  const int64_t batch = inputs.query.size(0);
  const int64_t seq = inputs.query.size(2);
  inputs.precision = AttentionPrecision(activations_);
  return attention_->Forward(inputs, item_costs)
      .to(activations_)
      .permute({0, 2, 1, 3})
      .reshape({batch, seq, config_.hidden_size});
}

at::Tensor Encoder::Layer(const at::Tensor& x, const EncoderLayer& w,
                          const std::vector<int64_t>& lengths,
                          const std::vector<ItemAttentionOptions>& options, int layer,
                          std::vector<ItemAttentionCost>* item_costs) const {
  const int64_t batch = x.size(0);
  const int64_t seq = x.size(1);
  const int64_t heads = config_.num_heads;
  const int64_t head_dim = config_.hidden_size / heads;
  // Three [batch, heads, seq, head_dim] views of the projection, read in
  // place by the mechanisms that can. Above kHeadMajorMinBytes (on the CPU)
  // it is stored head by head, [3 · heads, batch · seq, head_dim]
  // (Linear::GroupMajor), so that attention reads each head's rows back to
  // back, into a buffer each thread keeps (the previous layer's q, k and v are
  // dead by now) instead of a fresh mapping faulted in at every layer.
  const int64_t qkv_bytes =
      batch * seq * 3 * config_.hidden_size * static_cast<int64_t>(c10::elementSize(activations_));
  at::Tensor qkv;
  if (device_.is_cpu() && qkv_bytes > kHeadMajorMinBytes) {
    thread_local at::Tensor qkv_storage;
    qkv = w.qkv.GroupMajor(x, 3 * heads, &qkv_storage)
              .view({3, heads, batch, seq, head_dim})
              .permute({0, 2, 1, 3, 4});
  } else {
    qkv = w.qkv(x).view({batch, seq, 3, heads, head_dim}).permute({2, 0, 3, 1, 4});
  }
  AttentionInputs inputs{qkv[0], qkv[1], qkv[2], lengths, layer, options};
  if (w.global_query.has_value()) {
    // Longformer: its global tokens' rows come from projections of their
    // own, made only when a plan has such rows.
    inputs.global_projections = [&x, &w, heads](int64_t query_rows) {
      return SplitGlobalHeads((*w.global_query)(x.narrow(1, 0, query_rows)),
                              (*w.global_key_value)(x), heads);
    };
  }
  return AfterAttention(Attend(std::move(inputs), item_costs), x, w);
}

namespace {

// q or k [batch, heads, seq, head_dim] rotated for positions 0..seq-1, as
// transformers' ModernBERT does (default RoPE with base `theta`; the
// rotation in fp32, the result in x's type).
at::Tensor RotateForPositions(const at::Tensor& x, double theta) {
  const int64_t seq = x.size(2);
  const int64_t d = x.size(3);
  const at::TensorOptions fp32 = at::TensorOptions().dtype(at::kFloat).device(x.device());
  const at::Tensor inv_freq =
      at::reciprocal(at::pow(theta, at::arange(0, d, 2, fp32) / static_cast<double>(d)));
  const at::Tensor freqs = at::arange(seq, fp32).unsqueeze(1) * inv_freq.unsqueeze(0);
  const at::Tensor angles = at::cat({freqs, freqs}, -1);  // [seq, d]
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor half_turned =
      at::cat({-xf.narrow(-1, d / 2, d / 2), xf.narrow(-1, 0, d / 2)}, -1);
  return (xf * angles.cos() + half_turned * angles.sin()).to(x.scalar_type());
}

}  // namespace

at::Tensor Encoder::Norm(const at::Tensor& x, const at::Tensor& weight,
                         const at::Tensor& bias) const {
  // On the CPU the parameters are fp32, and so is the arithmetic.
  if (device_.is_cpu()) {
    return at::layer_norm(x.to(at::kFloat), {config_.hidden_size}, weight, bias,
                          config_.layer_norm_eps)
        .to(x.scalar_type());
  }
  return at::layer_norm(x, {config_.hidden_size}, weight, bias, config_.layer_norm_eps);
}

at::Tensor Encoder::ModernBertLayer(const at::Tensor& x, const EncoderLayer& w,
                                    const std::vector<int64_t>& lengths,
                                    const std::vector<ItemAttentionOptions>& options, int layer,
                                    std::vector<ItemAttentionCost>* item_costs) const {
  const ModernBertFields& modern = *config_.modernbert;
  const int64_t batch = x.size(0);
  const int64_t seq = x.size(1);
  const int64_t heads = config_.num_heads;
  const at::Tensor normed = w.attention_norm_weight.defined()
                                ? Norm(x, w.attention_norm_weight, w.attention_norm_bias)
                                : x;
  const at::Tensor qkv =
      w.qkv(normed).view({batch, seq, 3, heads, config_.head_dim()}).permute({2, 0, 3, 1, 4});
  // The rotation's base follows the layer's trained kind, whatever plan runs.
  const double theta =
      modern.global_layers[layer] ? modern.global_rope_theta : modern.local_rope_theta;
  const at::Tensor context =
      Attend({RotateForPositions(qkv[0], theta), RotateForPositions(qkv[1], theta), qkv[2], lengths,
              layer, options},
             item_costs);
  const at::Tensor attended = x + w.output(context);
  // GeGLU: Wi's first half through the activation, times its second half.
  const std::vector<at::Tensor> halves =
      w.intermediate(Norm(attended, w.output_norm_weight, w.output_norm_bias)).chunk(2, -1);
  return attended + w.ffn_output(ApplyActivation(halves[0], config_.activation) * halves[1]);
}

at::Tensor Encoder::AfterAttention(const at::Tensor& context, const at::Tensor& x,
                                   const EncoderLayer& w) const {
  // 2,048 rows of a BERT-base intermediate are 6 (bf16) or 12 (fp32) MB. A
  // device takes them whole: bigger products fill it better, and its
  // allocator caches blocks.
  const int64_t kChunkRows = device_.is_cpu() ? 2048 : std::numeric_limits<int64_t>::max();
  const at::Tensor context_rows = context.reshape({-1, config_.hidden_size});
  const at::Tensor x_rows = x.reshape({-1, config_.hidden_size});
  const int64_t total = x_rows.size(0);
  // A single chunk's result is the layer's output: no buffer to write into
  // (and a device's LayerNorm, which makes a new tensor, would copy into it).
  const at::Tensor out = total > kChunkRows ? at::empty_like(x_rows) : at::Tensor();
  for (int64_t begin = 0; begin < total; begin += kChunkRows) {
    const int64_t count = std::min(kChunkRows, total - begin);
    // On the CPU the output product's rows become the attention half's
    // result in place.
    const at::Tensor projected = w.output(context_rows.narrow(0, begin, count));
    const at::Tensor attended = ResidualLayerNorm(
        projected, x_rows.narrow(0, begin, count), w.attention_norm_weight, w.attention_norm_bias,
        config_.layer_norm_eps, device_.is_cpu() ? projected : at::Tensor());
    const at::Tensor inner = fused_bias_gelu()
                                 ? BiasGelu(w.intermediate(attended), w.intermediate.bias(),
                                            config_.activation == Activation::kGeluNew)
                                 : w.intermediate(attended);
    const at::Tensor normed = ResidualLayerNorm(
        w.ffn_output(inner), attended, w.output_norm_weight, w.output_norm_bias,
        config_.layer_norm_eps, out.defined() ? out.narrow(0, begin, count) : at::Tensor());
    if (!out.defined()) return normed.view(x.sizes());
  }
  return out.view(x.sizes());
}

absl::StatusOr<EncoderOutput> Encoder::Forward(const EncoderBatch& batch,
                                               const std::vector<CostAccount*>& row_costs) const {
  if (batch.sequences.empty()) return absl::InvalidArgumentError("empty batch");
  if (!row_costs.empty() && row_costs.size() != batch.sequences.size()) {
    return absl::InvalidArgumentError("row_costs: one entry per sequence expected");
  }
  size_t longest = 0;
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const std::vector<int32_t>& sequence = batch.sequences[i];
    if (sequence.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, " is empty"));
    }
    if (static_cast<int64_t>(sequence.size()) > max_sequence_length()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, " has ", sequence.size(),
                                                     " tokens; the model's limit is ",
                                                     max_sequence_length()));
    }
    for (int32_t id : sequence) {
      if (id < 0 || id >= config_.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", id, " outside the vocabulary [0, ", config_.vocab_size, ")"));
      }
    }
    longest = std::max(longest, sequence.size());
  }
  if (!batch.attention_options.empty() &&
      batch.attention_options.size() != batch.sequences.size()) {
    return absl::InvalidArgumentError("attention_options: one entry per sequence expected");
  }
  const bool has_types = !batch.token_types.empty();
  if (has_types && batch.token_types.size() != batch.sequences.size()) {
    return absl::InvalidArgumentError("token_types: one row per sequence expected");
  }
  for (size_t i = 0; has_types && i < batch.token_types.size(); ++i) {
    if (batch.token_types[i].size() != batch.sequences[i].size()) {
      return absl::InvalidArgumentError(absl::StrCat("token_types[", i, "]: length differs"));
    }
    for (int32_t type : batch.token_types[i]) {
      if (type < 0 || type >= std::max(1, config_.type_vocab_size)) {
        return absl::InvalidArgumentError(absl::StrCat("token type ", type, " out of range"));
      }
    }
  }
  const int64_t rows = static_cast<int64_t>(batch.sequences.size());
  // Padding rows are embedded too (then masked): a config whose pad_token_id
  // is null (-1) pads with id 0, never an index outside the table.
  at::Tensor ids =
      at::full({rows, static_cast<int64_t>(longest)}, std::max(config_.pad_token_id, 0), at::kLong);
  at::Tensor types = at::zeros({rows, static_cast<int64_t>(longest)}, at::kLong);
  EncoderOutput output;
  for (int64_t row = 0; row < rows; ++row) {
    const std::vector<int32_t>& sequence = batch.sequences[row];
    std::copy(sequence.begin(), sequence.end(), ids[row].data_ptr<int64_t>());
    if (has_types) {
      std::copy(batch.token_types[row].begin(), batch.token_types[row].end(),
                types[row].data_ptr<int64_t>());
    }
    output.lengths.push_back(static_cast<int64_t>(sequence.size()));
  }

  try {
    c10::InferenceMode inference_mode;
    std::vector<ItemAttentionCost> item_costs;
    // Real positions per row: the tokens, plus LSG's global tokens.
    std::vector<int64_t> positions;
    at::Tensor x;
    if (config_.lsg.has_value()) {
      x = EmbedWithGlobalTokens(ids, types, batch, output.lengths, &positions);
    } else {
      x = Embed(ids, types, output.lengths);
      positions = output.lengths;
    }
    // The rows still computing: live[r] is the batch row x's row r holds.
    // Abandoned rows leave before a layer; the rest keep their order.
    LiveRows live(batch.attention_options, row_costs, std::move(positions));
    for (int layer = 0; layer < config_.num_layers; ++layer) {
      if (batch.abandoned) {
        const std::vector<int64_t> keep = live.Kept(batch.abandoned);
        if (keep.empty()) {
          return absl::CancelledError("every sequence of the batch was abandoned");
        }
        if (keep.size() < live.size()) x = live.Keep(keep, x);
      }
      AtLayerBoundary();
      x = config_.modernbert.has_value()
              ? ModernBertLayer(x, layers_[layer], live.positions, live.options, layer, &item_costs)
              : Layer(x, layers_[layer], live.positions, live.options, layer, &item_costs);
      for (size_t row = 0; row < live.costs.size(); ++row) {
        if (live.costs[row] != nullptr) live.costs[row]->AddAttention(layer, item_costs[row]);
      }
    }
    if (config_.modernbert.has_value()) {
      x = Norm(x, weights_.final_norm_weight, weights_.final_norm_bias);
    }
    const int64_t run_length = x.size(1);
    if (config_.lsg.has_value()) {
      const int64_t global = config_.lsg->num_global_tokens;
      if (config_.lsg->pool_with_global) x.select(1, global).copy_(x.select(1, 0));
      x = x.narrow(1, global, static_cast<int64_t>(longest));
    }
    output.hidden = live.Scatter(HostFloatCopy(x), rows);
    for (size_t row = 0; row < live.costs.size(); ++row) {
      if (live.costs[row] != nullptr) live.costs[row]->AddSequence(live.positions[row], run_length);
    }
  } catch (const c10::Error& error) {
    return absl::InternalError(
        absl::StrCat("encoder forward failed: ", error.what_without_backtrace()));
  }
  return output;
}

}  // namespace docsparse
