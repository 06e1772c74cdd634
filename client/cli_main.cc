// docsparse: command-line client of docsparse-server.
//
//   docsparse [--server HOST:PORT] [--model NAME] [--json] COMMAND [FILE|-]
//   COMMAND: embed | classify --labels a,b,c | summarize | models | health
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "client/docsparse_client.h"
#include "client/output_format.h"

ABSL_FLAG(std::string, server, "localhost:50051", "docsparse-server address.");
ABSL_FLAG(std::string, model, "", "Model name (default: the server's default model).");
ABSL_FLAG(bool, json, false, "Print one JSON object (the response, with its cost report).");
ABSL_FLAG(std::string, labels, "", "classify: comma-separated labels (default: the model's).");
ABSL_FLAG(std::string, overflow, "",
          "Documents longer than the model: reject | truncate | chunk (default: the model's).");
ABSL_FLAG(int, max_sentences, 0, "summarize: sentences to extract (default: the model's).");
ABSL_FLAG(double, max_density, 0, "Budget: maximum attention density in (0, 1].");
ABSL_FLAG(double, max_attention_gflops, 0, "Budget: maximum attention GFLOP.");
ABSL_FLAG(bool, strict, false, "Budget: fail instead of running over the cap.");
ABSL_FLAG(bool, stream, false, "summarize: use SummarizeStream.");
ABSL_FLAG(double, timeout_s, 600, "Deadline of the call, seconds.");

namespace docsparse {
namespace {

constexpr char kUsage[] =
    "docsparse [--server HOST:PORT] [--model NAME] [--json] "
    "<embed|classify --labels a,b,c|summarize|models|health> [FILE|-]";

absl::StatusOr<std::string> ReadInput(const std::string& path) {
  if (path.empty() || path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), {});
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

absl::StatusOr<v1::RequestOptions> Options() {
  v1::RequestOptions options;
  const std::string overflow = absl::GetFlag(FLAGS_overflow);
  if (overflow == "reject") {
    options.set_overflow(v1::OVERFLOW_REJECT);
  } else if (overflow == "truncate") {
    options.set_overflow(v1::OVERFLOW_TRUNCATE);
  } else if (overflow == "chunk") {
    options.set_overflow(v1::OVERFLOW_CHUNK);
  } else if (!overflow.empty()) {
    return absl::InvalidArgumentError("--overflow: expected reject, truncate or chunk");
  }
  return options;
}

v1::SparsityBudget Budget() {
  v1::SparsityBudget budget;
  if (absl::GetFlag(FLAGS_max_density) > 0) {
    budget.set_max_density(absl::GetFlag(FLAGS_max_density));
  }
  if (absl::GetFlag(FLAGS_max_attention_gflops) > 0) {
    budget.set_max_attention_gflops(absl::GetFlag(FLAGS_max_attention_gflops));
  }
  budget.set_strict(absl::GetFlag(FLAGS_strict));
  return budget;
}

// Fills the fields every document request shares.
template <typename Request>
absl::Status FillCommon(const std::string& path, Request* request) {
  absl::StatusOr<std::string> text = ReadInput(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<v1::RequestOptions> options = Options();
  if (!options.ok()) return options.status();
  request->set_model(absl::GetFlag(FLAGS_model));
  // Sent as bytes: the server checks the encoding and names the field.
  request->mutable_document()->set_utf8_bytes(*std::move(text));
  *request->mutable_budget() = Budget();
  *request->mutable_options() = *options;
  return absl::OkStatus();
}

template <typename Response>
int Print(const absl::StatusOr<Response>& response, std::string (*format)(const Response&),
          bool with_cost) {
  if (!response.ok()) {
    std::cerr << "docsparse: " << absl::StatusCodeToString(response.status().code()) << ": "
              << response.status().message() << "\n";
    return 1;
  }
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ToJson(*response) << "\n";
    return 0;
  }
  std::cout << format(*response);
  if constexpr (!std::is_same_v<Response, v1::ListModelsResponse>) {
    if (with_cost) std::cout << FormatCostReport(response->cost());
  }
  return 0;
}

int Run(const std::vector<char*>& args) {
  if (args.size() < 2) {
    std::cerr << "usage: " << kUsage << "\n";
    return 2;
  }
  const std::string command = args[1];
  const std::string path = args.size() > 2 ? args[2] : "-";
  absl::StatusOr<std::unique_ptr<DocsparseClient>> client =
      DocsparseClient::Connect(absl::GetFlag(FLAGS_server));
  if (!client.ok()) {
    std::cerr << "docsparse: " << client.status().message() << "\n";
    return 1;
  }
  const absl::Duration timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  absl::Status filled = absl::OkStatus();
  if (command == "embed") {
    v1::EmbedRequest request;
    if ((filled = FillCommon(path, &request)).ok()) {
      return Print((*client)->Embed(request, timeout), &FormatEmbedding, true);
    }
  } else if (command == "classify") {
    v1::ClassifyRequest request;
    if ((filled = FillCommon(path, &request)).ok()) {
      for (absl::string_view label :
           absl::StrSplit(absl::GetFlag(FLAGS_labels), ',', absl::SkipWhitespace())) {
        request.add_labels(std::string(label));
      }
      return Print((*client)->Classify(request, timeout), &FormatClassification, true);
    }
  } else if (command == "summarize") {
    v1::SummarizeRequest request;
    if ((filled = FillCommon(path, &request)).ok()) {
      request.mutable_extractive()->set_max_sentences(absl::GetFlag(FLAGS_max_sentences));
      if (!absl::GetFlag(FLAGS_stream)) {
        return Print((*client)->Summarize(request, timeout), &FormatSummary, true);
      }
      absl::StatusOr<v1::SummarizeChunk> last = (*client)->SummarizeStream(
          request,
          [](const v1::SummarizeChunk& chunk) {
            if (!absl::GetFlag(FLAGS_json)) std::cout << chunk.text() << std::flush;
          },
          timeout);
      if (!last.ok()) {
        std::cerr << "docsparse: " << last.status().message() << "\n";
        return 1;
      }
      std::cout << (absl::GetFlag(FLAGS_json) ? ToJson(*last)
                                              : "\n" + FormatCostReport(last->cost()));
      return 0;
    }
  } else if (command == "models") {
    return Print((*client)->ListModels(timeout), &FormatModels, false);
  } else if (command == "health") {
    auto status = (*client)->Health("");
    if (!status.ok()) {
      std::cerr << "docsparse: " << status.status().message() << "\n";
      return 1;
    }
    std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(*status) << "\n";
    return *status == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
  } else {
    std::cerr << "docsparse: unknown command '" << command << "'\nusage: " << kUsage << "\n";
    return 2;
  }
  std::cerr << "docsparse: " << filled.message() << "\n";
  return 1;
}

}  // namespace
}  // namespace docsparse

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(docsparse::kUsage);
  return docsparse::Run(absl::ParseCommandLine(argc, argv));
}
