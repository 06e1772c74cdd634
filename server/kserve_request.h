// The KServe v2 / Open Inference Protocol tensors and parameters of a
// ModelInferRequest, in docsparse's terms, and the FP32 outputs back; free of
// gRPC calls and of the model, so the protocol rules are tested on their own.
//
// The contract (what KServeService serves):
//   input  "text"      BYTES [N] (or [N, 1]): N documents, UTF-8, either in
//                      contents.bytes_contents or in raw_input_contents (each
//                      element a 4-byte little-endian length, then the bytes)
//   output "embedding" FP32 [N, hidden]   (the default output)
//   output "scores"    FP32 [N, labels]   in the order the labels were given
//   request parameters: the sparsity budget and options (kKnownParameters)
// Errors are INVALID_ARGUMENT naming the field, e.g.
// "inputs[0].datatype: expected BYTES, got FP32".
#ifndef DOCSPARSE_SERVER_KSERVE_REQUEST_H_
#define DOCSPARSE_SERVER_KSERVE_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "docsparse/v1/docsparse.pb.h"
#include "inference/grpc_predict_v2.pb.h"

namespace docsparse {

inline constexpr char kKServeTextInput[] = "text";
inline constexpr char kKServeEmbeddingOutput[] = "embedding";
inline constexpr char kKServeScoresOutput[] = "scores";
// Each document is one job on the model's batcher queue (bounded, 256 by
// default): a request must not fill it alone.
inline constexpr int64_t kKServeMaxDocuments = 64;

// Request parameters understood, with their types: labels (string,
// comma-separated), max_density / max_attention_gflops / edge_regularization
// (double; an int64 or a numeric string is accepted, since KServe's client
// sends no doubles), strict (bool, or "true"/"false"), attention (string:
// dense, lsg, sbm, ...), seed (int64 >= 0, uint64 or a numeric string),
// overflow (string: reject, truncate, chunk), pooling (string: cls, mean),
// normalize (bool), temperature (as the caps). Any other name is
// INVALID_ARGUMENT.
extern const char* const kKServeParameters[];

// One decoded ModelInfer call.
struct KServeInferCall {
  // The documents, as sent: UTF-8 is checked by the task.
  std::vector<std::string> texts;
  // The request used raw_input_contents: answer in raw_output_contents.
  bool raw = false;
  // Requested output names in request order, no duplicates; default
  // {"embedding"}.
  std::vector<std::string> outputs;
  // The budget, overflow and request id (from the request's `id`) as a
  // DocumentService request would carry them.
  v1::SparsityBudget budget;
  v1::RequestOptions options;
  v1::Pooling pooling = v1::POOLING_UNSPECIFIED;
  std::optional<bool> normalize;
  std::optional<float> temperature;
  // From "labels", whitespace around each trimmed; empty: model defaults.
  std::vector<std::string> labels;

  bool wants(std::string_view output) const;
};

// Decodes `request`'s inputs, outputs and parameters. Does not look at the
// model name or version (the service resolves those).
absl::StatusOr<KServeInferCall> ParseKServeInferRequest(
    const inference::ModelInferRequest& request);

// raw BYTES tensor -> its elements; `field` prefixes errors.
absl::StatusOr<std::vector<std::string>> DecodeRawBytesTensor(std::string_view raw,
                                                              const std::string& field);
// The inverse, for clients and tests.
std::string EncodeRawBytesTensor(const std::vector<std::string>& elements);

// Appends FP32 output `name` of `shape` holding `values` (row-major) to
// `response`: in raw_output_contents (little-endian) when `raw`, else in
// contents.fp32_contents. The protocol forbids mixing the two in one
// response, so every output of a response must use the same `raw`.
void AddFp32Output(const std::string& name, const std::vector<int64_t>& shape,
                   const std::vector<float>& values, bool raw,
                   inference::ModelInferResponse* response);

// The cost of a whole request, summed over its documents' task calls: one
// CostReport (for the metrics) and the response parameters density
// (edge-weighted mean), attention_gflops, total_gflops,
// dense_equivalent_gflops, input_tokens, budget_met (every call met it).
class KServeCostTotals {
 public:
  void Add(const v1::CostReport& cost);
  // Token, edge and FLOP fields summed; the attention kind and budget of the
  // first call; timings and per-layer figures left out.
  const v1::CostReport& summary() const { return summary_; }
  // The figures above as typed parameters, and the summary as JSON in the
  // string parameter "cost" (preserved field names), which every KServe
  // client reads.
  void WriteParameters(inference::ModelInferResponse* response) const;
  std::string CostJson() const;

 private:
  v1::CostReport summary_;
  bool empty_ = true;
  double dense_pairs_ = 0;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_KSERVE_REQUEST_H_
