// The derived keys' validity, which LsgValidFromLayout takes from the
// layout alone for every type but lsh (so a device never reads it back),
// against what the derived keys themselves say: for the selecting types the
// token each derived row was copied from (found by its values) must be
// attendable exactly where the key is valid; a pooled key is valid where
// its chunk has an attendable token; bos_pooling's always are. On padded
// layouts, with and without the masked first token. And norm's ranking of
// padding below an attendable key of norm 0.
#include "model/attention/lsg_sparse_keys.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace docsparse {
namespace {

struct Case {
  LsgSparsity sparsity;
  int sparsity_factor;
  int sparse_block_size;
  int32_t tokens;
  bool mask_first_token;
};

// DeriveLsgKeys' keys with their validity: its own (lsh), else the layout's.
LsgDerivedKeys DerivedKeysWithValidity(const LsgConfig& config, const LsgLayout& layout,
                                       const at::Tensor& first_query, const at::Tensor& keys,
                                       const at::Tensor& values) {
  LsgDerivedKeys derived =
      DeriveLsgKeys(config, layout, first_query, keys, values, at::Generator());
  if (derived.valid.empty()) derived.valid = LsgValidFromLayout(config, layout, keys.size(0));
  return derived;
}

std::string Describe(const Case& c) {
  return "sparsity " + std::to_string(static_cast<int>(c.sparsity)) + " factor " +
         std::to_string(c.sparsity_factor) + " sparse block " +
         std::to_string(c.sparse_block_size) + " tokens " + std::to_string(c.tokens) +
         (c.mask_first_token ? " first masked" : "");
}

LsgConfig ConfigFor(const Case& c) {
  LsgConfig config;
  config.block_size = 16;
  config.sparse_block_size = c.sparse_block_size;
  config.sparsity_factor = c.sparsity_factor;
  config.sparsity_type = c.sparsity;
  config.num_global_tokens = 1;
  config.mask_first_token = c.mask_first_token;
  return config;
}

bool Attendable(const LsgLayout& layout, int64_t token) {
  return token < layout.tokens && !(layout.first_token_masked && token == 0);
}

// The token whose key row equals derived row `row` of head h (keys are
// random, so rows are distinct), or -1.
int64_t SourceToken(const at::Tensor& keys, const at::Tensor& derived, int64_t h, int64_t row) {
  for (int64_t token = 0; token < keys.size(1); ++token) {
    if (at::equal(keys[h][token], derived[h][row])) return token;
  }
  return -1;
}

TEST(LsgSparseKeysTest, ValidityFromTheLayoutIsWhatTheKeysSay) {
  const int64_t heads = 5, d = 8;
  std::vector<Case> cases;
  for (const LsgSparsity sparsity :
       {LsgSparsity::kNorm, LsgSparsity::kStride, LsgSparsity::kBlockStride, LsgSparsity::kPooling,
        LsgSparsity::kBosPooling}) {
    for (const int factor : {1, 2, 4, 8}) {
      for (const int32_t tokens : {48, 53, 37, 70}) {
        for (const bool masked : {false, true}) {
          cases.push_back({sparsity, factor, 16, tokens, masked});
          if (sparsity == LsgSparsity::kNorm && factor <= 4) {
            cases.push_back({sparsity, factor, 8, tokens, masked});  // chunks of 8
          }
        }
      }
    }
  }
  at::manual_seed(3);
  for (const Case& c : cases) {
    const LsgConfig config = ConfigFor(c);
    const LsgLayout layout = LayoutLsgSequence(config, 1, c.tokens);
    ASSERT_FALSE(layout.full) << Describe(c);
    const int64_t t = layout.padded_tokens;
    const at::Tensor keys = at::randn({heads, t, d});
    const at::Tensor values = at::randn({heads, t, d});
    const at::Tensor first_query = at::randn({heads, d});
    const LsgDerivedKeys derived =
        DerivedKeysWithValidity(config, layout, first_query, keys, values);
    const int64_t count = layout.derived_keys;
    ASSERT_EQ(derived.keys.size(1), count) << Describe(c);
    ASSERT_EQ(derived.valid.size(), static_cast<size_t>(heads * count)) << Describe(c);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t s = 0; s < count; ++s) {
        bool want = true;
        if (c.sparsity_factor == 1 || c.sparsity == LsgSparsity::kNorm ||
            c.sparsity == LsgSparsity::kStride || c.sparsity == LsgSparsity::kBlockStride) {
          const int64_t token = SourceToken(keys, derived.keys, h, s);
          ASSERT_GE(token, 0) << Describe(c) << ": head " << h << " key " << s;
          want = Attendable(layout, token);
        } else if (c.sparsity == LsgSparsity::kPooling) {
          want = false;
          for (int64_t token = s * c.sparsity_factor; token < (s + 1) * c.sparsity_factor;
               ++token) {
            want = want || Attendable(layout, token);
          }
        }
        EXPECT_EQ(derived.valid[h * count + s] != 0, want)
            << Describe(c) << ": head " << h << " key " << s;
      }
    }
  }
}

TEST(LsgSparseKeysTest, NormKeepsAnAttendableKeyOfNormZeroOverPadding) {
  // Chunks of 16 keep 8; the last chunk has 5 tokens (48-52) and 11 padding
  // rows, which the projection filled with large keys.
  const Case c{LsgSparsity::kNorm, 2, 16, 53, false};
  const LsgConfig config = ConfigFor(c);
  const LsgLayout layout = LayoutLsgSequence(config, 1, c.tokens);
  const int64_t heads = 2, d = 8, t = layout.padded_tokens;
  at::manual_seed(4);
  at::Tensor keys = at::randn({heads, t, d});
  keys.narrow(1, c.tokens, t - c.tokens).mul_(100);
  keys.select(1, 50).zero_();
  const LsgDerivedKeys derived = DerivedKeysWithValidity(config, layout, at::randn({heads, d}),
                                                         keys, at::randn({heads, t, d}));
  const int64_t count = layout.derived_keys, first_slot = 3 * 8;
  for (int64_t h = 0; h < heads; ++h) {
    // Three padding rows first (invalid), then the five tokens by ascending
    // norm: the zero key first among them.
    for (int64_t i = 0; i < 8; ++i) {
      EXPECT_EQ(derived.valid[h * count + first_slot + i], i >= 3 ? 1 : 0) << h << ", " << i;
    }
    EXPECT_TRUE(at::equal(derived.keys[h][first_slot + 3], keys[h][50])) << h;
  }
}

}  // namespace
}  // namespace docsparse
