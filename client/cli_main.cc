// docsparse: command-line client of docsparse-server (usage in kUsage).
// This file is the flag and dispatch layer; the work is in client/.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/channel_credentials.h"
#include "client/docsparse_client.h"
#include "client/load_generator.h"
#include "client/mask_map_image.h"
#include "client/output_format.h"
#include "client/synthetic_document.h"

ABSL_FLAG(std::string, server, "localhost:50051", "docsparse-server address.");
ABSL_FLAG(std::string, model, "", "Model name (default: the server's default model).");
ABSL_FLAG(std::string, token, "",
          "Bearer token for a server run with --auth_token_file (default: $DOCSPARSE_TOKEN).");
ABSL_FLAG(bool, tls, false,
          "Connect with TLS, verifying the server against the system's CAs (implied by the "
          "--tls_* files).");
ABSL_FLAG(std::string, tls_ca_file, "",
          "PEM CA certificates the server's certificate must chain to.");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM client certificate, for a server run with --tls_client_ca_file (mutual TLS).");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file.");
ABSL_FLAG(bool, json, false, "Print one JSON object (the response, with its cost report).");
ABSL_FLAG(std::string, labels, "", "classify: comma-separated labels (default: the model's).");
ABSL_FLAG(std::string, overflow, "",
          "Documents longer than the model: reject | truncate | chunk (default: the model's).");
ABSL_FLAG(int, max_sentences, 0, "summarize: sentences to extract (default: the model's).");
ABSL_FLAG(double, max_density, 0, "Budget: maximum attention density in (0, 1].");
ABSL_FLAG(double, max_attention_gflops, 0, "Budget: maximum attention GFLOP.");
ABSL_FLAG(bool, strict, false, "Budget: fail instead of running over the cap.");
ABSL_FLAG(std::string, attention, "",
          "Budget: the planner to run instead of the model's (dense, lsg, sbm, longformer, "
          "bigbird, sparse_transformer, star, modernbert, etc, lsh, routing, union; `docsparse "
          "models` lists each "
          "model's).");
ABSL_FLAG(std::string, knobs, "",
          "Budget: the planner's knobs, name=value[,name=value...] (e.g. window=256).");
ABSL_FLAG(bool, stream, false,
          "summarize: use SummarizeStream (abstractive greedy summaries print as they are "
          "generated).");
ABSL_FLAG(int, beams, 0,
          "summarize, abstractive models: beam search width (1 = greedy; default: the model's "
          "generation_config.json).");
ABSL_FLAG(int, max_length, 0,
          "summarize, abstractive models: longest summary in tokens, the decoder start token "
          "included (default: the model's).");
ABSL_FLAG(double, timeout_s, 600, "Deadline of the call, seconds.");
ABSL_FLAG(std::string, mask_map, "",
          "embed/classify/summarize: ask for the attention mask density maps and draw them "
          "into this .svg or .png file.");
ABSL_FLAG(int, mask_map_resolution, 0, "Side of each mask map in cells (0: the server's, 64).");
// bench load
ABSL_FLAG(std::string, task, "embed", "bench load: embed | classify | summarize.");
ABSL_FLAG(int, concurrency, 1, "bench load: workers (requests in flight at most), 1..1024.");
ABSL_FLAG(double, rate, 0,
          "bench load: open loop at this many requests/s (0: closed loop, back-to-back).");
ABSL_FLAG(std::string, arrival, "poisson", "bench load --rate: poisson | fixed inter-arrivals.");
ABSL_FLAG(double, duration, 10, "bench load: seconds during which requests are started.");
ABSL_FLAG(int64_t, deadline_ms, 30000, "bench load: deadline of every request, ms.");
ABSL_FLAG(std::string, documents, "", "bench load: send every regular file under this folder.");
ABSL_FLAG(int, synthetic_tokens, 0,
          "bench load: send synthetic English documents of about this many tokens.");
ABSL_FLAG(int, synthetic_count, 16, "bench load: how many different synthetic documents.");
ABSL_FLAG(uint64_t, seed, 1, "bench load: seed of synthetic documents and Poisson arrivals.");

namespace docsparse {
namespace {

constexpr char kUsage[] =
    "docsparse [--server HOST:PORT] [--model NAME] [--json] [--token T]\n"
    "          [--tls | --tls_ca_file CA] [--tls_cert_file C --tls_key_file K] COMMAND\n"
    "  embed [FILE|-]\n"
    "  classify [--labels a,b,c] [FILE|-]\n"
    "  summarize [--max_sentences N] [--beams N] [--max-length N] [--stream] [FILE|-]\n"
    "  models\n"
    "  health\n"
    "  bench load [--task embed|classify|summarize] --concurrency C\n"
    "             [--rate R [--arrival poisson|fixed]] --duration S\n"
    "             (--documents DIR | --synthetic-tokens N [--synthetic-count K] [--seed S])\n"
    "             [--deadline_ms D]\n"
    "embed, classify and summarize also take --overflow reject|truncate|chunk, --attention NAME,\n"
    "--knobs name=value,..., --max_density,\n"
    "--max_attention_gflops, --strict, --timeout_s, and --mask-map OUT.svg|OUT.png\n"
    "[--mask-map-resolution N] (draws the server's attention mask density maps);\n"
    "bench load takes the same budget and overflow flags. FILE '-' is stdin.\n"
    "Flag names may be written with '-' or '_' (--synthetic-tokens = --synthetic_tokens).";

// Abseil flags are named with '_'; accept the '-' spelling of the same names
// by rewriting "--a-b[=v]" to "--a_b[=v]" (values and arguments after a bare
// "--" are left alone).
std::vector<std::string> NormalizeFlagNames(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.size() < 3 || arg[0] != '-') continue;
    const size_t begin = arg[1] == '-' ? 2 : 1;
    const size_t end = std::min(arg.find('='), arg.size());
    std::replace(arg.begin() + begin, arg.begin() + end, '-', '_');
  }
  return args;
}

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
  if (!absl::GetFlag(FLAGS_mask_map).empty()) {
    options.set_return_mask_map(true);
    options.set_mask_map_resolution(absl::GetFlag(FLAGS_mask_map_resolution));
  }
  return options;
}

absl::StatusOr<v1::SparsityBudget> Budget() {
  v1::SparsityBudget budget;
  const std::string attention = absl::GetFlag(FLAGS_attention);
  if (!attention.empty()) {
    v1::AttentionKind kind = v1::ATTENTION_KIND_UNSPECIFIED;
    if (!v1::AttentionKind_Parse("ATTENTION_KIND_" + absl::AsciiStrToUpper(attention), &kind)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--attention: unknown planner '", attention, "'"));
    }
    budget.set_attention(kind);
  }
  for (absl::string_view knob :
       absl::StrSplit(absl::GetFlag(FLAGS_knobs), ',', absl::SkipWhitespace())) {
    const std::vector<absl::string_view> parts = absl::StrSplit(knob, absl::MaxSplits('=', 1));
    double value = 0;
    if (parts.size() != 2 || parts[0].empty() || !absl::SimpleAtod(parts[1], &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--knobs: expected name=number, got '", knob, "'"));
    }
    (*budget.mutable_knobs())[std::string(parts[0])] = value;
  }
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
  if (!absl::GetFlag(FLAGS_mask_map).empty()) {
    absl::Status mask_map = CheckMaskMapPath(absl::GetFlag(FLAGS_mask_map));
    if (!mask_map.ok()) return mask_map;
  }
  absl::StatusOr<std::string> text = ReadInput(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<v1::RequestOptions> options = Options();
  if (!options.ok()) return options.status();
  request->set_model(absl::GetFlag(FLAGS_model));
  // Sent as bytes: the server checks the encoding and names the field.
  request->mutable_document()->set_utf8_bytes(*std::move(text));
  absl::StatusOr<v1::SparsityBudget> budget = Budget();
  if (!budget.ok()) return budget.status();
  *request->mutable_budget() = *std::move(budget);
  *request->mutable_options() = *options;
  return absl::OkStatus();
}

// --mask-map: draws the maps of `cost`; 0 on success, 1 (with a message) if
// there are none or the file cannot be written.
int WriteMaskMap(const std::string& model, const v1::CostReport& cost) {
  const std::string path = absl::GetFlag(FLAGS_mask_map);
  if (path.empty()) return 0;
  absl::Status written = WriteMaskMapPicture(path, model, cost);
  if (!written.ok()) {
    std::cerr << "docsparse: --mask-map: " << written.message() << "\n";
    return 1;
  }
  std::cerr << "docsparse: wrote the mask maps of " << cost.mask_maps_size() << " layer(s) to "
            << path << "\n";
  return 0;
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
  } else {
    std::cout << format(*response);
  }
  if constexpr (!std::is_same_v<Response, v1::ListModelsResponse>) {
    if (with_cost && !absl::GetFlag(FLAGS_json)) std::cout << FormatCostReport(response->cost());
    std::cout << std::flush;
    return WriteMaskMap(response->model(), response->cost());
  }
  return 0;
}

// `docsparse bench load`: the flags become LoadOptions; progress on stderr.
std::string TokenFromFlagOrEnvironment() {
  std::string token = absl::GetFlag(FLAGS_token);
  if (const char* from_env = std::getenv("DOCSPARSE_TOKEN"); token.empty() && from_env != nullptr) {
    token = from_env;
  }
  return token;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> CredentialsFromFlags() {
  ClientTlsFiles files;
  files.enabled = absl::GetFlag(FLAGS_tls);
  files.ca_file = absl::GetFlag(FLAGS_tls_ca_file);
  files.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  files.key_file = absl::GetFlag(FLAGS_tls_key_file);
  return ChannelCredentialsFor(files);
}

int BenchLoad() {
  LoadOptions options;
  options.server = absl::GetFlag(FLAGS_server);
  options.bearer_token = TokenFromFlagOrEnvironment();
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = CredentialsFromFlags();
  if (!credentials.ok()) {
    std::cerr << "docsparse: " << credentials.status().message() << "\n";
    return 2;
  }
  options.credentials = *std::move(credentials);
  options.model = absl::GetFlag(FLAGS_model);
  absl::StatusOr<LoadTask> task = ParseLoadTask(absl::GetFlag(FLAGS_task));
  absl::StatusOr<v1::RequestOptions> request_options = Options();
  absl::Status invalid = !task.ok() ? task.status() : request_options.status();
  const std::string arrival = absl::GetFlag(FLAGS_arrival);
  if (invalid.ok() && arrival != "poisson" && arrival != "fixed") {
    invalid = absl::InvalidArgumentError("--arrival: expected poisson or fixed");
  }
  const std::string folder = absl::GetFlag(FLAGS_documents);
  const int synthetic = absl::GetFlag(FLAGS_synthetic_tokens);
  if (invalid.ok() && folder.empty() == (synthetic <= 0)) {
    invalid = absl::InvalidArgumentError("give one of --documents DIR or --synthetic-tokens N");
  }
  if (invalid.ok() && !absl::GetFlag(FLAGS_mask_map).empty()) {
    invalid = absl::InvalidArgumentError("--mask-map does not apply to bench load");
  }
  absl::StatusOr<v1::SparsityBudget> budget = Budget();
  if (invalid.ok() && !budget.ok()) invalid = budget.status();
  if (!invalid.ok()) {
    std::cerr << "docsparse: " << invalid.message() << "\n";
    return 2;
  }
  options.task = *task;
  options.request_options = *request_options;
  options.budget = *std::move(budget);
  options.concurrency = absl::GetFlag(FLAGS_concurrency);
  options.rate = absl::GetFlag(FLAGS_rate);
  options.arrivals = arrival == "fixed" ? ArrivalProcess::kFixed : ArrivalProcess::kPoisson;
  options.duration = absl::Seconds(absl::GetFlag(FLAGS_duration));
  options.deadline = absl::Milliseconds(absl::GetFlag(FLAGS_deadline_ms));
  options.seed = absl::GetFlag(FLAGS_seed);
  for (absl::string_view label :
       absl::StrSplit(absl::GetFlag(FLAGS_labels), ',', absl::SkipWhitespace())) {
    options.labels.emplace_back(label);
  }
  options.max_sentences = absl::GetFlag(FLAGS_max_sentences);
  if (!folder.empty()) {
    absl::StatusOr<std::vector<std::string>> documents = ReadDocuments(folder);
    if (!documents.ok()) {
      std::cerr << "docsparse: " << documents.status().message() << "\n";
      return 1;
    }
    options.documents = *std::move(documents);
    options.documents_description =
        absl::StrCat(options.documents.size(), " file(s) from ", folder);
  } else {
    const int count = std::clamp(absl::GetFlag(FLAGS_synthetic_count), 1, 1024);
    options.documents = SyntheticDocuments(synthetic, count, options.seed);
    options.documents_description =
        absl::StrCat(count, " synthetic of ~", synthetic, " tokens (seed ", options.seed, ")");
  }
  size_t progress_width = 0;
  options.on_progress = [&progress_width](const LoadProgress& progress) {
    std::string line = FormatLoadProgress(progress);
    progress_width = std::max(progress_width, line.size());
    line.resize(progress_width, ' ');  // erase the rest of a longer previous line
    std::cerr << "\r" << line << std::flush;
  };
  absl::StatusOr<std::unique_ptr<LoadGenerator>> generator =
      LoadGenerator::Create(std::move(options));
  if (!generator.ok()) {
    std::cerr << "docsparse: " << generator.status().message() << "\n";
    return generator.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  absl::StatusOr<LoadReport> report = (*generator)->Run();
  if (progress_width > 0) std::cerr << "\n";
  if (!report.ok()) {
    std::cerr << "docsparse: " << report.status().message() << "\n";
    return 1;
  }
  std::cout << (absl::GetFlag(FLAGS_json) ? LoadReportToJson(*report) + "\n"
                                          : FormatLoadReport(*report));
  return 0;
}

int Run(const std::vector<char*>& args) {
  if (args.size() < 2) {
    std::cerr << "usage: " << kUsage << "\n";
    return 2;
  }
  const std::string command = args[1];
  const std::string path = args.size() > 2 ? args[2] : "-";
  if (command == "bench") {
    if (args.size() != 3 || path != "load") {
      std::cerr << "docsparse: expected 'bench load'\nusage: " << kUsage << "\n";
      return 2;
    }
    return BenchLoad();
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = CredentialsFromFlags();
  if (!credentials.ok()) {
    std::cerr << "docsparse: " << credentials.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<DocsparseClient>> client =
      DocsparseClient::Connect(absl::GetFlag(FLAGS_server), absl::Seconds(10),
                               TokenFromFlagOrEnvironment(), *std::move(credentials));
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
      // Only what was asked: unset fields keep the model's defaults, and an
      // extractive model refuses generation parameters.
      if (absl::GetFlag(FLAGS_beams) > 0) {
        request.mutable_generation()->set_num_beams(absl::GetFlag(FLAGS_beams));
      }
      if (absl::GetFlag(FLAGS_max_length) > 0) {
        request.mutable_generation()->set_max_length(absl::GetFlag(FLAGS_max_length));
      }
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
      std::cout << (absl::GetFlag(FLAGS_json) ? ToJson(*last) + "\n"
                                              : "\n" + FormatCostReport(last->cost()))
                << std::flush;
      return WriteMaskMap(request.model(), last->cost());
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
  std::vector<std::string> args = docsparse::NormalizeFlagNames(argc, argv);
  std::vector<char*> pointers;
  for (std::string& arg : args) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  return docsparse::Run(absl::ParseCommandLine(argc, pointers.data()));
}
