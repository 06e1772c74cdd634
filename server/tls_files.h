// TLS on both ports from PEM files named by flag (--tls_cert_file,
// --tls_key_file, optionally --tls_client_ca_file for mutual TLS), picked up
// again when they change on disk, as cert-manager and Kubernetes secret
// mounts rotate them.
//
// One TlsReloader looks at the files every `reload_seconds` and takes a new
// set only when it loads whole (PEM parses, the key is the certificate's):
// a half-written or broken rotation leaves the last good set serving. The
// HTTP port (cpp-httplib on OpenSSL) takes the current set per handshake.
// gRPC's own file watcher would serve no certificate at all after a broken
// rotation, so it watches private copies that only the reloader writes, and
// only with a set that loaded.
#ifndef DOCSPARSE_SERVER_TLS_FILES_H_
#define DOCSPARSE_SERVER_TLS_FILES_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace grpc {
class ServerCredentials;
}

namespace docsparse {

struct TlsFiles {
  std::string cert_file;       // PEM: the server's certificate, then its chain
  std::string key_file;        // PEM: the certificate's private key
  std::string client_ca_file;  // PEM: CAs a client certificate must chain to; empty: no mTLS
  int reload_seconds = 60;     // how often the files are looked at again

  bool mutual() const { return !client_ca_file.empty(); }
};

// The files' bytes and what OpenSSL made of them.
class TlsMaterial;

class TlsReloader {
 public:
  // Reads and checks every file, so a mistake stops the server at start
  // naming the flag (INVALID_ARGUMENT) instead of failing every handshake
  // later; writes gRPC's copies into a private folder (mode 0700) under
  // $TMPDIR and starts looking at the files. The copies go with the
  // reloader; a server killed outright leaves them in that folder.
  static absl::StatusOr<std::unique_ptr<TlsReloader>> Start(TlsFiles files);
  // Stops looking and removes the copies.
  ~TlsReloader();

  const TlsFiles& files() const { return files_; }

  // gRPC server credentials on the copies; a client certificate is required
  // and verified when files().mutual().
  std::shared_ptr<grpc::ServerCredentials> GrpcCredentials() const;

  // Sets up an OpenSSL context (TLS 1.2 or newer) whose every handshake
  // takes the current set.
  bool Install(SSL_CTX& context) const;

  std::shared_ptr<const TlsMaterial> Current() const;

 private:
  struct FileStamps;
  TlsReloader(TlsFiles files, std::shared_ptr<const TlsMaterial> material, std::string copies);

  // Writes `material` as a new generation of the copies and points
  // gRPC's paths at it (a symlink swapped by rename, as gRPC asks).
  absl::Status Publish(const TlsMaterial& material);
  void Watch();

  const TlsFiles files_;
  const std::string copies_;  // private folder; gRPC reads copies_/current/*.pem
  mutable std::mutex mutex_;
  std::shared_ptr<const TlsMaterial> material_;  // guarded by mutex_
  std::unique_ptr<FileStamps> stamps_;           // the watcher's
  int generation_ = 0;                           // the watcher's
  bool stopping_ = false;                        // guarded by mutex_
  std::condition_variable wake_;
  std::thread watcher_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_TLS_FILES_H_
