#include "client/channel_credentials.h"

#include <grpcpp/security/credentials.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace docsparse {
namespace {

absl::StatusOr<std::string> ReadPem(const char* flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " cannot be read"));
  }
  if (text.str().find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " holds no PEM block"));
  }
  return text.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ClientTlsFiles& files) {
  const bool tls = files.enabled || !files.ca_file.empty() || !files.cert_file.empty() ||
                   !files.key_file.empty();
  if (!tls) return grpc::InsecureChannelCredentials();
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(files.cert_file.empty()
                                          ? "--tls_cert_file: not set, but --tls_key_file is"
                                          : "--tls_key_file: not set, but --tls_cert_file is");
  }
  grpc::SslCredentialsOptions options;
  if (!files.ca_file.empty()) {
    absl::StatusOr<std::string> roots = ReadPem("--tls_ca_file", files.ca_file);
    if (!roots.ok()) return roots.status();
    options.pem_root_certs = *std::move(roots);
  }
  if (!files.cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPem("--tls_cert_file", files.cert_file);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem("--tls_key_file", files.key_file);
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *std::move(cert);
    options.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(options);
}

}  // namespace docsparse
