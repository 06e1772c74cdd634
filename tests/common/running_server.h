// A docsparse-server on loopback plus a connected C++ client: the fixture
// most integration tests share.
#ifndef DOCSPARSE_TESTS_COMMON_RUNNING_SERVER_H_
#define DOCSPARSE_TESTS_COMMON_RUNNING_SERVER_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "client/docsparse_client.h"
#include "tests/common/server_process.h"

namespace docsparse::testing {

struct RunningServer {
  std::unique_ptr<ServerProcess> process;
  std::unique_ptr<DocsparseClient> client;
};

// Starts the server over `model_repository` with `extra` flags and connects;
// use with ASSERT_NO_FATAL_FAILURE.
inline void StartServer(const std::string& model_repository, std::vector<std::string> extra,
                        RunningServer* server) {
  server->process = std::make_unique<ServerProcess>();
  ASSERT_TRUE(
      server->process->Start(ServerBinary(), LoopbackFlags(model_repository, std::move(extra))))
      << server->process->output();
  auto client = DocsparseClient::Connect(server->process->grpc_address());
  ASSERT_TRUE(client.ok()) << client.status();
  server->client = *std::move(client);
}

// The server over MiniLmOnlyRepository() with `flags` does not start, and
// its output says `message`.
inline void ExpectMiniLmServerStartFailsSaying(const std::vector<std::string>& flags,
                                               const std::string& message) {
  ServerProcess server;
  EXPECT_FALSE(server.Start(ServerBinary(), LoopbackFlags(MiniLmOnlyRepository(), flags)))
      << flags.front();
  EXPECT_NE(server.output().find(message), std::string::npos)
      << "expected '" << message << "' in:\n"
      << server.output();
}

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_COMMON_RUNNING_SERVER_H_
