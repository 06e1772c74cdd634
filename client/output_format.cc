#include "client/output_format.h"

#include <cmath>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"

namespace docsparse {

std::string FormatFlops(double flops) {
  const char* units[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"};
  int unit = 0;
  while (std::fabs(flops) >= 1000 && unit < 5) {
    flops /= 1000;
    ++unit;
  }
  return absl::StrFormat("%.3g %s", flops, units[unit]);
}

std::string FormatCostReport(const v1::CostReport& cost) {
  std::string out = "Cost report\n";
  absl::StrAppendFormat(&out, "  tokens      %d in %d sequence(s)%s, %d with padding, batch %d\n",
                        cost.input_tokens(), cost.windows(), cost.truncated() ? " (truncated)" : "",
                        cost.padded_tokens(), cost.batch_size());
  const std::string kind = v1::AttentionKind_Name(cost.attention());
  if (!cost.precision().empty()) {
    absl::StrAppendFormat(&out, "  compute     %s linear layers on %s\n", cost.precision(),
                          cost.isa());
  }
  const std::string planner = absl::AsciiStrToLower(absl::StripPrefix(kind, "ATTENTION_KIND_"));
  absl::StrAppendFormat(&out, "  attention   %s, mean density %.4f, %d query-key pairs\n", planner,
                        cost.mean_density(), cost.attention_edges());
  if (!cost.knobs().values().empty()) {
    // Sorted by name: the map's order is the protobuf's.
    const std::map<std::string, double> values(cost.knobs().values().begin(),
                                               cost.knobs().values().end());
    std::vector<std::string> knobs;
    for (const auto& [name, value] : values) knobs.push_back(absl::StrFormat("%s=%g", name, value));
    absl::StrAppendFormat(
        &out, "  knobs       %s%s\n", absl::StrJoin(knobs, " "),
        cost.knobs().seed() != 0 ? absl::StrFormat(" seed=%d", cost.knobs().seed()) : "");
  }
  if (cost.layers_size() > 0) {
    std::vector<std::string> layers;
    for (const v1::LayerCost& layer : cost.layers()) {
      double sum = 0;
      for (double density : layer.head_density()) sum += density;
      const double mean = layer.head_density_size() ? sum / layer.head_density_size() : 0;
      layers.push_back(absl::StrFormat("L%d %.3f", layer.layer(), mean));
    }
    absl::StrAppend(&out, "  per layer   ", absl::StrJoin(layers, "  "), "\n");
  }
  const double saving =
      cost.total_flops() > 0 ? cost.dense_equivalent_flops() / cost.total_flops() : 0;
  absl::StrAppendFormat(&out, "  FLOPs       attention %s, total %s, dense-equivalent %s (%.2fx)\n",
                        FormatFlops(cost.attention_flops()), FormatFlops(cost.total_flops()),
                        FormatFlops(cost.dense_equivalent_flops()), saving);
  std::string budget = "none";
  switch (cost.budget().cap_case()) {
    case v1::SparsityBudget::kMaxDensity:
      budget = absl::StrFormat("max density %g", cost.budget().max_density());
      break;
    case v1::SparsityBudget::kMaxAttentionGflops:
      budget = absl::StrFormat("max attention %g GFLOP", cost.budget().max_attention_gflops());
      break;
    case v1::SparsityBudget::kEdgeRegularization:
      budget = absl::StrFormat("edge regularization %g", cost.budget().edge_regularization());
      break;
    case v1::SparsityBudget::CAP_NOT_SET:
      break;
  }
  absl::StrAppendFormat(&out, "  budget      %s (%s)\n", budget,
                        cost.budget_met() ? "met" : "NOT met");
  if (cost.generated_tokens() > 0) {
    absl::StrAppendFormat(&out, "  generation  %d tokens, decoder %s (in total)\n",
                          cost.generated_tokens(), FormatFlops(cost.decoder_flops()));
  }
  const v1::Timings& t = cost.timings();
  absl::StrAppendFormat(&out,
                        "  time        queue %.1f ms, tokenize %.1f ms, inference %.1f ms, "
                        "total %.1f ms",
                        t.queue_ms(), t.tokenize_ms(), t.inference_ms(), t.total_ms());
  if (cost.generated_tokens() > 0) {
    absl::StrAppendFormat(&out, ", first token %.1f ms", t.time_to_first_token_ms());
  }
  if (t.device_ms() > 0) absl::StrAppendFormat(&out, ", on the GPU %.1f ms", t.device_ms());
  absl::StrAppend(&out, "\n");
  return out;
}

std::string FormatEmbedding(const v1::EmbedResponse& response) {
  double norm = 0;
  for (float x : response.embedding()) norm += static_cast<double>(x) * x;
  std::vector<std::string> head;
  for (int i = 0; i < response.embedding_size() && i < 8; ++i) {
    head.push_back(absl::StrFormat("%+.4f", response.embedding(i)));
  }
  return absl::StrFormat("Embedding (%s): %d dimensions, L2 norm %.4f\n  [%s, ...]\n",
                         response.model(), response.embedding_size(), std::sqrt(norm),
                         absl::StrJoin(head, ", "));
}

std::string FormatClassification(const v1::ClassifyResponse& response) {
  std::string out = absl::StrFormat(
      "Labels (%s, %s)\n", response.model(),
      response.method() == v1::CLASSIFICATION_METHOD_HEAD ? "classification head" : "zero-shot");
  for (const v1::LabelScore& score : response.scores()) {
    const int bar = static_cast<int>(std::lround(score.score() * 30));
    absl::StrAppendFormat(&out, "  %-24s %6.2f%%  %-30s  cos %.3f\n", score.label(),
                          100.0 * score.score(), std::string(bar, '#'), score.similarity());
  }
  return out;
}

std::string FormatSummary(const v1::SummarizeResponse& response) {
  std::string out = absl::StrFormat(
      "Summary (%s, %s)\n", response.model(),
      response.kind() == v1::SUMMARY_KIND_ABSTRACTIVE ? "abstractive" : "extractive");
  if (response.sentences_size() == 0) return absl::StrCat(out, "  ", response.summary(), "\n");
  for (const v1::ExtractedSentence& sentence : response.sentences()) {
    absl::StrAppendFormat(&out, "  [%d] %s\n", sentence.index(), sentence.text());
  }
  return out;
}

std::string FormatModels(const v1::ListModelsResponse& response) {
  std::string out;
  for (const v1::ModelInfo& model : response.models()) {
    std::vector<std::string> tasks;
    for (int task : model.tasks()) {
      std::string name = v1::Task_Name(static_cast<v1::Task>(task));
      tasks.push_back(absl::AsciiStrToLower(name.substr(name.rfind('_') + 1)));
    }
    const std::string attention = v1::AttentionKind_Name(model.attention());
    absl::StrAppendFormat(
        &out,
        "%s  %s, %d layers x %d heads, hidden %d, %s attention, %d positions, "
        "up to %d tokens per document; tasks: %s\n",
        model.name(), model.architecture(), model.num_layers(), model.num_heads(),
        model.hidden_size(), absl::AsciiStrToLower(attention.substr(attention.rfind('_') + 1)),
        model.max_position_tokens(), model.max_document_tokens(), absl::StrJoin(tasks, ", "));
  }
  return out;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return "{}";
  return json;
}

}  // namespace docsparse
