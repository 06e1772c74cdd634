#include "server/tls_files.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace docsparse {

class TlsMaterial {
 public:
  TlsMaterial() = default;
  TlsMaterial(const TlsMaterial&) = delete;
  TlsMaterial& operator=(const TlsMaterial&) = delete;
  ~TlsMaterial() {
    X509_free(leaf);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
    X509_STORE_free(client_cas);
  }

  // The files as read, for gRPC's copies.
  std::string cert_pem, key_pem, client_ca_pem;

  X509* leaf = nullptr;
  STACK_OF(X509) * chain = nullptr;  // the certificates after the leaf
  EVP_PKEY* key = nullptr;
  X509_STORE* client_cas = nullptr;  // null without mTLS
};

namespace {

// OpenSSL's reason for the last failure, for the error message.
std::string OpenSslReason() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no PEM data";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

absl::Status FileError(const char* flag, const std::string& path, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, ": ", problem));
}

struct BioCloser {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioCloser>;

// The whole file, and a memory BIO over `bytes` for OpenSSL's PEM readers.
absl::StatusOr<BioPtr> ReadPem(const char* flag, const std::string& path, std::string& bytes) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, ": not set"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return FileError(flag, path, "cannot be read");
  bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) return FileError(flag, path, "cannot be read");
  BioPtr bio(BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size())));
  if (bio == nullptr) return FileError(flag, path, "out of memory");
  return bio;
}

absl::Status LoadCertificates(const std::string& path, TlsMaterial& material) {
  absl::StatusOr<BioPtr> bio = ReadPem("--tls_cert_file", path, material.cert_pem);
  if (!bio.ok()) return bio.status();
  material.leaf = PEM_read_bio_X509(bio->get(), nullptr, nullptr, nullptr);
  if (material.leaf == nullptr) {
    return FileError("--tls_cert_file", path, "no PEM certificate (" + OpenSslReason() + ")");
  }
  material.chain = sk_X509_new_null();
  while (X509* next = PEM_read_bio_X509(bio->get(), nullptr, nullptr, nullptr)) {
    sk_X509_push(material.chain, next);
  }
  ERR_clear_error();  // the loop ends on "no start line"
  return absl::OkStatus();
}

absl::Status LoadKey(const std::string& path, TlsMaterial& material) {
  absl::StatusOr<BioPtr> bio = ReadPem("--tls_key_file", path, material.key_pem);
  if (!bio.ok()) return bio.status();
  material.key = PEM_read_bio_PrivateKey(bio->get(), nullptr, nullptr, nullptr);
  if (material.key == nullptr) {
    return FileError("--tls_key_file", path,
                     "no unencrypted PEM private key (" + OpenSslReason() + ")");
  }
  if (X509_check_private_key(material.leaf, material.key) != 1) {
    ERR_clear_error();
    return FileError("--tls_key_file", path,
                     "is not the key of the certificate in --tls_cert_file");
  }
  return absl::OkStatus();
}

absl::Status LoadClientCas(const std::string& path, TlsMaterial& material) {
  absl::StatusOr<BioPtr> bio = ReadPem("--tls_client_ca_file", path, material.client_ca_pem);
  if (!bio.ok()) return bio.status();
  material.client_cas = X509_STORE_new();
  int count = 0;
  while (X509* ca = PEM_read_bio_X509(bio->get(), nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(material.client_cas, ca);  // takes its own reference
    X509_free(ca);
    ++count;
  }
  ERR_clear_error();
  if (count == 0) return FileError("--tls_client_ca_file", path, "no PEM certificate");
  return absl::OkStatus();
}

// Gives the handshake `ssl` the reloader's current certificate, key and,
// with mTLS, the client CAs to verify against. OpenSSL calls it after the
// ClientHello, before the certificate and certificate request are sent.
int UseCurrentMaterial(SSL* ssl, void* reloader) {
  const std::shared_ptr<const TlsMaterial> material =
      static_cast<const TlsReloader*>(reloader)->Current();
  if (SSL_use_certificate(ssl, material->leaf) != 1 ||
      SSL_use_PrivateKey(ssl, material->key) != 1 || SSL_set1_chain(ssl, material->chain) != 1) {
    return 0;
  }
  if (material->client_cas != nullptr) {
    SSL_set_verify(ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    if (SSL_set1_verify_cert_store(ssl, material->client_cas) != 1) return 0;
  }
  return 1;
}

absl::StatusOr<std::shared_ptr<const TlsMaterial>> LoadTlsMaterial(const TlsFiles& files) {
  auto material = std::make_shared<TlsMaterial>();
  if (absl::Status loaded = LoadCertificates(files.cert_file, *material); !loaded.ok()) {
    return loaded;
  }
  if (absl::Status loaded = LoadKey(files.key_file, *material); !loaded.ok()) return loaded;
  if (files.mutual()) {
    if (absl::Status loaded = LoadClientCas(files.client_ca_file, *material); !loaded.ok()) {
      return loaded;
    }
  }
  return std::shared_ptr<const TlsMaterial>(std::move(material));
}

}  // namespace

// What a file looked like when last read: a rotation changes one of these
// (a Kubernetes secret mount swaps a symlink, so the inode changes).
struct TlsReloader::FileStamps {
  struct Stamp {
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = -1;
    int64_t modified_ns = -1;
    bool operator==(const Stamp& other) const {
      return std::tie(device, inode, size, modified_ns) ==
             std::tie(other.device, other.inode, other.size, other.modified_ns);
    }
  };
  std::array<Stamp, 3> files;
  bool operator==(const FileStamps& other) const { return files == other.files; }

  static FileStamps Of(const TlsFiles& tls) {
    FileStamps stamps;
    const std::array<const std::string*, 3> paths = {&tls.cert_file, &tls.key_file,
                                                     &tls.client_ca_file};
    for (size_t i = 0; i < paths.size(); ++i) {
      struct stat info {};
      if (paths[i]->empty() || stat(paths[i]->c_str(), &info) != 0) continue;
      stamps.files[i] = {info.st_dev, info.st_ino, info.st_size,
                         int64_t{info.st_mtim.tv_sec} * 1'000'000'000 + info.st_mtim.tv_nsec};
    }
    return stamps;
  }
};

absl::StatusOr<std::unique_ptr<TlsReloader>> TlsReloader::Start(TlsFiles files) {
  absl::StatusOr<std::shared_ptr<const TlsMaterial>> material = LoadTlsMaterial(files);
  if (!material.ok()) return material.status();
  const char* tmp = std::getenv("TMPDIR");
  std::string folder =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/docsparse-tls.XXXXXX");
  if (mkdtemp(folder.data()) == nullptr) {  // mode 0700: the key's copy stays ours
    return absl::InternalError(absl::StrCat("cannot make a folder for the TLS files' copies in ",
                                            tmp != nullptr ? tmp : "/tmp"));
  }
  std::unique_ptr<TlsReloader> reloader(
      new TlsReloader(std::move(files), *material, std::move(folder)));
  if (absl::Status published = reloader->Publish(**material); !published.ok()) return published;
  reloader->watcher_ = std::thread([raw = reloader.get()] { raw->Watch(); });
  return reloader;
}

TlsReloader::TlsReloader(TlsFiles files, std::shared_ptr<const TlsMaterial> material,
                         std::string copies)
    : files_(std::move(files)),
      copies_(std::move(copies)),
      material_(std::move(material)),
      stamps_(std::make_unique<FileStamps>(FileStamps::Of(files_))) {}

TlsReloader::~TlsReloader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  std::error_code ignored;
  std::filesystem::remove_all(copies_, ignored);
}

absl::Status TlsReloader::Publish(const TlsMaterial& material) {
  namespace fs = std::filesystem;
  const std::string name = absl::StrCat("g", ++generation_);
  const fs::path folder = fs::path(copies_) / name;
  std::error_code error;
  fs::create_directory(folder, error);
  auto write = [&folder](const char* file, const std::string& bytes) {
    std::ofstream out(folder / file, std::ios::binary | std::ios::trunc);
    out << bytes;
    return static_cast<bool>(out.flush());
  };
  if (error || !write("cert.pem", material.cert_pem) || !write("key.pem", material.key_pem) ||
      (files_.mutual() && !write("ca.pem", material.client_ca_pem))) {
    return absl::InternalError(absl::StrCat("cannot write the TLS files' copies in ", copies_));
  }
  const fs::path next = fs::path(copies_) / "next";
  fs::remove(next, error);
  fs::create_directory_symlink(name, next, error);
  if (error) return absl::InternalError(absl::StrCat("cannot link ", next.string()));
  fs::rename(next, fs::path(copies_) / "current", error);
  if (error) return absl::InternalError(absl::StrCat("cannot swap ", copies_, "/current"));
  if (generation_ > 1)
    fs::remove_all(fs::path(copies_) / absl::StrCat("g", generation_ - 1), error);
  return absl::OkStatus();
}

void TlsReloader::Watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, std::chrono::seconds(files_.reload_seconds),
                         [this] { return stopping_; })) {
    lock.unlock();
    FileStamps stamps = FileStamps::Of(files_);
    if (!(stamps == *stamps_)) {
      // Looked at again only when the files change once more: a rotation
      // caught half-written is retried when its last file lands.
      *stamps_ = stamps;
      absl::StatusOr<std::shared_ptr<const TlsMaterial>> loaded = LoadTlsMaterial(files_);
      absl::Status published = loaded.ok() ? Publish(**loaded) : loaded.status();
      if (published.ok()) {
        std::lock_guard<std::mutex> swap(mutex_);
        material_ = *std::move(loaded);
        std::cerr << "docsparse-server: TLS certificate reloaded from " << files_.cert_file << "\n";
      } else {
        std::cerr << "docsparse-server: TLS files changed but do not load; the previous ones "
                     "serve: "
                  << published.message() << "\n";
      }
    }
    lock.lock();
  }
}

std::shared_ptr<const TlsMaterial> TlsReloader::Current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return material_;
}

std::shared_ptr<grpc::ServerCredentials> TlsReloader::GrpcCredentials() const {
  const std::string current = copies_ + "/current/";
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      current + "key.pem", current + "cert.pem", files_.mutual() ? current + "ca.pem" : "",
      static_cast<unsigned int>(files_.reload_seconds));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (files_.mutual()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

bool TlsReloader::Install(SSL_CTX& context) const {
  if (SSL_CTX_set_min_proto_version(&context, TLS1_2_VERSION) != 1) return false;
  SSL_CTX_set_cert_cb(&context, UseCurrentMaterial, const_cast<TlsReloader*>(this));
  return true;
}

}  // namespace docsparse
