// inference.GRPCInferenceService (KServe v2 / Open Inference Protocol) over
// the same models and work as DocumentService, so Triton and KServe clients
// can embed and classify documents. The tensor contract is in
// server/kserve_request.h. ModelInfer prepares one DocumentTasks job per
// document and output (exactly what DocumentService.Embed / Classify would
// run, so the results are the same) and submits them all to the model's
// batcher, where they batch with each other and with other requests; the
// last job to complete builds the response and finishes the RPC.
//
// Models have one version, "1"; an empty version means it. Metadata and
// liveness RPCs answer on gRPC's threads; ModelInfer answers UNAVAILABLE
// until SetReady(true), like DocumentService.
#ifndef DOCSPARSE_SERVER_KSERVE_SERVICE_H_
#define DOCSPARSE_SERVER_KSERVE_SERVICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "server/metrics.h"
#include "server/model_registry.h"
#include "server/request_runner.h"

namespace docsparse {

class KServeService final : public inference::GRPCInferenceService::CallbackService {
 public:
  // Borrows both; they must outlive the gRPC server. Requests run through
  // the runner DocumentService and the HTTP API share; ServerReady /
  // ModelReady report its readiness, and ModelInfer is UNAVAILABLE without it.
  KServeService(RequestRunner& runner, const ModelRegistry& registry);

  bool ready() const { return runner_.ready(); }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  // NOT_FOUND for an unknown model or version; else whether it is ready.
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  // Platform "docsparse", input "text", the outputs of the model's tasks.
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;

 private:
  class InferCall;

  // The model `name` at `version` ("" or "1"); `field` names the request's
  // name field in errors.
  absl::StatusOr<const ServedModel*> FindModel(const std::string& name, const std::string& version,
                                               const char* field) const;
  // The metrics of the model a request names, or of "unknown".
  ModelMetrics& MetricsFor(const std::string& requested) const;

  RequestRunner& runner_;
  const ModelRegistry& registry_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_KSERVE_SERVICE_H_
