// gRPC server reflection v1 (grpc.reflection.v1.ServerReflection). Debian's
// gRPC 1.51 reflection plugin serves only v1alpha, and current clients
// (grpcurl, grpcui, Postman) ask for v1 first; this serves v1 from the same
// descriptors: the generated pool, which holds every proto linked into the
// server (docsparse.v1, inference, grpc.health.v1, the reflection protos).
#ifndef DOCSPARSE_SERVER_REFLECTION_V1_SERVICE_H_
#define DOCSPARSE_SERVER_REFLECTION_V1_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace docsparse {

class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::CallbackService {
 public:
  // `services`: the full names list_services answers with.
  explicit ReflectionV1Service(std::vector<std::string> services)
      : services_(std::move(services)) {}

  grpc::ServerBidiReactor<grpc::reflection::v1::ServerReflectionRequest,
                          grpc::reflection::v1::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* context) override;

  // One request's answer (what the stream writes back); public for tests.
  grpc::reflection::v1::ServerReflectionResponse Answer(
      const grpc::reflection::v1::ServerReflectionRequest& request) const;

 private:
  const std::vector<std::string> services_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_REFLECTION_V1_SERVICE_H_
