// docsparse-server --instances: with two model instances on the CPU (the
// default), two batches compute at once, each request gets the embedding a
// one-instance server gives, a lone batch widens to every thread unless
// --widen_lone_batches=false, and a count out of range stops the server
// naming the flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "client/docsparse_client.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/running_server.h"

namespace docsparse {
namespace {

constexpr int kDocuments = 6;

// Six different documents of a few hundred tokens each.
v1::EmbedRequest Document(int i) {
  const std::string text = testing::ReadFile("/usr/share/common-licenses/GPL-3");
  v1::EmbedRequest request;
  request.set_model("minilm");
  request.mutable_document()->set_text(text.substr(static_cast<size_t>(i) * 2000, 1500));
  return request;
}

// Sends the documents from one thread each, all at once; returns the
// responses and the wall time of the whole.
std::vector<absl::StatusOr<v1::EmbedResponse>> EmbedAtOnce(DocsparseClient& client,
                                                           double* wall_ms) {
  std::vector<absl::StatusOr<v1::EmbedResponse>> responses(kDocuments,
                                                           absl::UnknownError("not sent"));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> senders;
  for (int i = 0; i < kDocuments; ++i) {
    senders.emplace_back([&, i] { responses[i] = client.Embed(Document(i)); });
  }
  for (std::thread& sender : senders) sender.join();
  *wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return responses;
}

TEST(InstancesServerTest, TwoInstancesComputeTwoRequestsAtOnceAndAnswerAsOneInstanceDoes) {
  ASSERT_TRUE(testing::MiniLmPresent());
  testing::RunningServer one, two;
  // Batches of one request: each request is a batch, so that how many
  // compute at once is the instances' doing. Two instances are the default.
  ASSERT_NO_FATAL_FAILURE(testing::StartServer(
      testing::MiniLmOnlyRepository(),
      {"--threads=2", "--precision=fp32", "--max_batch_size=1", "--instances=1"}, &one));
  ASSERT_NO_FATAL_FAILURE(
      testing::StartServer(testing::MiniLmOnlyRepository(),
                           {"--threads=2", "--precision=fp32", "--max_batch_size=1"}, &two));
  // What a task on each instance, and a lone one, found as its OpenMP
  // threads: a lone batch widens to both.
  EXPECT_NE(two.process->output().find("2 instances of 1 thread (2 for a lone batch)"),
            std::string::npos)
      << two.process->output();
  EXPECT_NE(one.process->output().find("1 instance of 2 threads,"), std::string::npos)
      << one.process->output();

  double wall_ms = 0;
  const std::vector<absl::StatusOr<v1::EmbedResponse>> together =
      EmbedAtOnce(*two.client, &wall_ms);
  double inference_ms = 0;
  for (int i = 0; i < kDocuments; ++i) {
    ASSERT_TRUE(together[i].ok()) << i << ": " << together[i].status();
    inference_ms += together[i]->cost().timings().inference_ms();
    const absl::StatusOr<v1::EmbedResponse> alone = one.client->Embed(Document(i));
    ASSERT_TRUE(alone.ok()) << alone.status();
    ASSERT_EQ(together[i]->embedding_size(), alone->embedding_size());
    double worst = 0;
    for (int j = 0; j < alone->embedding_size(); ++j) {
      worst = std::max(worst, std::abs(double{together[i]->embedding(j)} - alone->embedding(j)));
    }
    EXPECT_LE(worst, 1e-5) << "document " << i;
  }
  // Inference times add up to more than the wall time only where requests
  // computed at once (about twice it with two busy instances; at most once
  // it with one).
  EXPECT_GT(inference_ms, 1.3 * wall_ms)
      << inference_ms << " ms of inference in " << wall_ms << " ms";
  double one_wall_ms = 0, one_inference_ms = 0;
  for (const absl::StatusOr<v1::EmbedResponse>& response : EmbedAtOnce(*one.client, &one_wall_ms)) {
    ASSERT_TRUE(response.ok()) << response.status();
    one_inference_ms += response->cost().timings().inference_ms();
  }
  EXPECT_LE(one_inference_ms, 1.05 * one_wall_ms);
}

TEST(InstancesServerTest, WithoutWideningALoneBatchKeepsItsInstancesShare) {
  ASSERT_TRUE(testing::MiniLmPresent());
  testing::RunningServer strict;
  ASSERT_NO_FATAL_FAILURE(testing::StartServer(
      testing::MiniLmOnlyRepository(),
      {"--threads=2", "--precision=fp32", "--widen_lone_batches=false", "--instances=2"}, &strict));
  EXPECT_NE(strict.process->output().find("2 instances of 1 thread,"), std::string::npos)
      << strict.process->output();
  EXPECT_TRUE(strict.client->Embed(Document(0)).ok());
}

TEST(InstancesServerTest, ACountOutOfRangeStopsTheServerNamingTheFlag) {
  testing::ExpectMiniLmServerStartFailsSaying({"--instances=-1"},
                                              "--instances: -1 is not 0 (2 on a GPU or a CPU of "
                                              "two cores or more, else 1)");
  testing::ExpectMiniLmServerStartFailsSaying({"--instances=65"},
                                              "--instances: 65 is not 0 (2 on a GPU or a CPU of "
                                              "two cores or more, else 1)");
}

}  // namespace
}  // namespace docsparse
