#include "convert/sbm_student.h"

#include <cmath>

namespace docsparse::convert {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The reference's straight-through estimator (code/STE.py): the forward pass
// returns the sampled binary mask, the backward pass hands the mask's
// gradient to the edge probabilities on sampled edges only, clipped by
// hardtanh.
struct StraightThroughMask : public torch::autograd::Function<StraightThroughMask> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor /*probabilities*/,
                               torch::Tensor sampled) {
    ctx->save_for_backward({sampled});
    return sampled.clone();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const torch::Tensor sampled = ctx->get_saved_variables()[0];
    return {torch::hardtanh(sampled * grad_outputs[0]), torch::Tensor()};
  }
};

// β with Σ_ij p_ij = target · real pairs · heads (the planner's E[m],
// model/attention/sbm_planner.h, over the batch): bisection, after growing the bracket
// until it holds the target (the logits' scale is learnt, so no fixed range
// would do: with one, training learns to saturate the sigmoids beyond it and
// escapes the density it should train at). O(n·k) per evaluation.
double SolveTrainingBeta(const torch::Tensor& query_logits, const torch::Tensor& key_logits,
                         const torch::Tensor& block, const torch::Tensor& real, double target) {
  const torch::Tensor real_rows = real.unsqueeze(1).unsqueeze(3).to(torch::kFloat);  // [b,1,s,1]
  const double goal =
      target * (real.sum(1).to(torch::kDouble).pow(2).sum().item<double>()) * block.size(1);
  auto expected = [&](double beta) {
    const torch::Tensor q = (torch::sigmoid(query_logits - beta) * real_rows).sum(2);  // [b,h,k]
    const torch::Tensor k = (torch::sigmoid(key_logits - beta) * real_rows).sum(2);
    return (torch::matmul(q.unsqueeze(2), block).squeeze(2) * k).sum().item<double>();
  };
  double lo = -1, hi = 1;
  for (double step = 2; expected(lo) < goal && step < 1e6; step *= 2) lo -= step;
  for (double step = 2; expected(hi) > goal && step < 1e6; step *= 2) hi += step;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    (expected(mid) > goal ? lo : hi) = mid;
  }
  return hi;
}

torch::Tensor Trainable(const at::Tensor& tensor) {
  return tensor.detach().clone().set_requires_grad(true);
}

}  // namespace

SbmStudent::SbmStudent(const SbmParameters& initial) {
  for (int i = 0; i < initial.num_layers(); ++i) {
    const SbmLayerParameters& p = initial.layer(i);
    layers_.push_back({Trainable(p.mlp_in_weight), Trainable(p.mlp_in_bias),
                       Trainable(p.mlp_out_weight), Trainable(p.mlp_out_bias),
                       Trainable(p.clusters)});
  }
}

std::vector<torch::Tensor> SbmStudent::parameters() const {
  std::vector<torch::Tensor> all;
  for (const SbmLayerParameters& p : layers_) {
    all.insert(all.end(),
               {p.mlp_in_weight, p.mlp_in_bias, p.mlp_out_weight, p.mlp_out_bias, p.clusters});
  }
  return all;
}

std::map<std::string, torch::Tensor> SbmStudent::named_parameters() const {
  std::map<std::string, torch::Tensor> named;
  for (int i = 0; i < num_layers(); ++i) {
    const SbmLayerParameters& p = layers_[i];
    named[SbmParameters::TensorName(i, "mlp.0.weight")] = p.mlp_in_weight;
    named[SbmParameters::TensorName(i, "mlp.0.bias")] = p.mlp_in_bias;
    named[SbmParameters::TensorName(i, "mlp.2.weight")] = p.mlp_out_weight;
    named[SbmParameters::TensorName(i, "mlp.2.bias")] = p.mlp_out_bias;
    named[SbmParameters::TensorName(i, "clusters")] = p.clusters;
  }
  return named;
}

StudentLoss SbmStudent::Loss(int layer, const LayerRecord& record, double delta,
                             double target_density, at::Generator& generator) const {
  const SbmLayerParameters& p = layers_[layer];
  const int64_t heads = record.query.size(1);
  const int64_t seq = record.query.size(2);
  const int64_t k = p.clusters.size(1);

  // Which positions are real: [batch, seq].
  const torch::Tensor positions = torch::arange(seq, torch::kLong);
  const torch::Tensor lengths = torch::tensor(record.lengths, torch::kLong).unsqueeze(1);
  const torch::Tensor real = positions.unsqueeze(0).lt(lengths);
  const torch::Tensor real_pairs =
      (real.unsqueeze(2) & real.unsqueeze(1)).unsqueeze(1).to(torch::kFloat);  // [b,1,s,s]

  auto logits = [&](const torch::Tensor& x) {
    const torch::Tensor node =
        torch::linear(torch::relu(torch::linear(x, p.mlp_in_weight, p.mlp_in_bias)),
                      p.mlp_out_weight, p.mlp_out_bias);
    return torch::matmul(node, p.clusters.transpose(1, 2).unsqueeze(0));  // [b,h,s,k]
  };
  const torch::Tensor query_logits = logits(record.query);
  const torch::Tensor key_logits = logits(record.key);
  const torch::Tensor block =
      torch::softmax(torch::matmul(p.clusters, p.clusters.transpose(1, 2)).view({heads, k * k}), 1)
          .view({1, heads, k, k});
  double beta = 0;
  if (target_density > 0) {
    torch::NoGradGuard no_grad;
    beta = SolveTrainingBeta(query_logits, key_logits, block, real, target_density);
  }
  const torch::Tensor query_hat = torch::sigmoid(query_logits - beta);
  const torch::Tensor key_hat = torch::sigmoid(key_logits - beta);
  const torch::Tensor expected =
      torch::matmul(torch::matmul(query_hat, block), key_hat.transpose(2, 3));  // p_ij
  const torch::Tensor survive = -torch::expm1(-expected);                       // 1 − e^(−p)

  torch::Tensor sampled;
  {
    torch::NoGradGuard no_grad;
    sampled = torch::bernoulli((survive.detach() + delta).clamp(0, 1), generator) * real_pairs;
  }
  const torch::Tensor mask = StraightThroughMask::apply(survive, sampled);

  // The dense scores are constants: only the mask carries gradients.
  torch::Tensor weights;
  {
    torch::NoGradGuard no_grad;
    const double scale = 1.0 / std::sqrt(static_cast<double>(record.query.size(3)));
    torch::Tensor scores = torch::matmul(record.query, record.key.transpose(2, 3)) * scale;
    scores = scores.masked_fill(real_pairs.eq(0), -1e30);
    weights = torch::exp(scores - std::get<0>(scores.max(-1, /*keepdim=*/true)));
  }
  const torch::Tensor numerator = weights * mask;
  const torch::Tensor attention = numerator / numerator.sum(-1, /*keepdim=*/true).clamp_min(1e-12);
  const torch::Tensor out = torch::matmul(attention, record.value);

  const torch::Tensor real_queries = real.unsqueeze(1).unsqueeze(3).to(torch::kFloat);
  const torch::Tensor dense_attention = weights / weights.sum(-1, /*keepdim=*/true);
  const torch::Tensor mass =
      ((dense_attention * survive).sum(-1, /*keepdim=*/true) * real_queries).sum() /
      (real_queries.sum() * heads);
  const torch::Tensor sampled_rows = sampled.sum(-1, /*keepdim=*/true).gt(0).to(torch::kFloat);
  const torch::Tensor target_norms = record.context.pow(2).sum(-1, /*keepdim=*/true);
  // Rows that drew no edge output zeros, and the straight-through gradient,
  // which flows through sampled edges only, cannot see them: left alone,
  // training empties rows for free. Their cost is known in closed form,
  // though: a row is empty with probability Π_j e^(−p_ij) = e^(−Σ_j p_ij),
  // and then errs by its whole target. That expectation replaces the
  // sampled empty rows' error, with an exact gradient.
  const torch::Tensor row_rates = (expected * real_pairs).sum(-1, /*keepdim=*/true);
  const torch::Tensor error =
      ((out - record.context).pow(2).sum(-1, /*keepdim=*/true) * sampled_rows * real_queries)
          .sum() +
      (torch::exp(-row_rates) * target_norms * real_queries).sum();
  const torch::Tensor reference = (target_norms * real_queries).sum().clamp_min(1e-12);
  const torch::Tensor density = (mask * real_pairs).sum() / (real_pairs.sum() * heads);
  const torch::Tensor real_rows = real.unsqueeze(1).unsqueeze(3).to(torch::kFloat);
  const torch::Tensor logit_scale = ((query_logits.pow(2) + key_logits.pow(2)) * real_rows).sum() /
                                    (2 * real_rows.sum() * heads * k);
  return {error / reference, density, mass, logit_scale, beta};
}

absl::StatusOr<std::shared_ptr<const SbmParameters>> SbmStudent::Snapshot(
    std::map<std::string, std::string> metadata) const {
  std::vector<SbmLayerParameters> frozen;
  for (const SbmLayerParameters& p : layers_) {
    frozen.push_back({p.mlp_in_weight.detach(), p.mlp_in_bias.detach(), p.mlp_out_weight.detach(),
                      p.mlp_out_bias.detach(), p.clusters.detach()});
  }
  return SbmParameters::Create(std::move(frozen), std::move(metadata));
}

}  // namespace docsparse::convert
