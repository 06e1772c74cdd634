// TLS and mutual TLS on the real server, with certificates made here by the
// openssl command: gRPC (DocumentService) and the HTTP port connect with the
// right CA (and, for mTLS, a client certificate from the client CA) and fail
// without; rotated certificate files serve new handshakes on both ports, a
// rotation that does not load leaves the last good certificate serving; bad
// TLS flags stop the server with the flag named.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "client/channel_credentials.h"
#include "client/docsparse_client.h"
#include "docsparse/v1/docsparse.grpc.pb.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/server_process.h"

namespace docsparse {
namespace {

namespace fs = std::filesystem;

// A CA, certificates it signs, and a second CA that nobody trusts, as PEM
// files in a fresh folder (EC P-256 keys: quick to make).
class TestPki {
 public:
  TestPki() {
    dir_ = fs::path(::testing::TempDir()) / ("docsparse-tls." + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~TestPki() { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // NAME.pem / NAME.key: a self-signed CA.
  ::testing::AssertionResult MakeCa(const std::string& name) {
    return Run(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2"
        " -subj '/CN=" +
        name + "' -keyout " + Path(name + ".key") + " -out " + Path(name + ".pem"));
  }

  // NAME.pem / NAME.key: a certificate for `common_name` signed by `ca`, for
  // a server on 127.0.0.1 / localhost or for a client.
  ::testing::AssertionResult MakeLeaf(const std::string& name, const std::string& ca,
                                      const std::string& common_name, bool server) {
    const std::string extensions = Path(name + ".ext");
    std::ofstream(extensions) << (server ? "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                           "extendedKeyUsage=serverAuth\n"
                                         : "extendedKeyUsage=clientAuth\n")
                              << "basicConstraints=CA:FALSE\n";
    if (auto made =
            Run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
                " -subj '/CN=" +
                common_name + "' -keyout " + Path(name + ".key") + " -out " + Path(name + ".csr"));
        !made) {
      return made;
    }
    return Run("openssl x509 -req -days 2 -in " + Path(name + ".csr") + " -CA " +
               Path(ca + ".pem") + " -CAkey " + Path(ca + ".key") + " -CAcreateserial -extfile " +
               extensions + " -out " + Path(name + ".pem"));
  }

 private:
  static ::testing::AssertionResult Run(const std::string& command) {
    const int status = std::system((command + " >/dev/null 2>&1").c_str());
    if (status == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "failed (" << status << "): " << command;
  }

  fs::path dir_;
};

// The common name on the certificate the server at `address` ("host:port")
// presents, read by a bare OpenSSL handshake that offers HTTP/2 as gRPC
// clients do (and HTTP/1.1) and verifies nothing; empty when no handshake.
std::string PresentedCommonName(const std::string& address) {
  const size_t colon = address.rfind(':');
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &peer.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  std::string name;
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(context);
  static const unsigned char kAlpn[] = "\x02h2\x08http/1.1";
  SSL_set_alpn_protos(ssl, kAlpn, sizeof kAlpn - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof peer) == 0 && SSL_set_fd(ssl, fd) &&
      SSL_connect(ssl) == 1) {
    if (X509* certificate = SSL_get1_peer_certificate(ssl)) {
      char text[256] = {};
      X509_NAME_get_text_by_NID(X509_get_subject_name(certificate), NID_commonName, text,
                                sizeof text);
      name = text;
      X509_free(certificate);
    }
  }
  SSL_free(ssl);
  SSL_CTX_free(context);
  close(fd);
  return name;
}

// Polls until both ports present `common_name` (a rotation picked up).
::testing::AssertionResult BothPortsPresent(const testing::ServerProcess& server,
                                            const std::string& common_name) {
  std::string grpc_name, http_name;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    grpc_name = PresentedCommonName(server.grpc_address());
    http_name = PresentedCommonName(server.http_address());
    if (grpc_name == common_name && http_name == common_name) {
      return ::testing::AssertionSuccess();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return ::testing::AssertionFailure() << "gRPC presents '" << grpc_name << "', HTTP '" << http_name
                                       << "', expected '" << common_name << "'";
}

grpc::Status Embed(const std::string& address,
                   std::shared_ptr<grpc::ChannelCredentials> credentials,
                   v1::EmbedResponse* response) {
  auto stub = v1::DocumentService::NewStub(grpc::CreateChannel(address, credentials));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::EmbedRequest request;
  request.set_model("minilm");
  request.mutable_document()->set_text("a short document over TLS");
  return stub->Embed(&context, request, response);
}

std::shared_ptr<grpc::ChannelCredentials> Credentials(const ClientTlsFiles& files) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFor(files);
  EXPECT_TRUE(credentials.ok()) << credentials.status();
  return credentials.ok() ? *credentials : grpc::InsecureChannelCredentials();
}

// GET /readyz over HTTPS trusting `ca`, with a client certificate when
// `client` names one; the status, or -1 when no answer came.
int HttpsReadyz(const std::string& address, const std::string& ca, const std::string& client_cert,
                const std::string& client_key) {
  const size_t colon = address.rfind(':');
  httplib::SSLClient https(address.substr(0, colon), std::stoi(address.substr(colon + 1)),
                           client_cert, client_key);
  https.set_ca_cert_path(ca.c_str());
  https.enable_server_certificate_verification(true);
  https.set_connection_timeout(std::chrono::seconds(10));
  https.set_read_timeout(std::chrono::seconds(10));
  httplib::Result result = https.Get("/readyz");
  return result ? result->status : -1;
}

int PlainHttpReadyz(const std::string& address) {
  const size_t colon = address.rfind(':');
  httplib::Client http(address.substr(0, colon), std::stoi(address.substr(colon + 1)));
  http.set_connection_timeout(std::chrono::seconds(10));
  http.set_read_timeout(std::chrono::seconds(10));
  httplib::Result result = http.Get("/readyz");
  return result ? result->status : -1;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The clients here write TLS records through OpenSSL to servers that
    // refuse them; a write to the closed socket must fail, not kill the test.
    signal(SIGPIPE, SIG_IGN);
    ASSERT_TRUE(testing::MiniLmPresent());
    ASSERT_TRUE(pki_.MakeCa("ca"));
    ASSERT_TRUE(pki_.MakeCa("stranger-ca"));
    ASSERT_TRUE(pki_.MakeLeaf("server-one", "ca", "server-one", /*server=*/true));
    ASSERT_TRUE(pki_.MakeLeaf("server-two", "ca", "server-two", /*server=*/true));
    ASSERT_TRUE(pki_.MakeLeaf("client", "ca", "client", /*server=*/false));
    ASSERT_TRUE(pki_.MakeLeaf("stranger", "stranger-ca", "stranger", /*server=*/false));
    // The served files: copies, so a rotation can replace them.
    fs::copy_file(pki_.Path("server-one.pem"), pki_.Path("served.pem"));
    fs::copy_file(pki_.Path("server-one.key"), pki_.Path("served.key"));
  }

  std::vector<std::string> TlsFlags(bool mutual) const {
    std::vector<std::string> flags = {"--threads=2", "--tls_cert_file=" + pki_.Path("served.pem"),
                                      "--tls_key_file=" + pki_.Path("served.key"),
                                      "--tls_reload_seconds=1"};
    if (mutual) flags.push_back("--tls_client_ca_file=" + pki_.Path("ca.pem"));
    return flags;
  }

  // Replaces the served files as a secret rotation does: each file swapped
  // whole by a rename.
  void Rotate(const std::string& contents_pem, const std::string& contents_key) {
    std::ofstream(pki_.Path("next.pem")) << contents_pem;
    std::ofstream(pki_.Path("next.key")) << contents_key;
    fs::rename(pki_.Path("next.pem"), pki_.Path("served.pem"));
    fs::rename(pki_.Path("next.key"), pki_.Path("served.key"));
  }

  TestPki pki_;
  testing::ServerProcess server_;
};

TEST_F(TlsTest, ConnectsWithTheRightCaOnlyAndPicksUpRotatedCertificates) {
  ASSERT_TRUE(server_.Start(
      testing::ServerBinary(),
      testing::LoopbackFlags(testing::MiniLmOnlyRepository(), TlsFlags(/*mutual=*/false))))
      << server_.output();
  EXPECT_NE(server_.output().find("TLS from"), std::string::npos) << server_.output();
  const std::string grpc = server_.grpc_address();
  const std::string http = server_.http_address();

  v1::EmbedResponse response;
  ClientTlsFiles trusted;
  trusted.ca_file = pki_.Path("ca.pem");
  const grpc::Status ok = Embed(grpc, Credentials(trusted), &response);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(response.embedding_size(), 384);
  EXPECT_EQ(Embed(grpc, grpc::InsecureChannelCredentials(), &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  ClientTlsFiles stranger;
  stranger.ca_file = pki_.Path("stranger-ca.pem");
  EXPECT_EQ(Embed(grpc, Credentials(stranger), &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  EXPECT_EQ(HttpsReadyz(http, pki_.Path("ca.pem"), "", ""), 200);
  EXPECT_EQ(HttpsReadyz(http, pki_.Path("stranger-ca.pem"), "", ""), -1);
  EXPECT_EQ(PlainHttpReadyz(http), -1);

  // The C++ client and the CLI reach it with the CA.
  auto client = DocsparseClient::Connect(grpc, absl::Seconds(10), "", Credentials(trusted));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->ListModels().ok());
  const std::string cli = std::string(DOCSPARSE_BINARY_DIR) + "/client/docsparse --server=" + grpc +
                          " --tls_ca_file=" + pki_.Path("ca.pem") + " health >/dev/null";
  EXPECT_EQ(std::system(cli.c_str()), 0) << cli;

  // A rotation: both ports present the new certificate to new connections.
  ASSERT_TRUE(BothPortsPresent(server_, "server-one"));
  Rotate(testing::ReadFile(pki_.Path("server-two.pem")),
         testing::ReadFile(pki_.Path("server-two.key")));
  EXPECT_TRUE(BothPortsPresent(server_, "server-two")) << server_.output();
  EXPECT_TRUE(Embed(grpc, Credentials(trusted), &response).ok());
  EXPECT_EQ(HttpsReadyz(http, pki_.Path("ca.pem"), "", ""), 200);

  // A rotation that does not load: the last good certificate keeps serving.
  Rotate("not a certificate\n", "not a key\n");
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_TRUE(BothPortsPresent(server_, "server-two"));
  EXPECT_TRUE(Embed(grpc, Credentials(trusted), &response).ok());
  EXPECT_EQ(HttpsReadyz(http, pki_.Path("ca.pem"), "", ""), 200);
  // And a good one after it is taken.
  Rotate(testing::ReadFile(pki_.Path("server-one.pem")),
         testing::ReadFile(pki_.Path("server-one.key")));
  EXPECT_TRUE(BothPortsPresent(server_, "server-one"));
  server_.Stop();
}

TEST_F(TlsTest, MutualTlsWantsAClientCertificateFromTheClientCa) {
  ASSERT_TRUE(server_.Start(
      testing::ServerBinary(),
      testing::LoopbackFlags(testing::MiniLmOnlyRepository(), TlsFlags(/*mutual=*/true))))
      << server_.output();
  const std::string grpc = server_.grpc_address();
  const std::string http = server_.http_address();
  v1::EmbedResponse response;

  ClientTlsFiles with_client;
  with_client.ca_file = pki_.Path("ca.pem");
  with_client.cert_file = pki_.Path("client.pem");
  with_client.key_file = pki_.Path("client.key");
  const grpc::Status ok = Embed(grpc, Credentials(with_client), &response);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(response.embedding_size(), 384);

  ClientTlsFiles without_client;
  without_client.ca_file = pki_.Path("ca.pem");
  EXPECT_EQ(Embed(grpc, Credentials(without_client), &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  ClientTlsFiles stranger = with_client;
  stranger.cert_file = pki_.Path("stranger.pem");
  stranger.key_file = pki_.Path("stranger.key");
  EXPECT_EQ(Embed(grpc, Credentials(stranger), &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  EXPECT_EQ(
      HttpsReadyz(http, pki_.Path("ca.pem"), pki_.Path("client.pem"), pki_.Path("client.key")),
      200);
  EXPECT_EQ(HttpsReadyz(http, pki_.Path("ca.pem"), "", ""), -1);
  EXPECT_EQ(
      HttpsReadyz(http, pki_.Path("ca.pem"), pki_.Path("stranger.pem"), pki_.Path("stranger.key")),
      -1);
  server_.Stop();
}

TEST_F(TlsTest, PlainHttpBesideTlsGrpcWhenAsked) {
  std::vector<std::string> flags = TlsFlags(/*mutual=*/true);
  flags.push_back("--http_tls=false");
  ASSERT_TRUE(server_.Start(testing::ServerBinary(),
                            testing::LoopbackFlags(testing::MiniLmOnlyRepository(), flags)))
      << server_.output();
  EXPECT_EQ(PlainHttpReadyz(server_.http_address()), 200);
  v1::EmbedResponse response;
  EXPECT_EQ(
      Embed(server_.grpc_address(), grpc::InsecureChannelCredentials(), &response).error_code(),
      grpc::StatusCode::UNAVAILABLE);
  server_.Stop();
}

TEST_F(TlsTest, BadTlsFlagsStopTheServerNamingTheFlag) {
  struct Case {
    std::vector<std::string> flags;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"--tls_cert_file=" + pki_.Path("served.pem")}, "--tls_key_file: not set"},
      {{"--tls_key_file=" + pki_.Path("served.key")}, "--tls_cert_file: not set"},
      {{"--tls_client_ca_file=" + pki_.Path("ca.pem")}, "--tls_client_ca_file: needs"},
      {{"--tls_cert_file=" + pki_.Path("served.pem"), "--tls_key_file=" + pki_.Path("client.key")},
       "is not the key of the certificate"},
      {{"--tls_cert_file=" + pki_.Path("served.key"), "--tls_key_file=" + pki_.Path("served.key")},
       "--tls_cert_file: " + pki_.Path("served.key") + ": no PEM certificate"},
      {{"--tls_cert_file=" + pki_.Path("missing.pem"), "--tls_key_file=" + pki_.Path("served.key")},
       "cannot be read"},
      {{"--tls_cert_file=" + pki_.Path("served.pem"), "--tls_key_file=" + pki_.Path("served.key"),
        "--tls_client_ca_file=" + pki_.Path("client.ext")},
       "--tls_client_ca_file: " + pki_.Path("client.ext") + ": no PEM certificate"},
      {{"--tls_cert_file=" + pki_.Path("served.pem"), "--tls_key_file=" + pki_.Path("served.key"),
        "--tls_reload_seconds=0"},
       "--tls_reload_seconds: 0"},
  };
  for (const Case& c : cases) {
    testing::ServerProcess server;
    EXPECT_FALSE(server.Start(testing::ServerBinary(),
                              testing::LoopbackFlags(testing::MiniLmOnlyRepository(), c.flags),
                              std::chrono::seconds(60)));
    EXPECT_NE(server.output().find(c.expected), std::string::npos)
        << "expected '" << c.expected << "' in:\n"
        << server.output();
  }
}

}  // namespace
}  // namespace docsparse
