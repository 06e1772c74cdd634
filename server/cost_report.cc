#include "server/cost_report.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace docsparse {

v1::AttentionKind ToProto(AttentionKind kind) {
  // ATTENTION_KIND_<NAME>: the proto lists every planner by the same name.
  v1::AttentionKind proto = v1::ATTENTION_KIND_UNSPECIFIED;
  v1::AttentionKind_Parse(
      absl::StrCat("ATTENTION_KIND_", absl::AsciiStrToUpper(std::string(AttentionKindName(kind)))),
      &proto);
  return proto;
}

void FillCostReport(const CostAccount& account, AttentionKind kind, bool sampled,
                    v1::CostReport* report) {
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
      if (sampled) {
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

std::vector<std::pair<std::string, std::string>> CostMetadata(const v1::CostReport& cost) {
  std::vector<std::pair<std::string, std::string>> metadata = {
      {"x-docsparse-density", absl::StrFormat("%.6g", cost.mean_density())},
      {"x-docsparse-attention-gflops", absl::StrFormat("%.6g", cost.attention_flops() / 1e9)},
      {"x-docsparse-total-gflops", absl::StrFormat("%.6g", cost.total_flops() / 1e9)},
      {"x-docsparse-dense-equivalent-gflops",
       absl::StrFormat("%.6g", cost.dense_equivalent_flops() / 1e9)},
      {"x-docsparse-input-tokens", absl::StrCat(cost.input_tokens())},
      {"x-docsparse-batch-size", absl::StrCat(cost.batch_size())},
      {"x-docsparse-budget-met", cost.budget_met() ? "true" : "false"},
      {"x-docsparse-queue-ms", absl::StrFormat("%.3f", cost.timings().queue_ms())},
      {"x-docsparse-inference-ms", absl::StrFormat("%.3f", cost.timings().inference_ms())},
      {"x-docsparse-total-ms", absl::StrFormat("%.3f", cost.timings().total_ms())},
  };
  // A GPU server's only.
  if (cost.timings().device_ms() > 0) {
    metadata.emplace_back("x-docsparse-device-ms",
                          absl::StrFormat("%.3f", cost.timings().device_ms()));
  }
  return metadata;
}

v1::CostReport CombineCostReports(const std::vector<const v1::CostReport*>& reports) {
  if (reports.size() == 1) return *reports.front();
  v1::CostReport combined;
  combined.set_budget_met(true);
  double density = 0;
  for (const v1::CostReport* report : reports) {
    combined.set_input_tokens(combined.input_tokens() + report->input_tokens());
    combined.set_padded_tokens(combined.padded_tokens() + report->padded_tokens());
    combined.set_windows(combined.windows() + report->windows());
    combined.set_attention_edges(combined.attention_edges() + report->attention_edges());
    combined.set_attention_flops(combined.attention_flops() + report->attention_flops());
    combined.set_planner_flops(combined.planner_flops() + report->planner_flops());
    combined.set_total_flops(combined.total_flops() + report->total_flops());
    combined.set_dense_equivalent_flops(combined.dense_equivalent_flops() +
                                        report->dense_equivalent_flops());
    combined.set_generated_tokens(combined.generated_tokens() + report->generated_tokens());
    combined.set_decoder_flops(combined.decoder_flops() + report->decoder_flops());
    combined.set_budget_met(combined.budget_met() && report->budget_met());
    combined.set_batch_size(std::max(combined.batch_size(), report->batch_size()));
    v1::Timings& timings = *combined.mutable_timings();
    timings.set_queue_ms(std::max(timings.queue_ms(), report->timings().queue_ms()));
    timings.set_tokenize_ms(std::max(timings.tokenize_ms(), report->timings().tokenize_ms()));
    timings.set_inference_ms(std::max(timings.inference_ms(), report->timings().inference_ms()));
    timings.set_device_ms(std::max(timings.device_ms(), report->timings().device_ms()));
    timings.set_total_ms(std::max(timings.total_ms(), report->timings().total_ms()));
    density += report->mean_density();
  }
  if (!reports.empty()) {
    combined.set_mean_density(density / static_cast<double>(reports.size()));
    combined.set_attention(reports.front()->attention());
    combined.set_precision(reports.front()->precision());
    combined.set_isa(reports.front()->isa());
  }
  return combined;
}

}  // namespace docsparse
