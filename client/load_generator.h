// LoadGenerator: drives docsparse-server with concurrent requests for a fixed
// time and measures what came back (`docsparse bench load`).
//
// Closed loop (rate == 0): `concurrency` workers each send the next document
// as soon as their previous answer arrived. Open loop (rate > 0): arrivals at
// `rate` per second (Poisson or evenly spaced) are handed to an idle worker;
// when all `concurrency` workers are busy the arrival is shed (counted, never
// sent), so the client never queues and the offered load stays honest.
//
// Bounded: no request starts after `duration`; requests then in flight run
// to their answer or their deadline, so a run lasts at most duration +
// deadline (+ connection setup). Only the one `server` address is contacted.
#ifndef DOCSPARSE_CLIENT_LOAD_GENERATOR_H_
#define DOCSPARSE_CLIENT_LOAD_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/docsparse_client.h"
#include "client/load_report.h"
#include "docsparse/v1/docsparse.pb.h"

namespace docsparse {

enum class LoadTask { kEmbed, kClassify, kSummarize };
enum class ArrivalProcess { kPoisson, kFixed };

// "embed" | "classify" | "summarize".
absl::StatusOr<LoadTask> ParseLoadTask(const std::string& name);
std::string LoadTaskName(LoadTask task);

struct LoadOptions {
  std::string server = "localhost:50051";
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // null: plain text
  std::string bearer_token;                               // empty: none
  std::string model;                                      // empty: the server's default model
  LoadTask task = LoadTask::kEmbed;
  int concurrency = 1;  // workers, 1..1024
  // Requests per second offered (open loop); 0 for a closed loop.
  double rate = 0;
  ArrivalProcess arrivals = ArrivalProcess::kPoisson;
  absl::Duration duration = absl::Seconds(10);
  // Deadline of every request.
  absl::Duration deadline = absl::Seconds(30);
  // Sent round-robin as document.utf8_bytes; at least one.
  std::vector<std::string> documents;
  // Shown in the report ("16 synthetic (~512 tokens)").
  std::string documents_description;
  // Copied into every request.
  v1::SparsityBudget budget;
  v1::RequestOptions request_options;
  std::vector<std::string> labels;  // classify
  int max_sentences = 0;            // summarize (0: the model's default)
  // Seeds the arrival times.
  uint64_t seed = 1;
  absl::Duration connect_timeout = absl::Seconds(10);
  // Called from Run()'s thread about every `progress_interval` while the run
  // lasts; may be empty.
  std::function<void(const LoadProgress&)> on_progress;
  absl::Duration progress_interval = absl::Seconds(1);
};

class LoadGenerator {
 public:
  // Checks `options` (INVALID_ARGUMENT naming the field) and connects
  // (UNAVAILABLE when the server cannot be reached in connect_timeout).
  static absl::StatusOr<std::unique_ptr<LoadGenerator>> Create(LoadOptions options);

  // Runs the load and returns the figures; blocks for about the duration.
  // Request failures are counted in the report, not returned. One Run() at a
  // time.
  absl::StatusOr<LoadReport> Run();

 private:
  class RunState;
  LoadGenerator(LoadOptions options, std::unique_ptr<DocsparseClient> client);

  // Sends document `index` and times it; the status is the server's.
  absl::StatusOr<RequestSample> Send(size_t index) const;

  // options_.documents is emptied once the requests below hold them.
  LoadOptions options_;
  size_t num_documents_ = 0;
  const std::unique_ptr<DocsparseClient> client_;
  // One request per document of the task, built once: workers only send.
  std::vector<v1::EmbedRequest> embed_;
  std::vector<v1::ClassifyRequest> classify_;
  std::vector<v1::SummarizeRequest> summarize_;
};

// Every regular file under `directory` (recursively, in path order), read
// whole. NOT_FOUND if the folder is missing, INVALID_ARGUMENT if it holds no
// non-empty file. Empty files are skipped: they can only be rejected.
absl::StatusOr<std::vector<std::string>> ReadDocuments(const std::string& directory);

}  // namespace docsparse

#endif  // DOCSPARSE_CLIENT_LOAD_GENERATOR_H_
