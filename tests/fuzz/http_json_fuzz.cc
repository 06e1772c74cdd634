// libFuzzer target for the HTTP API's request readers (server/http_json):
// any body must either be refused INVALID_ARGUMENT with a message that names
// a field ("field: problem") or be read into the v1 request parts; nothing
// may crash, hang or read out of bounds.
//
// Not part of the CMake build (it needs clang): `scripts/fuzz [SECONDS]` builds
// and runs every target from its seeds in tests/fuzz/*_seeds/. By hand, after
// scripts/build (for the generated proto sources):
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined \
//     -I. -Ibuild/proto tests/fuzz/http_json_fuzz.cc server/http_json.cc \
//     build/proto/docsparse/v1/docsparse.pb.cc \
//     $(pkg-config --libs protobuf absl_status absl_statusor absl_strings) \
//     -o /tmp/http_json_fuzz
//   mkdir -p /tmp/http_json_corpus && cp tests/fuzz/http_json_seeds/* /tmp/http_json_corpus/
//   /tmp/http_json_fuzz -max_len=4096 -max_total_time=300 /tmp/http_json_corpus
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/http_json.h"

namespace {

// A refusal names its field: "name: ...", the name without spaces.
void CheckRefusal(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) std::abort();
  const std::string message(status.message());
  const size_t colon = message.find(": ");
  if (colon == std::string::npos || colon == 0 ||
      message.substr(0, colon).find(' ') != std::string::npos) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace docsparse::http;
  const std::string body(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Json> json = ParseBody(body);
  if (!json.ok()) {
    CheckRefusal(json.status());
    return 0;
  }
  if (!json->is_object()) std::abort();
  absl::StatusOr<CommonFields> common = ReadCommon(*json);
  if (!common.ok()) CheckRefusal(common.status());
  for (const char* field : {"inputs", "input", "labels"}) {
    absl::StatusOr<std::vector<std::string>> texts = ReadTexts(*json, field, 32);
    if (!texts.ok()) {
      CheckRefusal(texts.status());
    } else if (texts->empty() || texts->size() > 32) {
      std::abort();
    }
  }
  if (auto value = ReadBool(*json, "normalize"); !value.ok()) CheckRefusal(value.status());
  if (auto value = ReadNumber(*json, "temperature"); !value.ok()) CheckRefusal(value.status());
  if (auto value = ReadInteger(*json, "dimensions"); !value.ok()) CheckRefusal(value.status());
  if (auto value = ReadString(*json, "encoding_format"); !value.ok()) CheckRefusal(value.status());
  return 0;
}
