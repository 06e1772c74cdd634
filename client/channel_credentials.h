// How the client reaches a server run with TLS: the CA that signed the
// server's certificate (or the system's roots) and, for mutual TLS, the
// client's own certificate and key, read from PEM files.
#ifndef DOCSPARSE_CLIENT_CHANNEL_CREDENTIALS_H_
#define DOCSPARSE_CLIENT_CHANNEL_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace grpc {
class ChannelCredentials;
}

namespace docsparse {

struct ClientTlsFiles {
  bool enabled = false;   // TLS at all; without ca_file the system's roots verify
  std::string ca_file;    // PEM roots the server's certificate must chain to
  std::string cert_file;  // PEM client certificate (mutual TLS), with key_file
  std::string key_file;
};

// Insecure credentials when `files.enabled` is false and no file is named
// (naming a file turns TLS on); else TLS ones. INVALID_ARGUMENT naming the
// flag (--tls_ca_file, --tls_cert_file, --tls_key_file) for a file that
// cannot be read, or a certificate without its key.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ClientTlsFiles& files);

}  // namespace docsparse

#endif  // DOCSPARSE_CLIENT_CHANNEL_CREDENTIALS_H_
