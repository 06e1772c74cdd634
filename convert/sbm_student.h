// The differentiable side of SBM calibration: one layer's SBM parameters as
// trainable LibTorch tensors and the loss of its SBM attention against the
// dense attention output it must reproduce (DESIGN.md, "Models": distil each
// layer's dense attention output into the SBM attention).
//
// Training sequences are short (~128 tokens), so n x n tensors are fine:
//   p = Q̂ S K̂ᵀ, and q = 1 − e^(−p), the probability that edge ij survives
//   deduplication: exactly what fastRG inference realises;
//   M ~ Bernoulli(min(1, q + δ)): δ is the paper's random edge exploration,
//   so an edge whose probability collapsed can still be sampled and revived;
//   the forward pass uses the binary M; the backward pass is the
//   straight-through estimator of the reference implementation (STE.py):
//   ∂L/∂q = hardtanh(M ⊙ ∂L/∂M), a gradient through sampled edges only;
//   the attention is the masked softmax over M (rows without edges give
//   zeros, as at inference).
// The terms (convert/sbm_calibration.cc weighs them):
//   distill  ‖out − dense_out‖² / ‖dense_out‖² over rows that drew an edge,
//            plus, for every row, P(row empty) · ‖dense_out_row‖², with
//            P(empty) = e^(−Σ_j p_ij) in closed form. The STE cannot see an
//            empty row (it has no sampled edge); without this term training
//            empties rows for free, and at serving densities those rows
//            output zeros.
//   density  mean of M over real pairs, with the STE gradient (penalty λ).
//   mass     Σ_j a_ij q_ij per query, a the dense attention: the expected
//            attention mass the edges capture, an exact expectation with a
//            gradient for every edge. The STE signal alone moves the
//            parameters too slowly for a calibration of minutes (measured:
//            no gain over the initialisation in 150 steps); this term ranks
//            edges quickly, and λ against it sets how many to keep.
//   logit_scale  mean squared membership logit: saturated sigmoids have no
//            gradient, so a small penalty keeps them trainable.
#ifndef DOCSPARSE_CONVERT_SBM_STUDENT_H_
#define DOCSPARSE_CONVERT_SBM_STUDENT_H_

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/attention/sbm_parameters.h"

namespace docsparse::convert {

// One layer's attention inputs and dense output, recorded from the frozen
// teacher: [batch, heads, seq, head_dim] each, normal (not inference)
// tensors; lengths [batch] real positions per row.
struct LayerRecord {
  torch::Tensor query, key, value, context;
  std::vector<int64_t> lengths;
};

struct StudentLoss {
  torch::Tensor distill;  // normalised squared error (scalar, differentiable)
  torch::Tensor density;  // sampled edges / real pairs, all heads (scalar, STE gradient)
  // Expected dense attention mass the sampled edges capture per query,
  // Σ_j a_ij (1 − e^(−p_ij)), averaged over real queries and heads: an exact
  // expectation (no sampling), differentiable everywhere.
  torch::Tensor mass;
  // Mean squared membership logit (queries and keys, real tokens), for a
  // penalty that keeps the sigmoids out of saturation: saturated
  // memberships have no gradient, and β can always undo a uniform shift.
  torch::Tensor logit_scale;
  double beta = 0;  // the edge regularization the loss was computed at
};

// All layers' SBM parameters as leaf tensors with requires_grad.
class SbmStudent {
 public:
  explicit SbmStudent(const SbmParameters& initial);

  int num_layers() const { return static_cast<int>(layers_.size()); }
  std::vector<torch::Tensor> parameters() const;
  // name -> tensor, the sbm.safetensors names (for checkpoints).
  std::map<std::string, torch::Tensor> named_parameters() const;

  // Layer `layer`'s loss on `record`, drawing the mask with `generator`.
  // With target_density > 0 the memberships are shifted by the β that gives
  // that expected density (a constant for the step, as a budget's β is at
  // inference), so the parameters learn which edges to keep at the
  // densities they will be served at; 0 trains at β = 0.
  StudentLoss Loss(int layer, const LayerRecord& record, double delta, double target_density,
                   at::Generator& generator) const;

  // A frozen copy for sbm.safetensors / inference; INVALID_ARGUMENT when
  // training diverged (a non-finite value).
  absl::StatusOr<std::shared_ptr<const SbmParameters>> Snapshot(
      std::map<std::string, std::string> metadata) const;

 private:
  std::vector<SbmLayerParameters> layers_;  // tensors require grad
};

}  // namespace docsparse::convert

#endif  // DOCSPARSE_CONVERT_SBM_STUDENT_H_
