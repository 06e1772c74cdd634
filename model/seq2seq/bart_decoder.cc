#include "model/seq2seq/bart_decoder.h"

#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/checkpoint/checkpoint_tensor.h"
#include "model/seq2seq/decoder_attention.h"
#include "model/seq2seq/seq2seq_embeddings.h"

namespace docsparse {
namespace {

// [rows, steps, heads * d] -> [rows, heads, steps, d]
at::Tensor SplitHeads(const at::Tensor& x, int64_t heads) {
  return x.view({x.size(0), x.size(1), heads, -1}).transpose(1, 2);
}

// [rows, heads, steps, d] -> [rows, steps, heads * d]
at::Tensor MergeHeads(const at::Tensor& x) {
  return x.transpose(1, 2).reshape({x.size(0), x.size(2), -1});
}

}  // namespace

absl::StatusOr<BartDecoderWeights> LoadBartDecoderWeights(const Checkpoint& checkpoint,
                                                          const BartConfig& config) {
  ASSIGN_OR_RETURN(const std::string prefix, FindSeq2SeqPrefix(checkpoint));
  const auto get = [&](const std::string& name, const std::vector<int64_t>& shape) {
    return ReadFloatTensor(checkpoint, prefix + name, shape);
  };
  const int64_t h = config.hidden_size;
  BartDecoderWeights w;
  ASSIGN_OR_RETURN(w.token_embeddings, ReadTokenEmbeddings(checkpoint, prefix, "decoder", config));
  ASSIGN_OR_RETURN(w.position_embeddings, ReadPositionTable(checkpoint, prefix, "decoder", config));
  if (config.embedding_layer_norm()) {
    ASSIGN_OR_RETURN(w.embedding_norm_weight, get("decoder.layernorm_embedding.weight", {h}));
    ASSIGN_OR_RETURN(w.embedding_norm_bias, get("decoder.layernorm_embedding.bias", {h}));
  }
  if (config.pre_layer_norm()) {
    const std::string norm = "decoder." + config.final_norm_name();
    ASSIGN_OR_RETURN(w.final_norm_weight, get(norm + ".weight", {h}));
    ASSIGN_OR_RETURN(w.final_norm_bias, get(norm + ".bias", {h}));
  }
  // A cross-attention bias, or zeros where the config's projections have none.
  const auto bias = [&](const std::string& name) {
    return ReadBiasOrZeros(checkpoint, prefix + name, h, config.attention_bias());
  };
  for (int i = 0; i < config.decoder_layers; ++i) {
    const std::string p = absl::StrCat("decoder.layers.", i, ".");
    BartDecoderLayerWeights layer;
    ASSIGN_OR_RETURN(layer.self,
                     ReadBartLayerWeights(checkpoint, prefix + p, h, config.decoder_ffn_size,
                                          SelfAttentionNames::kBart, config.attention_bias()));
    BartCrossAttentionWeights& cross = layer.cross;
    ASSIGN_OR_RETURN(cross.q_weight, get(p + "encoder_attn.q_proj.weight", {h, h}));
    ASSIGN_OR_RETURN(cross.q_bias, bias(p + "encoder_attn.q_proj.bias"));
    ASSIGN_OR_RETURN(at::Tensor k_weight, get(p + "encoder_attn.k_proj.weight", {h, h}));
    ASSIGN_OR_RETURN(at::Tensor k_bias, bias(p + "encoder_attn.k_proj.bias"));
    ASSIGN_OR_RETURN(at::Tensor v_weight, get(p + "encoder_attn.v_proj.weight", {h, h}));
    ASSIGN_OR_RETURN(at::Tensor v_bias, bias(p + "encoder_attn.v_proj.bias"));
    cross.kv_weight = at::cat({k_weight, v_weight}, 0);
    cross.kv_bias = at::cat({k_bias, v_bias}, 0);
    ASSIGN_OR_RETURN(cross.out_weight, get(p + "encoder_attn.out_proj.weight", {h, h}));
    ASSIGN_OR_RETURN(cross.out_bias, bias(p + "encoder_attn.out_proj.bias"));
    ASSIGN_OR_RETURN(cross.norm_weight, get(p + "encoder_attn_layer_norm.weight", {h}));
    ASSIGN_OR_RETURN(cross.norm_bias, get(p + "encoder_attn_layer_norm.bias", {h}));
    w.layers.push_back(std::move(layer));
  }
  if (config.tie_word_embeddings) {
    w.lm_head = w.token_embeddings;
  } else {
    // The head of a task model sits beside "model.", not under it.
    ASSIGN_OR_RETURN(w.lm_head,
                     ReadFloatTensor(checkpoint, "lm_head.weight", {config.vocab_size, h}));
  }
  if (checkpoint.Has("final_logits_bias")) {
    ASSIGN_OR_RETURN(at::Tensor bias,
                     ReadFloatTensor(checkpoint, "final_logits_bias", {1, config.vocab_size}));
    w.final_logits_bias = bias.view({config.vocab_size});
  } else {
    w.final_logits_bias = at::zeros({config.vocab_size}, at::kFloat);
  }
  return w;
}

std::pair<at::Tensor, at::Tensor> SelfAttentionCache::Append(int layer, const at::Tensor& k,
                                                             const at::Tensor& v) {
  const int64_t steps = k.size(2);
  const int64_t total = past + steps;
  const auto write = [&](at::Tensor* buffer, const at::Tensor& step) {
    if (!buffer->defined() || buffer->size(2) < total) {
      // Doubling: a long generation regrows log2 times, each copying once.
      constexpr int64_t kFirstCapacity = 32;
      const int64_t capacity =
          std::max(total, buffer->defined() ? 2 * buffer->size(2) : kFirstCapacity);
      at::Tensor grown =
          at::empty({step.size(0), step.size(1), capacity, step.size(3)}, step.options());
      if (buffer->defined() && past > 0) {
        grown.narrow(2, 0, past).copy_(buffer->narrow(2, 0, past));
      }
      *buffer = std::move(grown);
    }
    buffer->narrow(2, past, steps).copy_(step);
    return buffer->narrow(2, 0, total);
  };
  return {write(&keys[layer], k), write(&values[layer], v)};
}

void SelfAttentionCache::SelectRows(const at::Tensor& source) {
  TORCH_CHECK(source.dim() == 1 && source.scalar_type() == at::kLong && source.is_cpu() &&
                  source.is_contiguous(),
              "source: expected [new_rows] int64 on the CPU");
  if (keys.empty() || !keys[0].defined()) return;
  const int64_t* from = source.data_ptr<int64_t>();
  const int64_t new_rows = source.size(0);
  const int64_t old_rows = keys[0].size(0);
  std::vector<int64_t> moved;  // rows whose contents change
  for (int64_t r = 0; r < new_rows; ++r) {
    if (from[r] != r) moved.push_back(r);
  }
  if (new_rows == old_rows && moved.empty()) return;
  const auto select = [&](at::Tensor* buffer) {
    const at::Tensor held = buffer->narrow(2, 0, past);
    if (new_rows != old_rows) {
      at::Tensor kept = at::empty({new_rows, buffer->size(1), buffer->size(2), buffer->size(3)},
                                  buffer->options());
      for (int64_t r = 0; r < new_rows; ++r) kept[r].narrow(1, 0, past).copy_(held[from[r]]);
      *buffer = std::move(kept);
      return;
    }
    // In place: the moved rows' sources that are themselves overwritten are
    // read from a copy taken first.
    std::vector<int64_t> overwritten_sources;
    std::vector<int64_t> copy_slot(static_cast<size_t>(old_rows), -1);
    for (int64_t r : moved) {
      const int64_t s = from[r];
      if (from[s] != s && copy_slot[s] < 0) {
        copy_slot[s] = static_cast<int64_t>(overwritten_sources.size());
        overwritten_sources.push_back(s);
      }
    }
    const at::Tensor copies =
        overwritten_sources.empty()
            ? at::Tensor()
            : held.index_select(0, at::tensor(overwritten_sources, at::kLong).to(held.device()));
    for (int64_t r : moved) {
      const int64_t s = from[r];
      held[r].copy_(copy_slot[s] >= 0 ? copies[copy_slot[s]] : held[s]);
    }
  };
  for (at::Tensor& k : keys) {
    if (k.defined()) select(&k);
  }
  for (at::Tensor& v : values) {
    if (v.defined()) select(&v);
  }
}

BartDecoder::BartDecoder(BartConfig config, BartDecoderWeights weights, at::Device device,
                         Precision precision)
    : config_(std::move(config)),
      device_(device),
      type_(Seq2SeqElementType(precision)),
      attention_in_place_(DecoderAttentionInPlace(type_, device_, config_.decoder_head_dim())),
      weights_(std::move(weights)) {
  const auto product = [&](const at::Tensor& weight, const at::Tensor& bias,
                           std::optional<Activation> activation = std::nullopt) {
    return Linear(weight, bias, precision, Linear::Bias::kInProduct, activation, device_);
  };
  for (BartDecoderLayerWeights& w : weights_.layers) {
    products_.push_back(BartDecoderLayerProducts{
        product(w.self.qkv_weight, w.self.qkv_bias), product(w.self.out_weight, w.self.out_bias),
        product(w.cross.q_weight, w.cross.q_bias), product(w.cross.kv_weight, w.cross.kv_bias),
        product(w.cross.out_weight, w.cross.out_bias),
        // The activation runs inside the product (on the CPU).
        product(w.self.fc1_weight, w.self.fc1_bias, config_.activation),
        product(w.self.fc2_weight, w.self.fc2_bias)});
    for (at::Tensor* packed :
         {&w.self.qkv_weight, &w.self.qkv_bias, &w.self.out_weight, &w.self.out_bias,
          &w.cross.q_weight, &w.cross.q_bias, &w.cross.kv_weight, &w.cross.kv_bias,
          &w.cross.out_weight, &w.cross.out_bias, &w.self.fc1_weight, &w.self.fc1_bias,
          &w.self.fc2_weight, &w.self.fc2_bias}) {
      *packed = at::Tensor();
    }
  }
  lm_head_ = product(weights_.lm_head, weights_.final_logits_bias);
  // An untied LM head would otherwise be held twice (50k x 768 fp32 for BART).
  weights_.lm_head = at::Tensor();
  weights_.final_logits_bias = at::Tensor();
  // What stays a tensor: the embeddings and the norms.
  PlaceTensors(
      device_, type_,
      {&weights_.token_embeddings, &weights_.position_embeddings, &weights_.embedding_norm_weight,
       &weights_.embedding_norm_bias, &weights_.final_norm_weight, &weights_.final_norm_bias});
  for (BartDecoderLayerWeights& w : weights_.layers) {
    PlaceTensors(
        device_, type_,
        {&w.self.attention_norm_weight, &w.self.attention_norm_bias, &w.self.final_norm_weight,
         &w.self.final_norm_bias, &w.cross.norm_weight, &w.cross.norm_bias});
  }
}

at::Tensor BartDecoder::LayerNorm(const at::Tensor& x, const at::Tensor& weight,
                                  const at::Tensor& bias) const {
  return at::layer_norm(x, {config_.hidden_size}, weight, bias, config_.layer_norm_eps);
}

absl::StatusOr<CrossAttentionMemory> BartDecoder::Attend(const at::Tensor& hidden,
                                                         const std::vector<int64_t>& valid_rows,
                                                         double* flops) const {
  if (hidden.dim() != 3 || hidden.size(2) != config_.hidden_size ||
      hidden.size(0) != static_cast<int64_t>(valid_rows.size())) {
    return absl::InvalidArgumentError(absl::StrCat("encoder output: expected [", valid_rows.size(),
                                                   ", rows, ", config_.hidden_size, "], got ",
                                                   hidden.sizes().vec().size(), " dims"));
  }
  for (size_t b = 0; b < valid_rows.size(); ++b) {
    if (valid_rows[b] < 1 || valid_rows[b] > hidden.size(1)) {
      return absl::InvalidArgumentError(absl::StrCat("valid_rows[", b, "] = ", valid_rows[b],
                                                     " outside [1, ", hidden.size(1), "]"));
    }
  }
  const int64_t heads = config_.decoder_heads;
  const int64_t h = config_.hidden_size;
  CrossAttentionMemory memory;
  try {
    c10::InferenceMode inference_mode;
    for (const BartDecoderLayerProducts& layer : products_) {
      std::vector<at::Tensor> keys, values;
      for (size_t b = 0; b < valid_rows.size(); ++b) {
        const at::Tensor rows =
            hidden[static_cast<int64_t>(b)].narrow(0, 0, valid_rows[b]).to(device_, type_);
        // [rows, 2h] -> [2, heads, rows, head_dim]
        const at::Tensor kv =
            layer.cross_kv(rows).view({valid_rows[b], 2, heads, -1}).permute({1, 2, 0, 3});
        keys.push_back(kv[0].contiguous());
        values.push_back(kv[1].contiguous());
        if (flops != nullptr) *flops += 2.0 * valid_rows[b] * h * 2 * h;
      }
      memory.keys.push_back(std::move(keys));
      memory.values.push_back(std::move(values));
    }
  } catch (const c10::Error& error) {
    return absl::InternalError(
        absl::StrCat("cross-attention projection failed: ", error.what_without_backtrace()));
  }
  return memory;
}

at::Tensor BartDecoder::SelfAttention(const at::Tensor& x, const BartDecoderLayerProducts& p,
                                      int layer, SelfAttentionCache* cache, double* flops) const {
  const int64_t rows = x.size(0);
  const int64_t steps = x.size(1);
  const int64_t h = config_.hidden_size;
  const int64_t heads = config_.decoder_heads;
  const int64_t d = config_.decoder_head_dim();
  const double scaling = 1.0 / std::sqrt(static_cast<double>(d));
  // [rows, steps, 3, heads, d]; q, k and v as [rows, heads, steps, d] views.
  const at::Tensor qkv = p.self_qkv(x).view({rows, steps, 3, heads, d});
  const auto part = [&](int64_t i) { return qkv.select(2, i).permute({0, 2, 1, 3}); };
  const auto [keys, values] = cache->Append(layer, part(1), part(2));
  const int64_t total = keys.size(2);
  if (flops != nullptr) {
    *flops += 2.0 * rows * steps * h * 3 * h        // q, k, v
              + 2.0 * 2 * rows * steps * total * h  // scores and context, all heads
              + 2.0 * rows * steps * h * h;         // out_proj
  }
  if (attention_in_place_) {
    const at::Tensor context = at::empty({rows, steps, heads, d}, qkv.options());
    AttendInPlace(part(0), keys, values, context.permute({0, 2, 1, 3}), scaling, /*causal=*/true);
    return p.self_out(context.view({rows, steps, h}));
  }
  // BartAttention scales the projected queries before the product.
  const at::Tensor query = part(0) * scaling;
  at::Tensor scores = at::matmul(query, keys.transpose(2, 3));  // [rows, heads, steps, total]
  if (steps > 1) {
    // New token i sits at position past + i and sees keys 0 .. past + i.
    const at::TensorOptions on_device = at::TensorOptions().dtype(at::kLong).device(device_);
    const at::Tensor key_positions = at::arange(total, on_device).unsqueeze(0);
    const at::Tensor query_positions = at::arange(total - steps, total, on_device).unsqueeze(1);
    scores = scores.masked_fill(key_positions > query_positions,
                                -std::numeric_limits<float>::infinity());
  }
  const at::Tensor context = at::matmul(at::softmax(scores, -1), values);
  return p.self_out(MergeHeads(context));
}

at::Tensor BartDecoder::CrossAttention(const at::Tensor& x, const BartDecoderLayerProducts& p,
                                       const std::vector<at::Tensor>& keys,
                                       const std::vector<at::Tensor>& values,
                                       const std::vector<int64_t>& row_sequence,
                                       double* flops) const {
  const int64_t rows = x.size(0);
  const int64_t steps = x.size(1);
  const int64_t h = config_.hidden_size;
  const int64_t heads = config_.decoder_heads;
  const int64_t d = config_.decoder_head_dim();
  const double scaling = 1.0 / std::sqrt(static_cast<double>(d));
  if (flops != nullptr) *flops += 2.0 * 2 * rows * steps * h * h;  // q_proj, out_proj
  if (attention_in_place_) {
    const at::Tensor query = p.cross_q(x).view({rows, steps, heads, d});
    const at::Tensor context = at::empty_like(query);
    // Each run of consecutive rows of one sequence (a text's beams) as one
    // item: its rows and steps folded into the query axis, read and
    // written in place.
    for (int64_t first = 0; first < rows;) {
      int64_t end = first + 1;
      while (end < rows && row_sequence[end] == row_sequence[first]) ++end;
      const auto fold = [&](const at::Tensor& t) {
        return t.narrow(0, first, end - first)
            .view({1, (end - first) * steps, heads, d})
            .permute({0, 2, 1, 3});
      };
      const at::Tensor& k = keys[row_sequence[first]];  // [heads, source, d]
      AttendInPlace(fold(query), k.unsqueeze(0), values[row_sequence[first]].unsqueeze(0),
                    fold(context), scaling, /*causal=*/false);
      if (flops != nullptr) *flops += 2.0 * 2 * (end - first) * steps * k.size(1) * h;
      first = end;
    }
    return p.cross_out(context.view({rows, steps, h}));
  }
  const at::Tensor query = SplitHeads(p.cross_q(x) * scaling, heads);
  // Rows of one sequence share its keys: one batched product per sequence,
  // the rows folded into the query axis.
  std::map<int64_t, std::vector<int64_t>> groups;
  for (int64_t r = 0; r < rows; ++r) groups[row_sequence[r]].push_back(r);
  at::Tensor context = groups.size() == 1 ? at::Tensor() : at::empty_like(query);
  for (const auto& [sequence, members] : groups) {
    const int64_t n = static_cast<int64_t>(members.size());
    const at::Tensor index = at::tensor(members, at::kLong).to(device_);
    const at::Tensor q = groups.size() == 1 ? query : query.index_select(0, index);
    // [n, heads, steps, d] -> [heads, n * steps, d]
    const at::Tensor folded = q.transpose(0, 1).reshape({heads, n * steps, -1});
    const at::Tensor& k = keys[sequence];  // [heads, source, d]
    const at::Tensor probs = at::softmax(at::matmul(folded, k.transpose(1, 2)), -1);
    const at::Tensor out =
        at::matmul(probs, values[sequence]).view({heads, n, steps, -1}).transpose(0, 1);
    if (groups.size() == 1) {
      context = out;
    } else {
      context.index_copy_(0, index, out);
    }
    if (flops != nullptr) *flops += 2.0 * 2 * n * steps * k.size(1) * h;
  }
  return p.cross_out(MergeHeads(context));
}

absl::StatusOr<at::Tensor> BartDecoder::Forward(const at::Tensor& tokens,
                                                const std::vector<int64_t>& row_sequence,
                                                const CrossAttentionMemory& memory,
                                                SelfAttentionCache* cache, double* flops) const {
  if (tokens.dim() != 2 || tokens.scalar_type() != at::kLong) {
    return absl::InvalidArgumentError("tokens: expected [rows, steps] int64");
  }
  const int64_t rows = tokens.size(0);
  const int64_t steps = tokens.size(1);
  if (rows == 0 || steps == 0) return absl::InvalidArgumentError("tokens: empty");
  if (static_cast<int64_t>(row_sequence.size()) != rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("row_sequence has ", row_sequence.size(), " entries for ", rows, " rows"));
  }
  for (int64_t sequence : row_sequence) {
    if (sequence < 0 || sequence >= memory.sequences()) {
      return absl::InvalidArgumentError(
          absl::StrCat("row_sequence entry ", sequence, " outside [0, ", memory.sequences(), ")"));
    }
  }
  const int num_layers = config_.decoder_layers;
  if (static_cast<int>(memory.keys.size()) != num_layers) {
    return absl::InvalidArgumentError("cross-attention memory has the wrong number of layers");
  }
  if (cache->keys.empty()) {
    cache->keys.resize(num_layers);
    cache->values.resize(num_layers);
  }
  if (cache->keys[0].defined() && cache->keys[0].size(0) != rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens have ", rows, " rows, the cache ", cache->keys[0].size(0)));
  }
  if (cache->past + steps > max_positions()) {
    return absl::InvalidArgumentError(absl::StrCat("decoder position ", cache->past + steps - 1,
                                                   " beyond the model's limit of ", max_positions(),
                                                   " positions"));
  }
  const int64_t lowest = tokens.min().item<int64_t>();
  const int64_t highest = tokens.max().item<int64_t>();
  if (lowest < 0 || highest >= config_.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("token id ", lowest < 0 ? lowest : highest,
                                                   " outside the vocabulary [0, ",
                                                   config_.vocab_size, ")"));
  }
  try {
    c10::InferenceMode inference_mode;
    const int64_t offset = config_.position_offset() + cache->past;
    at::Tensor x = at::embedding(weights_.token_embeddings, tokens.to(device_));
    if (config_.scale_embedding) x = x * std::sqrt(static_cast<double>(config_.hidden_size));
    x = x + at::embedding(weights_.position_embeddings,
                          at::arange(offset, offset + steps,
                                     at::TensorOptions().dtype(at::kLong).device(device_)))
                .unsqueeze(0);
    if (config_.embedding_layer_norm()) {
      x = LayerNorm(x, weights_.embedding_norm_weight, weights_.embedding_norm_bias);
    }
    const bool pre = config_.pre_layer_norm();
    for (int i = 0; i < num_layers; ++i) {
      const BartDecoderLayerWeights& w = weights_.layers[i];
      // BartDecoderLayer (post-LN) / PegasusDecoderLayer (pre-LN): self
      // attention, cross-attention, feed-forward, each with a residual.
      at::Tensor in =
          pre ? LayerNorm(x, w.self.attention_norm_weight, w.self.attention_norm_bias) : x;
      x = x + SelfAttention(in, products_[i], i, cache, flops);
      if (!pre) x = LayerNorm(x, w.self.attention_norm_weight, w.self.attention_norm_bias);

      in = pre ? LayerNorm(x, w.cross.norm_weight, w.cross.norm_bias) : x;
      x = x +
          CrossAttention(in, products_[i], memory.keys[i], memory.values[i], row_sequence, flops);
      if (!pre) x = LayerNorm(x, w.cross.norm_weight, w.cross.norm_bias);

      in = pre ? LayerNorm(x, w.self.final_norm_weight, w.self.final_norm_bias) : x;
      x = x + products_[i].fc2(products_[i].fc1(in));
      if (!pre) x = LayerNorm(x, w.self.final_norm_weight, w.self.final_norm_bias);
      if (flops != nullptr) {
        *flops += 2.0 * 2 * rows * steps * config_.hidden_size * config_.decoder_ffn_size;
      }
    }
    if (pre) x = LayerNorm(x, weights_.final_norm_weight, weights_.final_norm_bias);
    cache->past += steps;
    if (flops != nullptr) {
      *flops += 2.0 * rows * steps * config_.hidden_size * config_.vocab_size;
    }
    return lm_head_(x);
  } catch (const c10::Error& error) {
    return absl::InternalError(
        absl::StrCat(std::string(Seq2SeqArchitectureName(config_.architecture)),
                     " decoder forward failed: ", error.what_without_backtrace()));
  }
}

}  // namespace docsparse
