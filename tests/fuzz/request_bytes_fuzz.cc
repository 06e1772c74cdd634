// libFuzzer target for the gRPC requests' bytes and the server's request
// checks (server/request_validation): the input after its first byte is
// parsed as the docsparse.v1 message the byte picks ('E' EmbedRequest, 'C'
// ClassifyRequest, 'S' SummarizeRequest; others cycle through them); a
// request that parses goes through what DocumentTasks checks before it
// encodes anything: FindModelFor, CheckBudget, ValidateLabels, Prepare,
// the model's windows and PlanBudget. Each step gives OK or
// INVALID_ARGUMENT / RESOURCE_EXHAUSTED / NOT_FOUND whose message starts
// with the request field it is about ("budget.knobs.window: ...", "model
// 'x' not found ...") in at most 1 KiB (caller-supplied strings are echoed
// cut); what passes holds ids in the vocabulary, no more than the limits
// allow, and a plan whose price is finite. Regression cases live with the
// check that failed: tests/model/attention/planner_registry_test.cc for
// knobs (CheckRequestKnobs), tests/integration/request_fuzz_test.cc for a
// whole request (request_validation has no unit test of its own).
//
// The models are real and tiny, loaded once by the model registry from a
// folder of this process's own that links tests/fixtures' files: "tiny"
// (tiny_encoders/bert, dense, the default, every task) and "lsg" (lsg/bert,
// embed only), both with lsg_converter/bert's tokenizer. Loading them links
// the model rooms and LibTorch, as the server does.
//
// Not part of the CMake build (it needs clang): `scripts/fuzz [SECONDS]
// request_bytes` builds it (DOCSPARSE_SOURCE_DIR set to the repository)
// and runs it from tests/fuzz/request_bytes_seeds/, serialized requests
// written by tests/fuzz/make_seeds.py.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status_macros.h"
#include "docsparse/v1/docsparse.pb.h"
#include "server/model_registry.h"
#include "server/request_validation.h"

#ifndef DOCSPARSE_SOURCE_DIR
#error "build with -DDOCSPARSE_SOURCE_DIR=\"/path/to/repo\" (scripts/fuzz does)"
#endif

namespace {

namespace fs = std::filesystem;
using docsparse::Task;

docsparse::ModelRegistry* registry = nullptr;

// Small enough that fuzz inputs reach them.
docsparse::ServerLimits Limits() {
  docsparse::ServerLimits limits;
  limits.max_document_bytes = 1024;
  limits.max_document_tokens = 96;
  return limits;
}

void Link(const fs::path& from_dir, const char* file, const fs::path& to_dir) {
  fs::create_symlink(from_dir / file, to_dir / file);
}

// A model folder of fixture files and a docsparse.json.
void MakeModel(const fs::path& dir, const fs::path& checkpoint, const std::string& serving) {
  const fs::path fixtures = fs::path(DOCSPARSE_SOURCE_DIR) / "tests/fixtures";
  fs::create_directories(dir);
  Link(checkpoint, "config.json", dir);
  Link(checkpoint, "model.safetensors", dir);
  Link(fixtures / "lsg_converter/bert/input", "tokenizer.json", dir);
  std::ofstream(dir / "docsparse.json") << serving;
}

[[noreturn]] void Fail(const char* what, const absl::Status& status = absl::OkStatus()) {
  std::fprintf(stderr, "request_bytes_fuzz: %s: %s\n", what, status.ToString().c_str());
  std::abort();
}

// A refusal starts with the request field it is about ("budget.knobs.window:
// ...", "labels[3]: ...", "model 'x' not found ...") and fits a gRPC
// trailer: caller-supplied strings are echoed cut (common/quote.h).
void CheckRefusal(const absl::Status& status) {
  const absl::StatusCode code = status.code();
  if (code != absl::StatusCode::kInvalidArgument && code != absl::StatusCode::kResourceExhausted &&
      code != absl::StatusCode::kNotFound) {
    Fail("unexpected code", status);
  }
  const std::string message(status.message());
  if (message.size() > 1024) Fail("message too long", status);
  for (const std::string root : {"model", "document", "budget", "options", "labels"}) {
    if (message.rfind(root, 0) == 0 && message.size() > root.size() &&
        std::string_view(".[: ").find(message[root.size()]) != std::string_view::npos) {
      return;
    }
  }
  Fail("message does not start with a request field", status);
}

struct Request {
  Task task;
  const std::string* model;
  const docsparse::v1::Document* document;
  const docsparse::v1::SparsityBudget* budget;
  const docsparse::v1::RequestOptions* options;
  std::vector<std::string> labels;  // Classify only.
};

// What DocumentTasks checks before encoding, in its order.
absl::Status Validate(const Request& request) {
  ASSIGN_OR_RETURN(const docsparse::ServedModel* model,
                   docsparse::FindModelFor(*registry, *request.model, request.task));
  RETURN_IF_ERROR(docsparse::CheckBudget(*model, *request.budget));
  if (!request.labels.empty()) RETURN_IF_ERROR(docsparse::ValidateLabels(request.labels));
  // Extractive summaries read the whole document as it is.
  const docsparse::OverflowPolicy overflow =
      request.task == Task::kSummarize ? docsparse::OverflowPolicy::kReject
                                       : docsparse::ResolveOverflow(*request.options, *model);
  ASSIGN_OR_RETURN(docsparse::PreparedInput input,
                   docsparse::Prepare(*model, *request.document, Limits(), overflow));
  const int64_t limit =
      std::min<int64_t>(Limits().max_document_tokens, model->serving.max_document_tokens);
  if (input.ids.empty()) Fail("no ids");
  if (overflow != docsparse::OverflowPolicy::kTruncate &&
      static_cast<int64_t>(input.ids.size()) > limit) {
    Fail("more ids than the limit");
  }
  for (const int32_t id : input.ids) {
    if (id < 0 || id >= model->vocab_size()) Fail("id outside the vocabulary");
  }
  ASSIGN_OR_RETURN(docsparse::DocumentWindows windows, model->text->Windows(input.ids, overflow));
  ASSIGN_OR_RETURN(
      const docsparse::ItemAttentionOptions attention,
      docsparse::PlanBudget(*model, *request.budget, *request.options, windows.windows));
  const double flops = docsparse::PlannedAttentionFlops(*model, attention, windows.windows);
  if (!std::isfinite(flops) || flops < 0) Fail("planned FLOPs not finite");
  docsparse::v1::AttentionKnobs knobs;
  docsparse::FillAttentionKnobs(*model, attention, &knobs);
  return absl::OkStatus();
}

template <typename Message>
Request Common(Task task, const Message& message) {
  return Request{task, &message.model(), &message.document(), &message.budget(), &message.options(),
                 {}};
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Every string field with invalid UTF-8 fails to parse with an ERROR line;
  // a fuzzer makes thousands.
  google::protobuf::SetLogHandler(nullptr);
  const fs::path fixtures = fs::path(DOCSPARSE_SOURCE_DIR) / "tests/fixtures";
  const fs::path repository =
      fs::temp_directory_path() / ("docsparse-request-bytes-fuzz." + std::to_string(getpid()));
  fs::remove_all(repository);
  MakeModel(repository / "tiny", fixtures / "tiny_encoders/bert",
            R"({"default": true, "tasks": ["embed", "classify", "summarize"],
                "max_document_tokens": 64, "overflow": "chunk",
                "zero_shot": {"labels": [{"name": "law"}, {"name": "code"}]}})");
  MakeModel(repository / "lsg", fixtures / "lsg/bert",
            R"({"tasks": ["embed"], "overflow": "reject"})");
  auto loaded = docsparse::ModelRegistry::Load(repository.string());
  if (!loaded.ok() || !(*loaded)->failed().empty()) {
    std::fprintf(stderr, "request_bytes_fuzz: models did not load: %s\n",
                 loaded.ok() ? (*loaded)->failed().begin()->second.ToString().c_str()
                             : loaded.status().ToString().c_str());
    std::abort();
  }
  registry = loaded->release();
  fs::remove_all(repository);  // Everything is in memory now.
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool named = data[0] == 'E' || data[0] == 'C' || data[0] == 'S';
  const char kind = named ? static_cast<char>(data[0]) : "ECS"[data[0] % 3];
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  absl::Status status;
  if (kind == 'E') {
    docsparse::v1::EmbedRequest message;
    if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return 0;
    status = Validate(Common(Task::kEmbed, message));
  } else if (kind == 'C') {
    docsparse::v1::ClassifyRequest message;
    if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return 0;
    Request request = Common(Task::kClassify, message);
    request.labels.assign(message.labels().begin(), message.labels().end());
    status = Validate(request);
  } else {
    docsparse::v1::SummarizeRequest message;
    if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return 0;
    status = Validate(Common(Task::kSummarize, message));
  }
  if (!status.ok()) CheckRefusal(status);
  return 0;
}
