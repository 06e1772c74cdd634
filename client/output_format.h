// Human-readable renderings of docsparse responses for the CLI, and their
// JSON form (proto3 JSON mapping, field names as in the .proto).
#ifndef DOCSPARSE_CLIENT_OUTPUT_FORMAT_H_
#define DOCSPARSE_CLIENT_OUTPUT_FORMAT_H_

#include <string>

#include "docsparse/v1/docsparse.pb.h"
#include "google/protobuf/message.h"

namespace docsparse {

std::string FormatCostReport(const v1::CostReport& cost);
std::string FormatEmbedding(const v1::EmbedResponse& response);
std::string FormatClassification(const v1::ClassifyResponse& response);
std::string FormatSummary(const v1::SummarizeResponse& response);
std::string FormatModels(const v1::ListModelsResponse& response);

// One-line JSON of any response.
std::string ToJson(const google::protobuf::Message& message);

// "12.3 GFLOP", "456 MFLOP", ...
std::string FormatFlops(double flops);

}  // namespace docsparse

#endif  // DOCSPARSE_CLIENT_OUTPUT_FORMAT_H_
