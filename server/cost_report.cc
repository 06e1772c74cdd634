#include "server/cost_report.h"

namespace docsparse {

v1::AttentionKind ToProto(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kDense:
      return v1::ATTENTION_KIND_DENSE;
    case AttentionKind::kLsg:
      return v1::ATTENTION_KIND_LSG;
    case AttentionKind::kSbm:
      return v1::ATTENTION_KIND_SBM;
  }
  return v1::ATTENTION_KIND_UNSPECIFIED;
}

void FillCostReport(const CostAccount& account, AttentionKind kind, v1::CostReport* report) {
  const EncoderShape& shape = account.shape();
  report->set_input_tokens(account.input_tokens());
  report->set_padded_tokens(account.padded_tokens());
  report->set_windows(static_cast<int32_t>(account.sequences()));
  report->set_attention(ToProto(kind));
  report->set_mean_density(account.MeanDensity());
  report->clear_layers();
  for (int layer = 0; layer < shape.num_layers; ++layer) {
    v1::LayerCost* cost = report->add_layers();
    cost->set_layer(layer);
    for (int head = 0; head < shape.num_heads; ++head) {
      cost->add_head_density(account.HeadDensity(layer, head));
      cost->add_head_edges(account.HeadEdges(layer, head));
      if (kind == AttentionKind::kSbm) {
        cost->add_head_expected_density(account.HeadExpectedDensity(layer, head));
      }
    }
  }
  report->set_attention_edges(account.TotalEdges());
  report->set_attention_flops(account.AttentionFlops());
  report->set_planner_flops(account.PlannerFlops());
  report->set_total_flops(account.TotalFlops());
  report->set_dense_equivalent_flops(account.DenseEquivalentFlops());
}

}  // namespace docsparse
