#include "model/attention/lsg_sparse_keys.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/largest_in_order.h"
#include "kernels/row_norms.h"

namespace docsparse {
namespace {

using at::indexing::Slice;

// lsh with sparsity_factor == sparse_block_size runs bos_pooling (reference).
LsgSparsity EffectiveSparsity(const LsgConfig& config) {
  if (config.sparsity_type == LsgSparsity::kLsh &&
      config.sparsity_factor == config.sparse_block_size) {
    return LsgSparsity::kBosPooling;
  }
  return config.sparsity_type;
}

std::vector<uint8_t> ToValid(const at::Tensor& flags) {
  const at::Tensor bytes = flags.to(at::kCPU).to(at::kByte).contiguous();
  return std::vector<uint8_t>(bytes.data_ptr<uint8_t>(), bytes.data_ptr<uint8_t>() + bytes.numel());
}

// Gathers tokens idx [heads, derived] (per head) from keys and values: whole
// rows per head with index_select (at::gather with an expanded index reads
// an index per element, and took most of the derivation at 16k tokens).
LsgDerivedKeys Gather(const at::Tensor& idx, const at::Tensor& keys, const at::Tensor& values) {
  const auto rows = [&idx](const at::Tensor& x) {
    std::vector<at::Tensor> heads;
    for (int64_t h = 0; h < x.size(0); ++h) heads.push_back(x[h].index_select(0, idx[h]));
    return at::stack(heads);
  };
  return {rows(keys), rows(values), {}};
}

// Whether token `token` of the padded sequence may be attended: a real
// token, and not the masked first one.
bool Attendable(const LsgLayout& layout, int64_t token) {
  return token < layout.tokens && !(layout.first_token_masked && token == 0);
}

// How many tokens of [first, first + count) may be attended.
int64_t AttendableIn(const LsgLayout& layout, int64_t first, int64_t count) {
  const int64_t real =
      std::max<int64_t>(0, std::min<int64_t>(first + count, layout.tokens) - first);
  const bool masked_first = layout.first_token_masked && first == 0 && real > 0;
  return real - (masked_first ? 1 : 0);
}

}  // namespace

// From the layout alone (lsh's buckets depend on the keys): on a device the
// derived keys then need no read-back, which made every layer wait for the
// GPU.
std::vector<uint8_t> LsgValidFromLayout(const LsgConfig& config, const LsgLayout& layout,
                                        int64_t heads) {
  const int64_t t = layout.padded_tokens;
  const int64_t sf = config.sparsity_factor;
  const int64_t derived = t / sf;
  std::vector<uint8_t> valid(static_cast<size_t>(heads * derived));
  // Types whose flags are the same for every head fill the first row.
  const auto fill_rows = [&](auto flag) {
    for (int64_t s = 0; s < derived; ++s) valid[s] = flag(s);
    for (int64_t h = 1; h < heads; ++h) {
      std::copy(valid.begin(), valid.begin() + derived, valid.begin() + h * derived);
    }
  };
  if (sf == 1) {
    fill_rows([&](int64_t s) { return Attendable(layout, s); });
    return valid;
  }
  switch (EffectiveSparsity(config)) {
    case LsgSparsity::kNorm: {
      // Per chunk the kept tokens in ascending norm, padding below every
      // attendable token (SelectByNorm): a chunk with n attendable tokens
      // keeps per_chunk − n padding tokens first where n < per_chunk.
      const int64_t chunk = config.SelectionChunk();
      const int64_t per_chunk = chunk / sf;
      fill_rows([&](int64_t s) {
        const int64_t attendable = AttendableIn(layout, s / per_chunk * chunk, chunk);
        return s % per_chunk >= per_chunk - attendable;
      });
      break;
    }
    case LsgSparsity::kPooling:
      fill_rows([&](int64_t s) { return AttendableIn(layout, s * sf, sf) > 0; });
      break;
    case LsgSparsity::kStride:
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t s = 0; s < derived; ++s) {
          valid[h * derived + s] = Attendable(layout, s * sf + h % sf);
        }
      }
      break;
    case LsgSparsity::kBlockStride: {
      const int64_t block = config.block_size;
      const int64_t step = block / sf;
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t s = 0; s < derived; ++s) {
          const int64_t token = (s % step + h * step) % block + s / step * block;
          valid[h * derived + s] = Attendable(layout, token);
        }
      }
      break;
    }
    case LsgSparsity::kBosPooling:  // never masked (lsg_sparse_keys.h)
      std::fill(valid.begin(), valid.end(), 1);
      break;
    case LsgSparsity::kLsh:
    case LsgSparsity::kNone:
      break;
  }
  return valid;
}

namespace {

// d values from `from` to `to`; a head of 32 bf16 values (64 bytes) with a
// copy of known size, which the compiler inlines.
template <typename T>
void CopyRow(T* to, const T* from, int64_t d) {
  if (d * sizeof(T) == 64) {
    std::memcpy(to, from, 64);
  } else {
    std::memcpy(to, from, d * sizeof(T));
  }
}

// norm: per head and chunk of `chunk` tokens, the `per_chunk` tokens of
// largest key norm (tokens not attendable rank below every attendable one;
// the reference's norm · mask ties them with an attendable key of norm 0,
// leaving its sort to choose), in ascending order of
// norm as the reference's argsort leaves them (ties by position). Written
// directly over the keys' rows: at::norm on bf16, argsort and index_select
// per head took 3.3 ms of a 4,096-token layer, a fifth of its attention.
template <typename T>
LsgDerivedKeys SelectByNorm(const at::Tensor& keys, const at::Tensor& values,
                            const std::vector<uint8_t>& attendable, int64_t chunk,
                            int64_t per_chunk) {
  const int64_t heads = keys.size(0);
  const int64_t t = keys.size(1);
  const int64_t d = keys.size(2);
  TORCH_CHECK(keys.stride(2) == 1 && values.stride(2) == 1, "norm sparsity: rows must be dense");
  const int64_t derived = t / chunk * per_chunk;
  LsgDerivedKeys out{at::empty({heads, derived, d}, keys.options()),
                     at::empty({heads, derived, d}, values.options()),
                     {}};
  const T* k = keys.data_ptr<T>();
  const T* v = values.data_ptr<T>();
  T* out_k = out.keys.data_ptr<T>();
  T* out_v = out.values.data_ptr<T>();
  const int64_t value_head_stride = values.stride(0);
  const int64_t value_row_stride = values.stride(1);
  at::parallel_for(0, t / chunk, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
    std::vector<float> norms(static_cast<size_t>(heads * chunk));  // [heads, chunk]
    std::vector<float> token_norms(static_cast<size_t>(heads));
    std::vector<int32_t> kept(static_cast<size_t>(per_chunk));
    for (int64_t c = chunk_begin; c < chunk_end; ++c) {
      const int64_t first = c * chunk;
      // The chunk's value rows, asked for into L2 now: the copies below
      // read half of them, one row a head at a time, and waited on memory
      // for each (81% of this function's time).
      for (int64_t j = 0; j < chunk; ++j) {
        for (int64_t h = 0; h < heads; ++h) {
          const T* row = v + h * value_head_stride + (first + j) * value_row_stride;
          for (int64_t e = 0; e < d; e += 64 / static_cast<int64_t>(sizeof(T))) {
            __builtin_prefetch(row + e, 0, 2);
          }
        }
      }
      if constexpr (std::is_same_v<T, at::BFloat16>) {
        // A token's keys for every head lie together in the projection's
        // output: read 16 tokens at a time, all their heads (head by head
        // over the whole chunk, strided over tokens, they waited on memory).
        Bf16HeadNorms(reinterpret_cast<const uint16_t*>(k + first * keys.stride(1)), chunk,
                      keys.stride(1), heads, keys.stride(0), d, norms.data());
      } else {  // token by token, in order
        for (int64_t j = 0; j < chunk; ++j) {
          FloatRowNorms(k + (first + j) * keys.stride(1), heads, keys.stride(0), d,
                        token_norms.data());
          for (int64_t h = 0; h < heads; ++h) norms[h * chunk + j] = token_norms[h];
        }
      }
      // Norms are >= 0, so their bits order as they do; one more than the
      // bits for attendable tokens and 0 for the others ranks those below.
      auto* bits = reinterpret_cast<uint32_t*>(norms.data());
      for (int64_t j = 0; j < chunk; ++j) {
        for (int64_t h = 0; h < heads; ++h) {
          uint32_t& rank = bits[h * chunk + j];
          rank = attendable[first + j] ? rank + 1 : 0;
        }
      }
      for (int64_t h = 0; h < heads; ++h) {
        LargestInOrder(bits + h * chunk, static_cast<int32_t>(chunk),
                       static_cast<int32_t>(per_chunk), kept.data());
        for (int64_t i = 0; i < per_chunk; ++i) {
          const int64_t token = first + kept[i];
          const int64_t slot = h * derived + c * per_chunk + i;
          CopyRow(out_k + slot * d, k + h * keys.stride(0) + token * keys.stride(1), d);
          CopyRow(out_v + slot * d, v + h * value_head_stride + token * value_row_stride, d);
        }
      }
    }
  });
  return out;
}

// SelectByNorm on a device with tensor operations: the same tokens in the
// same order (a stable ascending sort per chunk keeps ties by position, and
// the last per_chunk of it are SelectByNorm's kept tokens).
LsgDerivedKeys SelectByNormOnDevice(const at::Tensor& keys, const at::Tensor& values,
                                    const at::Tensor& attendable, int64_t chunk,
                                    int64_t per_chunk) {
  const int64_t heads = keys.size(0);
  const int64_t t = keys.size(1);
  const int64_t chunks = t / chunk;
  // Not attendable: -1, below every norm (SelectByNorm).
  const at::Tensor norms =
      at::where(attendable.narrow(0, 0, chunks * chunk),
                keys.narrow(1, 0, chunks * chunk).to(at::kFloat).pow(2).sum(-1).sqrt(),
                at::full({}, -1.0f, keys.options().dtype(at::kFloat)));  // [h, t']
  const at::Tensor order =
      std::get<1>(at::sort(norms.view({heads, chunks, chunk}), /*stable=*/true, /*dim=*/-1, false));
  const at::Tensor tokens =
      (order.narrow(-1, chunk - per_chunk, per_chunk) +
       (at::arange(chunks, keys.options().dtype(at::kLong)) * chunk).view({1, -1, 1}))
          .reshape({heads, -1});  // [h, derived]
  // One gather over all heads' rows: on a GPU every launch costs as much as
  // a small kernel, and a loop over heads launched 26 per item and layer.
  const at::Tensor rows_of_heads =
      (tokens + at::arange(heads, tokens.options()).view({-1, 1}) * t).reshape(-1);
  const auto rows = [&](const at::Tensor& x) {
    return x.reshape({heads * t, x.size(2)})
        .index_select(0, rows_of_heads)
        .view({heads, -1, x.size(2)});
  };
  return {rows(keys), rows(values), {}};
}

// One reference lsh_round: hash each (masked) key of a chunk to one of
// `output_size` buckets by the argmax of ±(normalised key · random
// rotation), and sum keys, values and mask weights per bucket.
void LshRound(at::Tensor& keys, at::Tensor& values, at::Tensor& mask, int64_t output_size,
              at::Generator generator) {
  // keys [h, c, t, d]; mask [h, c, t, 1]
  const int64_t heads = keys.size(0), chunks = keys.size(1), d = keys.size(3);
  const int64_t hashes = output_size / 2;
  // Drawn on the host from the CPU generator, then moved to the keys'
  // device: the same rotations for the same request seed on either.
  at::Tensor rotation =
      at::randn({heads, 1, d, hashes}, generator, at::TensorOptions().dtype(keys.scalar_type()));
  if (!keys.is_cpu()) {
    rotation = rotation.pin_memory().to(keys.device(), /*non_blocking=*/true);
  }
  at::Tensor projected =
      at::matmul(keys.div(keys.norm(2, -1, true).clamp_min(1e-12)) * mask.clamp(0, 1), rotation);
  const at::Tensor buckets = at::cat({projected, projected.neg()}, -1).argmax(-1, true);
  const at::Tensor zeros = at::zeros({heads, chunks, output_size, d}, keys.options());
  keys = zeros.scatter_add(2, buckets.expand({-1, -1, -1, d}), keys);
  values = zeros.scatter_add(2, buckets.expand({-1, -1, -1, d}), values);
  mask = at::zeros({heads, chunks, output_size, 1}, keys.options()).scatter_add(2, buckets, mask);
}

}  // namespace

LsgDerivedKeys DeriveLsgKeys(const LsgConfig& config, const LsgLayout& layout,
                             const at::Tensor& first_query, const at::Tensor& keys,
                             const at::Tensor& values, at::Generator lsh_generator) {
  const int64_t heads = keys.size(0);
  const int64_t t = layout.padded_tokens;
  const int64_t d = keys.size(2);
  const int64_t sf = config.sparsity_factor;
  if (sf == 1) return {keys, values, {}};  // the reference passes the tokens themselves
  // On the keys' device: every operation below runs there (the CUDA build).
  const at::TensorOptions index_options = keys.options().dtype(at::kLong);
  // [t] whether each token may be attended (Attendable), for the types that
  // weigh or mask by it.
  const auto attendable_tokens = [&] {
    at::Tensor attendable = at::arange(t, index_options).lt(layout.tokens);
    if (layout.first_token_masked) attendable.index_put_({0}, false);
    return attendable;
  };
  const LsgSparsity sparsity = EffectiveSparsity(config);
  const bool selects = sparsity == LsgSparsity::kNorm || sparsity == LsgSparsity::kStride ||
                       sparsity == LsgSparsity::kBlockStride;
  if (keys.scalar_type() != at::kFloat && !selects) {
    LsgDerivedKeys derived =
        DeriveLsgKeys(config, layout, first_query.to(at::kFloat), keys.to(at::kFloat),
                      values.to(at::kFloat), lsh_generator);
    derived.keys = derived.keys.to(keys.scalar_type());
    derived.values = derived.values.to(values.scalar_type());
    return derived;
  }
  switch (sparsity) {
    case LsgSparsity::kNorm: {
      const int64_t chunk = config.SelectionChunk();
      if (keys.is_cuda()) {
        return SelectByNormOnDevice(keys, values, attendable_tokens(), chunk, chunk / sf);
      }
      std::vector<uint8_t> flags(static_cast<size_t>(t));
      for (int64_t token = 0; token < t; ++token) flags[token] = Attendable(layout, token);
      if (keys.scalar_type() == at::kBFloat16) {
        return SelectByNorm<at::BFloat16>(keys, values, flags, chunk, chunk / sf);
      }
      LsgDerivedKeys derived =
          SelectByNorm<float>(keys.to(at::kFloat), values.to(at::kFloat), flags, chunk, chunk / sf);
      derived.keys = derived.keys.to(keys.scalar_type());
      derived.values = derived.values.to(values.scalar_type());
      return derived;
    }
    case LsgSparsity::kPooling: {
      const at::Tensor w = attendable_tokens().to(keys.scalar_type()).view({1, t / sf, sf, 1});
      const at::Tensor count = w.sum(2);  // [1, t/sf, 1]
      const at::Tensor pooled_k = (keys.view({heads, t / sf, sf, d}) * w).sum(2) / (count + 1e-6);
      const at::Tensor pooled_v = (values.view({heads, t / sf, sf, d}) * w).sum(2) / (count + 1e-6);
      return {pooled_k, pooled_v, {}};
    }
    case LsgSparsity::kStride: {
      const at::Tensor idx = (at::arange(t / sf, index_options) * sf).view({1, -1}) +
                             (at::arange(heads, index_options) % sf).view({-1, 1});
      return Gather(idx, keys, values);
    }
    case LsgSparsity::kBlockStride: {
      const int64_t block = config.block_size;
      const int64_t step = block / sf;
      at::Tensor idx = at::arange(step, index_options).view({1, 1, -1}) +
                       at::arange(heads, index_options).view({-1, 1, 1}) * step;
      idx = idx.remainder(block) + (at::arange(t / block, index_options) * block).view({1, -1, 1});
      return Gather(idx.reshape({heads, -1}), keys, values);
    }
    case LsgSparsity::kBosPooling: {
      const at::Tensor chunk_k = keys.view({heads, t / sf, sf, d});
      const at::Tensor chunk_v = values.view({heads, t / sf, sf, d});
      const float lowest = std::numeric_limits<float>::lowest();
      const at::Tensor additive = at::where(attendable_tokens(), at::zeros({}, keys.options()),
                                            at::full({}, lowest, keys.options()))
                                      .view({1, t / sf, 1, sf});
      // [h, t/sf, 1, sf]: the first token's query against each chunk.
      at::Tensor scores =
          at::matmul(first_query.view({heads, 1, 1, d}), chunk_k.transpose(-1, -2)) /
          std::sqrt(static_cast<double>(d));
      scores = at::softmax(scores + additive, -1);
      return {at::matmul(scores, chunk_k).view({heads, t / sf, d}),
              at::matmul(scores, chunk_v).view({heads, t / sf, d}),
              {}};
    }
    case LsgSparsity::kLsh: {
      const int64_t chunk = config.SelectionChunk();
      const at::Tensor w =
          attendable_tokens().to(keys.scalar_type()).view({1, t / chunk, chunk, 1});
      at::Tensor k = keys.view({heads, t / chunk, chunk, d}) * w;
      at::Tensor v = values.view({heads, t / chunk, chunk, d}) * w;
      at::Tensor mask = w.expand({heads, -1, -1, -1}).contiguous();
      for (int round = 0; round < config.lsh_num_pre_rounds; ++round) {
        LshRound(k, v, mask, chunk, lsh_generator);
      }
      LshRound(k, v, mask, chunk / sf, lsh_generator);
      k = k / (mask + 1e-8);
      v = v / (mask + 1e-8);
      return {k.reshape({heads, -1, d}), v.reshape({heads, -1, d}),
              ToValid(mask.reshape({heads, -1}).gt(0))};
    }
    case LsgSparsity::kNone:
      break;
  }
  return {};
}

bool LsgPaddingReachesTokens(const LsgConfig& config) {
  return config.HasSparseKeys() && config.sparsity_factor > 1 &&
         EffectiveSparsity(config) == LsgSparsity::kBosPooling;
}

}  // namespace docsparse
