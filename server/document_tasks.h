// The work behind each DocumentService RPC, free of gRPC. A task is prepared
// on the RPC thread (validate the request against the model and the server's
// limits, tokenize, choose the sequences to encode, price them and refuse
// the request if its price is over the server's per-request caps) into an
// EncodeJob for the model's batcher; when its batch has run, the job's
// completion post-processes (pooling, zero-shot scores, sentence selection),
// fills the response with its cost report and calls `complete`.
#ifndef DOCSPARSE_SERVER_DOCUMENT_TASKS_H_
#define DOCSPARSE_SERVER_DOCUMENT_TASKS_H_

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "docsparse/v1/docsparse.pb.h"
#include "server/abstractive_summary.h"
#include "server/batcher.h"
#include "server/model_registry.h"
#include "server/request_validation.h"
#include "server/shared_label_rows.h"

namespace docsparse {

// Called once with how the request ended; on OK the response is filled.
using Completion = std::function<void(const absl::Status& status)>;

// How one document of a multi-document request (KServe ModelInfer) shares
// the zero-shot labels' embeddings with the others: `embeds` in exactly one
// of them, whose job embeds the labels the cache misses and publishes the
// rows to `rows`; the others score against what it publishes. The default
// (no rows): the request's only document, embedding its own.
struct LabelSharing {
  std::shared_ptr<SharedLabelRows> rows;
  bool embeds = true;
};

class DocumentTasks {
 public:
  DocumentTasks(const ModelRegistry& registry, ServerLimits limits)
      : registry_(registry), limits_(limits) {}

  // Each returns the job to submit to the model's batcher (job->pending.key
  // names the model), or the request's error. `request` and `response` must
  // stay valid until `complete` has run.
  absl::StatusOr<std::unique_ptr<EncodeJob>> PrepareEmbed(const v1::EmbedRequest& request,
                                                          BatchClock::time_point received,
                                                          v1::EmbedResponse* response,
                                                          Completion complete) const;
  absl::StatusOr<std::unique_ptr<EncodeJob>> PrepareClassify(const v1::ClassifyRequest& request,
                                                             BatchClock::time_point received,
                                                             v1::ClassifyResponse* response,
                                                             Completion complete,
                                                             LabelSharing sharing = {}) const;
  // Extractive on encoder models; abstractive on summarizers, where
  // `on_token` (may be empty) streams the text as greedy search chooses
  // tokens.
  absl::StatusOr<std::unique_ptr<EncodeJob>> PrepareSummarize(const v1::SummarizeRequest& request,
                                                              BatchClock::time_point received,
                                                              v1::SummarizeResponse* response,
                                                              Completion complete,
                                                              TokenSink on_token = nullptr) const;

  void ListModels(v1::ListModelsResponse* response) const;

  const ServerLimits& limits() const { return limits_; }

 private:
  absl::StatusOr<std::unique_ptr<EncodeJob>> PrepareAbstractive(const ServedModel& model,
                                                                const v1::SummarizeRequest& request,
                                                                BatchClock::time_point received,
                                                                v1::SummarizeResponse* response,
                                                                Completion complete,
                                                                TokenSink on_token) const;

  const ModelRegistry& registry_;
  ServerLimits limits_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_DOCUMENT_TASKS_H_
