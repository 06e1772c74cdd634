// The work behind each DocumentService RPC, free of gRPC: validate the
// request against the model and the server's limits, run the model, and fill
// the response with its cost report. Called on inference threads.
#ifndef DOCSPARSE_SERVER_DOCUMENT_TASKS_H_
#define DOCSPARSE_SERVER_DOCUMENT_TASKS_H_

#include <chrono>
#include <cstdint>

#include "absl/status/status.h"
#include "docsparse/v1/docsparse.pb.h"
#include "server/model_registry.h"

namespace docsparse {

// Hard limits of this server, whatever the model allows.
struct ServerLimits {
  int64_t max_document_bytes = 8 << 20;
  int64_t max_document_tokens = 1 << 17;
};

// When a request arrived and when its work started, for the timings.
struct RequestClock {
  std::chrono::steady_clock::time_point received;
  std::chrono::steady_clock::time_point started;
};

class DocumentTasks {
 public:
  DocumentTasks(const ModelRegistry& registry, ServerLimits limits)
      : registry_(registry), limits_(limits) {}

  absl::Status Embed(const v1::EmbedRequest& request, const RequestClock& clock,
                     v1::EmbedResponse* response) const;
  absl::Status Classify(const v1::ClassifyRequest& request, const RequestClock& clock,
                        v1::ClassifyResponse* response) const;
  absl::Status Summarize(const v1::SummarizeRequest& request, const RequestClock& clock,
                         v1::SummarizeResponse* response) const;
  void ListModels(v1::ListModelsResponse* response) const;

 private:
  const ModelRegistry& registry_;
  ServerLimits limits_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_DOCUMENT_TASKS_H_
