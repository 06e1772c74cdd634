#include "server/request_price.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace docsparse {
namespace {

using ::testing::HasSubstr;

TEST(RequestPriceTest, PartsAddUp) {
  RequestPrice a;
  a.tokens["document"] = 10;
  a.flops = 1e9;
  RequestPrice b;
  b.tokens["document"] = 5;
  b.tokens["label"] = 7;
  b.flops = 2e9;
  a += b;
  EXPECT_EQ(a.tokens["document"], 15);
  EXPECT_EQ(a.tokens["label"], 7);
  EXPECT_EQ(a.total_tokens(), 22);
  EXPECT_DOUBLE_EQ(a.flops, 3e9);
}

TEST(RequestPriceTest, AdmissionNamesThePriceItsPartsAndTheLimit) {
  ServerLimits limits;
  limits.max_request_tokens = 1000;
  limits.max_request_gflops = 10;
  RequestPrice price;
  price.tokens["document"] = 4;
  price.tokens["label"] = 996;
  price.flops = 10e9;
  EXPECT_TRUE(AdmitRequest(price, limits).ok()) << "at the limits is within them";

  price.tokens["label"] = 263522;
  absl::Status refused = AdmitRequest(price, limits);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "request: priced at 263526 tokens to encode (4 document + 263522 label), over the "
            "limit of 1000 tokens per request (--max_request_tokens)");

  price.tokens["label"] = 6;
  price.flops = 12.5e9;
  refused = AdmitRequest(price, limits);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("priced at 12.5 GFLOP"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("limit of 10 GFLOP per request"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("--max_request_gflops"));
}

}  // namespace
}  // namespace docsparse
