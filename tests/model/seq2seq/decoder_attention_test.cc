// AttendInPlace against attention written out in double precision with
// LibTorch (scores, mask, softmax, product), on operands laid out as the
// decoder hands them over: queries and keys strided inside a fused
// projection's output, keys in a cache buffer longer than the keys used, the
// context written into a [batch, steps, heads, d] buffer.
#include "model/seq2seq/decoder_attention.h"

#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace docsparse {
namespace {

// softmax(q·kᵀ·scale)·v in double; `causal` as AttendInPlace.
at::Tensor Reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                     bool causal) {
  const at::Tensor qd = q.to(at::kDouble), kd = k.to(at::kDouble), vd = v.to(at::kDouble);
  at::Tensor scores = at::matmul(qd, kd.transpose(2, 3)) * scale;
  if (causal) {
    const int64_t q_len = q.size(2), k_len = k.size(2);
    const at::Tensor keys = at::arange(k_len).unsqueeze(0);
    const at::Tensor last = at::arange(k_len - q_len, k_len).unsqueeze(1);
    scores = scores.masked_fill(keys > last, -std::numeric_limits<double>::infinity());
  }
  return at::matmul(at::softmax(scores, -1), vd);
}

double MaxRelativeError(const at::Tensor& got, const at::Tensor& want) {
  return ((got.to(at::kDouble) - want).abs().max() / want.abs().max()).item<double>();
}

struct Shape {
  int64_t batch, heads, q_len, k_len, d;
  bool causal;
};

std::string Name(const Shape& s) {
  return "b" + std::to_string(s.batch) + "_h" + std::to_string(s.heads) + "_q" +
         std::to_string(s.q_len) + "_k" + std::to_string(s.k_len) + "_d" + std::to_string(s.d) +
         (s.causal ? "_causal" : "");
}

// Operands as the decoder lays them out, in `type`: q inside a fused
// [batch, q_len, 3, heads, d] projection, k and v in cache buffers with room
// for more keys, out a [batch, q_len, heads, d] buffer.
struct Operands {
  at::Tensor projection, k_cache, v_cache, context;
  at::Tensor q, k, v, out;

  Operands(const Shape& s, at::ScalarType type, uint64_t seed) {
    at::Generator generator = at::detail::createCPUGenerator(seed);
    const at::TensorOptions options = at::TensorOptions().dtype(type);
    projection = at::randn({s.batch, s.q_len, 3, s.heads, s.d}, generator).to(type);
    k_cache = at::randn({s.batch, s.heads, s.k_len + 7, s.d}, generator).to(type);
    v_cache = at::randn({s.batch, s.heads, s.k_len + 7, s.d}, generator).to(type);
    context = at::full({s.batch, s.q_len, s.heads, s.d}, 7.0, options);
    q = projection.select(2, 0).permute({0, 2, 1, 3});
    k = k_cache.narrow(2, 0, s.k_len);
    v = v_cache.narrow(2, 0, s.k_len);
    out = context.permute({0, 2, 1, 3});
  }
};

class DecoderAttentionTest : public ::testing::TestWithParam<Shape> {};

TEST_P(DecoderAttentionTest, Fp32MatchesTheReference) {
  c10::InferenceMode inference_mode;
  const Shape s = GetParam();
  ASSERT_TRUE(DecoderAttentionInPlace(at::kFloat, at::kCPU, s.d));
  const Operands o(s, at::kFloat, 3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.d));
  AttendInPlace(o.q, o.k, o.v, o.out, scale, s.causal);
  EXPECT_LE(MaxRelativeError(o.out, Reference(o.q, o.k, o.v, scale, s.causal)), 1e-5);
}

// Where the CPU has a bf16 executor: within bf16's rounding of the
// probabilities and the output of the double reference on the same bf16
// inputs (the executors sum in fp32).
TEST_P(DecoderAttentionTest, Bf16MatchesTheReference) {
  c10::InferenceMode inference_mode;
  const Shape s = GetParam();
  if (!DecoderAttentionInPlace(at::kBFloat16, at::kCPU, s.d)) {
    GTEST_SKIP() << "no bf16 attention executor on this CPU for head_dim " << s.d;
  }
  const Operands o(s, at::kBFloat16, 5);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.d));
  AttendInPlace(o.q, o.k, o.v, o.out, scale, s.causal);
  EXPECT_LE(MaxRelativeError(o.out, Reference(o.q, o.k, o.v, scale, s.causal)), 2e-2);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecoderAttentionTest,
                         ::testing::Values(
                             // One step of several rows (self-attention).
                             Shape{5, 3, 1, 37, 64, true}, Shape{2, 12, 1, 1, 64, true},
                             // Rows of a text folded into the queries
                             // (cross-attention), head sizes of every path.
                             Shape{1, 4, 4, 129, 64, false}, Shape{1, 2, 3, 50, 32, false},
                             Shape{1, 2, 9, 17, 24, false}, Shape{1, 2, 2, 11, 12, false},
                             // Several steps at once (a teacher-forced start).
                             Shape{3, 2, 6, 6, 32, true}, Shape{2, 3, 5, 19, 64, true}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           return Name(info.param);
                         });

TEST(DecoderAttentionRefusalTest, MismatchedOperandsAreRefused) {
  c10::InferenceMode inference_mode;
  const Operands o(Shape{2, 2, 1, 8, 32, true}, at::kFloat, 1);
  EXPECT_THROW(AttendInPlace(o.q, o.k.narrow(3, 0, 16), o.v, o.out, 1.0, true), c10::Error);
  EXPECT_THROW(AttendInPlace(o.q, o.k, o.v.narrow(2, 0, 4), o.out, 1.0, true), c10::Error);
  EXPECT_THROW(AttendInPlace(o.q, o.k, o.v, o.out.to(at::kDouble), 1.0, true), c10::Error);
  // More causal queries than keys.
  const Operands longer(Shape{1, 2, 9, 4, 32, false}, at::kFloat, 1);
  EXPECT_THROW(AttendInPlace(longer.q, longer.k, longer.v, longer.out, 1.0, true), c10::Error);
}

}  // namespace
}  // namespace docsparse
