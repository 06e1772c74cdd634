// docsparse.v1.DocumentService on gRPC's callback API. Each RPC is validated
// and queued on the InferencePool; the reactor finishes from the worker
// thread. Requests whose client left or whose deadline passed while queued
// are answered without running the model.
#ifndef DOCSPARSE_SERVER_DOCUMENT_SERVICE_H_
#define DOCSPARSE_SERVER_DOCUMENT_SERVICE_H_

#include <atomic>

#include "docsparse/v1/docsparse.grpc.pb.h"
#include "server/document_tasks.h"
#include "server/inference_pool.h"
#include "server/metrics.h"
#include "server/model_registry.h"

namespace docsparse {

class DocumentService final : public v1::DocumentService::CallbackService {
 public:
  // Borrows everything; all must outlive the gRPC server.
  DocumentService(const ModelRegistry& registry, const DocumentTasks& tasks, InferencePool& pool,
                  Metrics& metrics)
      : registry_(registry), tasks_(tasks), pool_(pool), metrics_(metrics) {}

  // Until set, every RPC but ListModels answers UNAVAILABLE.
  void SetReady(bool ready) { ready_.store(ready); }
  bool ready() const { return ready_.load(); }

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

  // Runs `work(clock)` on the pool and finishes `reactor` with its status.
  template <typename Work>
  grpc::ServerUnaryReactor* RunUnary(grpc::CallbackServerContext* context, const std::string& model,
                                     const char* task, Work work);
  // Status for a request about to run: OK, or why it should not.
  grpc::Status Admit(grpc::CallbackServerContext* context) const;
  // The model label for metrics: the resolved name, or "unknown".
  std::string ModelLabel(const std::string& requested) const;

  const ModelRegistry& registry_;
  const DocumentTasks& tasks_;
  InferencePool& pool_;
  Metrics& metrics_;
  std::atomic<bool> ready_{false};
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_DOCUMENT_SERVICE_H_
