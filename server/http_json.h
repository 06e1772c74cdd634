// JSON request bodies of the HTTP API read into the v1 messages, and the v1
// results written back: the field-by-field checks (every error names its
// field, as the gRPC API's do) and the cost report in the proto's JSON form
// (snake_case names, enums by name), so the JSON and gRPC reports agree.
#ifndef DOCSPARSE_SERVER_HTTP_JSON_H_
#define DOCSPARSE_SERVER_HTTP_JSON_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "docsparse/v1/docsparse.pb.h"

namespace docsparse::http {

using Json = nlohmann::json;

// INVALID_ARGUMENT "`field`: `problem`".
absl::Status FieldError(absl::string_view field, absl::string_view problem);

// A client's text quoted for an error message: a JSON string, escaped, so
// what a client sent can neither break the message's "field: problem" form
// nor forge a log line (found by tests/fuzz/http_json_fuzz.cc).
std::string Quoted(absl::string_view text);

// The body as a JSON object; INVALID_ARGUMENT "body: ..." otherwise.
absl::StatusOr<Json> ParseBody(const std::string& body);

// body[field] as documents: a string, or a non-empty array of at most
// `max_inputs` strings. Absent: INVALID_ARGUMENT naming it.
absl::StatusOr<std::vector<std::string>> ReadTexts(const Json& body, const char* field,
                                                   size_t max_inputs);

// Optional scalar fields; absent or null gives nullopt, a wrong type
// INVALID_ARGUMENT naming the field.
absl::StatusOr<std::optional<bool>> ReadBool(const Json& body, const char* field);
absl::StatusOr<std::optional<double>> ReadNumber(const Json& body, const char* field);
absl::StatusOr<std::optional<int64_t>> ReadInteger(const Json& body, const char* field);
absl::StatusOr<std::optional<std::string>> ReadString(const Json& body, const char* field);

// The fields every task shares, in the request parts of the v1 messages:
//   model            string, "" = the server's default model
//   budget           object: max_density | max_attention_gflops |
//                    edge_regularization, attention ("lsg", "sbm", ... or the
//                    proto's ATTENTION_KIND_* name), seed, strict
//   return_mask_map  bool
//   truncate         bool (TEI's): true keeps the first positions
//   overflow         "reject" | "truncate" | "chunk" (over `truncate`)
//   request_id       string
struct CommonFields {
  std::string model;
  v1::SparsityBudget budget;
  v1::RequestOptions options;
};
absl::StatusOr<CommonFields> ReadCommon(const Json& body);

// The cost report as JSON: the proto's JSON mapping with its field names.
Json CostJson(const v1::CostReport& cost);

// A v1 enum value's short name: ATTENTION_KIND_LSG -> "lsg".
std::string AttentionName(v1::AttentionKind kind);

// A message from DocumentTasks about `document...` retold about the HTTP
// field that carried the document (`inputs`, `input[2]`).
absl::Status RenameDocumentField(const absl::Status& status, absl::string_view field);

}  // namespace docsparse::http

#endif  // DOCSPARSE_SERVER_HTTP_JSON_H_
