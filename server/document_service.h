// docsparse.v1.DocumentService on gRPC's callback API. Each RPC is prepared
// on the callback thread (validation, tokenization: DocumentTasks) and its
// encoder work queued on the model's batcher through the RequestRunner that
// the HTTP JSON API shares; the reactor finishes from the
// thread that ran the batch (the compute thread) with the response, its cost report also as
// trailing metadata (x-docsparse-*), and the request's metrics. Requests whose client left or whose
// deadline passed while queued are answered without compute.
#ifndef DOCSPARSE_SERVER_DOCUMENT_SERVICE_H_
#define DOCSPARSE_SERVER_DOCUMENT_SERVICE_H_

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "docsparse/v1/docsparse.grpc.pb.h"
#include "server/metrics.h"
#include "server/request_runner.h"

namespace docsparse {

class DocumentService final : public v1::DocumentService::CallbackService {
 public:
  // Borrows the runner, which must outlive the gRPC server. Until the
  // runner is ready, and again once draining, every RPC but ListModels
  // answers UNAVAILABLE; a SummarizeStream call holds one of its stream
  // slots while it runs.
  explicit DocumentService(RequestRunner& runner);

  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* context,
                                  const v1::EmbedRequest* request,
                                  v1::EmbedResponse* response) override;
  grpc::ServerUnaryReactor* Classify(grpc::CallbackServerContext* context,
                                     const v1::ClassifyRequest* request,
                                     v1::ClassifyResponse* response) override;
  grpc::ServerUnaryReactor* Summarize(grpc::CallbackServerContext* context,
                                      const v1::SummarizeRequest* request,
                                      v1::SummarizeResponse* response) override;
  grpc::ServerWriteReactor<v1::SummarizeChunk>* SummarizeStream(
      grpc::CallbackServerContext* context, const v1::SummarizeRequest* request) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;

 private:
  class SummaryStream;

  // Prepares the request with `prepare`, queues its job, and finishes the
  // unary reactor when the job completes (or at once on an error).
  template <typename Request, typename Response, typename Prepare>
  grpc::ServerUnaryReactor* RunUnary(grpc::CallbackServerContext* context, const Request* request,
                                     Response* response, MetricTask task, Prepare prepare);
  // Submits a prepared job bound to `context` (its deadline and whether its
  // client left); the status to finish with when it cannot be queued.
  absl::Status Submit(absl::StatusOr<std::unique_ptr<EncodeJob>> job,
                      grpc::CallbackServerContext* context);

  RequestRunner& runner_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_DOCUMENT_SERVICE_H_
