// The server's --precision: the cost report and /metrics say which precision
// and instruction set served a request, a bf16 or int8 server answers within
// its fidelity gate of an fp32 one and classifies the demo's document the
// same way, and a bad value stops the server at start with a message naming
// the flag.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <memory>
#include <set>
#include <string>

#include "client/docsparse_client.h"
#include "tests/common/exposition.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/http_client.h"
#include "tests/common/running_server.h"

namespace docsparse {
namespace {

v1::EmbedRequest EmbedGpl3() {
  v1::EmbedRequest request;
  request.set_model("minilm");
  request.mutable_document()->set_text(
      testing::ReadFile("/usr/share/common-licenses/GPL-3").substr(0, 6000));
  return request;
}

double Cosine(const v1::EmbedResponse& x, const v1::EmbedResponse& y) {
  double dot = 0, a = 0, b = 0;
  for (int i = 0; i < x.embedding_size() && i < y.embedding_size(); ++i) {
    dot += x.embedding(i) * y.embedding(i);
    a += x.embedding(i) * x.embedding(i);
    b += y.embedding(i) * y.embedding(i);
  }
  return dot / std::sqrt(a * b);
}

// The demo's question: the whole GPL-3 against four labels.
v1::ClassifyRequest ClassifyGpl3() {
  v1::ClassifyRequest request;
  request.set_model("minilm");
  request.mutable_document()->set_text(testing::ReadFile("/usr/share/common-licenses/GPL-3"));
  for (const char* label : {"software license", "recipe", "news article", "scientific paper"}) {
    request.add_labels(label);
  }
  return request;
}

std::string Metrics(const std::string& address) {
  httplib::Client http = testing::HttpClient(address);
  auto response = http.Get("/metrics");
  return response && response->status == 200 ? response->body : "";
}

TEST(PrecisionServerTest, CostReportAndMetricsNameThePrecisionAndBf16StaysWithinTheGate) {
  ASSERT_TRUE(testing::MiniLmPresent());
  testing::RunningServer fp32, bf16;
  ASSERT_NO_FATAL_FAILURE(testing::StartServer(testing::MiniLmOnlyRepository(),
                                               {"--threads=2", "--precision=fp32"}, &fp32));
  ASSERT_NO_FATAL_FAILURE(testing::StartServer(testing::MiniLmOnlyRepository(),
                                               {"--threads=2", "--precision=bf16"}, &bf16));
  auto reference = fp32.client->Embed(EmbedGpl3());
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto candidate = bf16.client->Embed(EmbedGpl3());
  ASSERT_TRUE(candidate.ok()) << candidate.status();

  EXPECT_EQ(reference->cost().precision(), "fp32");
  EXPECT_EQ(candidate->cost().precision(), "bf16");
  const std::set<std::string> isas = {"amx", "avx512_bf16", "avx512", "avx2", "baseline"};
  EXPECT_TRUE(isas.count(candidate->cost().isa())) << candidate->cost().isa();
  EXPECT_EQ(candidate->cost().isa(), reference->cost().isa());

  ASSERT_EQ(reference->embedding_size(), candidate->embedding_size());
  EXPECT_GE(Cosine(*reference, *candidate), 0.999);

  const std::string metrics = Metrics(bf16.process->http_address());
  EXPECT_EQ(testing::Exposition(metrics).Find(
                "docsparse_model_compute_info{model=\"minilm\",precision=\"bf16\",isa=\"" +
                candidate->cost().isa() + "\"}"),
            1)
      << metrics;
}

TEST(PrecisionServerTest, Int8StaysWithinItsGateAndClassifiesLikeFp32) {
  ASSERT_TRUE(testing::MiniLmPresent());
  testing::RunningServer fp32, int8;
  ASSERT_NO_FATAL_FAILURE(testing::StartServer(testing::MiniLmOnlyRepository(),
                                               {"--threads=2", "--precision=fp32"}, &fp32));
  ASSERT_NO_FATAL_FAILURE(testing::StartServer(testing::MiniLmOnlyRepository(),
                                               {"--threads=2", "--precision=int8"}, &int8));
  auto reference = fp32.client->Embed(EmbedGpl3());
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto candidate = int8.client->Embed(EmbedGpl3());
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  EXPECT_EQ(candidate->cost().precision(), "int8");
  ASSERT_EQ(reference->embedding_size(), candidate->embedding_size());
  const double cosine = Cosine(*reference, *candidate);
  EXPECT_GE(cosine, 0.995);
  EXPECT_LT(cosine, 1.0);  // int8 really ran

  auto labels_fp32 = fp32.client->Classify(ClassifyGpl3());
  ASSERT_TRUE(labels_fp32.ok()) << labels_fp32.status();
  auto labels_int8 = int8.client->Classify(ClassifyGpl3());
  ASSERT_TRUE(labels_int8.ok()) << labels_int8.status();
  ASSERT_EQ(labels_fp32->scores_size(), labels_int8->scores_size());
  for (int i = 0; i < labels_fp32->scores_size(); ++i) {
    EXPECT_EQ(labels_int8->scores(i).label(), labels_fp32->scores(i).label()) << "rank " << i;
  }
  EXPECT_EQ(labels_int8->scores(0).label(), "software license");
}

TEST(PrecisionServerTest, AnUnknownPrecisionStopsTheServerNamingTheFlag) {
  testing::ExpectMiniLmServerStartFailsSaying(
      {"--precision=fp8"}, "--precision: \"fp8\" is not one of auto, fp32, bf16, int8, fp16");
}

TEST(PrecisionServerTest, Fp16OnTheCpuStopsTheServerSayingWhereItRuns) {
  testing::ExpectMiniLmServerStartFailsSaying(
      {"--precision=fp16"}, "precision: \"fp16\": an encoder runs fp16 on a CUDA device only");
}

TEST(PrecisionServerTest, ADeviceThisBuildCannotUseStopsTheServerNamingTheFlag) {
  // A CPU build (CI's) has no CUDA; a CUDA build on a machine without a GPU
  // has no device 0. Either way the server exits saying why, before loading.
  for (const char* flag : {"--device=cuda", "--device=tpu"}) {
    testing::ExpectMiniLmServerStartFailsSaying({flag}, "--device: \"");
  }
}

}  // namespace
}  // namespace docsparse
