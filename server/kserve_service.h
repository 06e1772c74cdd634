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
#include "server/parsed_unary_call.h"
#include "server/request_runner.h"

namespace docsparse {

// Every method raw: the bytes come to us unparsed, so bytes that are not the
// request message get INVALID_ARGUMENT (server/parsed_unary_call.h).
using RawKServeService = inference::GRPCInferenceService::WithRawCallbackMethod_ServerLive<
    inference::GRPCInferenceService::WithRawCallbackMethod_ServerReady<
        inference::GRPCInferenceService::WithRawCallbackMethod_ModelReady<
            inference::GRPCInferenceService::WithRawCallbackMethod_ServerMetadata<
                inference::GRPCInferenceService::WithRawCallbackMethod_ModelMetadata<
                    inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
                        inference::GRPCInferenceService::Service>>>>>>;

class KServeService final : public RawKServeService {
 public:
  // Borrows both; they must outlive the gRPC server. Requests run through
  // the runner DocumentService and the HTTP API share; ServerReady /
  // ModelReady report its readiness, and ModelInfer is UNAVAILABLE without it.
  KServeService(RequestRunner& runner, const ModelRegistry& registry);

  bool ready() const { return runner_.ready(); }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  // NOT_FOUND for an unknown model or version; else whether it is ready.
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  // Platform "docsparse", input "text", the outputs of the model's tasks.
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;

 private:
  class InferCall;
  // Whether request bytes that do not parse are answered INVALID_ARGUMENT
  // to anyone (health and readiness), or only to a caller with a good token.
  enum class Access { kOpen, kToken };

  // Parses the request bytes and responds with what `answer(context,
  // request, response)` returns.
  template <typename Request, typename Response, typename Answer>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request, grpc::ByteBuffer* response,
                                  Access access, Answer answer);

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
