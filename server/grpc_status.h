// absl::Status -> grpc::Status, the only place the two meet (STYLE.md).
#ifndef DOCSPARSE_SERVER_GRPC_STATUS_H_
#define DOCSPARSE_SERVER_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace docsparse {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  // The canonical codes of absl and gRPC share numeric values.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_GRPC_STATUS_H_
