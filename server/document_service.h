// docsparse.v1.DocumentService on gRPC's callback API. Each RPC is prepared
// on the callback thread (validation, tokenization: DocumentTasks) and its
// encoder work queued on the model's batcher through the RequestRunner that
// the HTTP JSON API shares; the reactor finishes from the
// thread that ran the batch (the compute thread) with the response, its cost report also as
// trailing metadata (x-docsparse-*), and the request's metrics. Requests whose client left or whose
// deadline passed while queued are answered without compute. Every method
// is registered raw and parses its request itself, so bytes that are not the
// request message get INVALID_ARGUMENT (server/parsed_unary_call.h).
#ifndef DOCSPARSE_SERVER_DOCUMENT_SERVICE_H_
#define DOCSPARSE_SERVER_DOCUMENT_SERVICE_H_

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "docsparse/v1/docsparse.grpc.pb.h"
#include "server/metrics.h"
#include "server/parsed_unary_call.h"
#include "server/request_runner.h"

namespace docsparse {

// Every method raw: the bytes come to us unparsed.
using RawDocumentService = v1::DocumentService::WithRawCallbackMethod_Embed<
    v1::DocumentService::WithRawCallbackMethod_Classify<
        v1::DocumentService::WithRawCallbackMethod_Summarize<
            v1::DocumentService::WithRawCallbackMethod_SummarizeStream<
                v1::DocumentService::WithRawCallbackMethod_ListModels<
                    v1::DocumentService::Service>>>>>;

class DocumentService final : public RawDocumentService {
 public:
  // Borrows the runner, which must outlive the gRPC server. Until the
  // runner is ready, and again once draining, every RPC but ListModels
  // answers UNAVAILABLE; a SummarizeStream call holds one of its stream
  // slots while it runs.
  explicit DocumentService(RequestRunner& runner);

  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Classify(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Summarize(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* SummarizeStream(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;

 private:
  class SummaryStream;

  // Parses the request bytes, prepares the request with `prepare`, queues
  // its job, and responds when the job completes (or at once on an error).
  template <typename Request, typename Response, typename Prepare>
  grpc::ServerUnaryReactor* RunUnary(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request, grpc::ByteBuffer* response,
                                     MetricTask task, Prepare prepare);
  // Submits a prepared job bound to `context` (its deadline and whether its
  // client left); the status to finish with when it cannot be queued.
  absl::Status Submit(absl::StatusOr<std::unique_ptr<EncodeJob>> job,
                      grpc::CallbackServerContext* context);

  RequestRunner& runner_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_DOCUMENT_SERVICE_H_
