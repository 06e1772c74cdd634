// SBM node memberships Q̂ = sigmoid(logits − β) and their column sums: the
// inner loops of the planner's β solver and of its sampling tables, run over
// every (token, cluster) entry, so they are vectorized (AVX2 when the CPU has
// it and k is a multiple of 8, plain C++ otherwise; the two agree to ~1e-7).
#ifndef DOCSPARSE_MODEL_ATTENTION_SBM_MEMBERSHIPS_H_
#define DOCSPARSE_MODEL_ATTENTION_SBM_MEMBERSHIPS_H_

#include <cstdint>

namespace docsparse {

// For logits [rows, k] (row-major) and β, adds to sums[a] the column sums
// Σ_i σ(x_ia − β) and to slopes[a] Σ_i σ(1 − σ) (minus the derivative of the
// sum in β). Deterministic: a fixed summation order for given inputs.
void AddSigmoidColumnSums(const float* logits, int64_t rows, int k, double beta, double* sums,
                          double* slopes);

// out[a * rows + i] = σ(x_ia − β): the memberships, transposed to [k, rows]
// when `transpose`, else out[i * k + a] ([rows, k]).
void SigmoidMemberships(const float* logits, int64_t rows, int k, double beta, bool transpose,
                        float* out);

// out[i, b] = Σ_a memberships[i, a] · block[a, b]: the rows of Q̂·S
// ([rows, k] times [k, k], row-major, float32).
void MultiplyByBlock(const float* memberships, int64_t rows, int k, const float* block, float* out);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_SBM_MEMBERSHIPS_H_
