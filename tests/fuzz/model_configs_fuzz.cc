// libFuzzer target for the strict config readers: Hugging Face config.json of
// an encoder (ParseEncoderConfig) and of BART/Pegasus (ParseBartConfig),
// docsparse.json (ParseServingConfig), and generation_config.json over its
// model's config.json (ParseGenerationConfig). The first byte picks the
// reader ('E', 'B', 'S', 'G'; others cycle through them); the rest is the
// file (for 'G': config.json, a NUL, generation_config.json). Whatever JSON
// parses must give a config or INVALID_ARGUMENT naming its source, never a
// crash, a hang or another status. Regression cases live in
// tests/model/checkpoint/config_fuzz_test.cc.
//
// Not part of the CMake build (it needs clang): `scripts/fuzz [SECONDS]
// model_configs` builds and runs it from tests/fuzz/model_configs_seeds/
// (made from tests/fixtures' and models/' config files with the selector
// byte in front).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "model/checkpoint/bart_config.h"
#include "model/checkpoint/generation_config.h"
#include "model/checkpoint/hf_config.h"
#include "model/checkpoint/serving_config.h"
#include "nlohmann/json.hpp"

namespace {

nlohmann::json ParseOrDiscard(const std::string& text) {
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// A refusal must be INVALID_ARGUMENT and say which file it is about.
void CheckRefusal(const absl::Status& status, const std::string& source) {
  if (status.ok()) return;
  if (status.code() != absl::StatusCode::kInvalidArgument) std::abort();
  if (std::string(status.message()).find(source) == std::string::npos) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool named = data[0] == 'E' || data[0] == 'B' || data[0] == 'S' || data[0] == 'G';
  const char kind = named ? static_cast<char>(data[0]) : "EBSG"[data[0] % 4];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (kind == 'G') {
    const size_t split = text.find('\0');
    const nlohmann::json model = ParseOrDiscard(text.substr(0, split));
    if (model.is_discarded()) return 0;
    nlohmann::json generation;
    if (split != std::string::npos) {
      generation = ParseOrDiscard(text.substr(split + 1));
      if (generation.is_discarded()) return 0;
    }
    const auto config =
        docsparse::ParseGenerationConfig(model, split == std::string::npos ? nullptr : &generation);
    if (!config.ok() && config.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    if (!config.ok() && config.status().message().empty()) std::abort();
    return 0;
  }
  const nlohmann::json json = ParseOrDiscard(text);
  if (json.is_discarded()) return 0;
  if (kind == 'E') {
    CheckRefusal(docsparse::ParseEncoderConfig(json, "fuzz/config.json").status(),
                 "fuzz/config.json");
  } else if (kind == 'B') {
    CheckRefusal(docsparse::ParseBartConfig(json, "fuzz/config.json").status(), "fuzz/config.json");
  } else {
    CheckRefusal(docsparse::ParseServingConfig(json, "fuzz/docsparse.json").status(),
                 "fuzz/docsparse.json");
  }
  return 0;
}
