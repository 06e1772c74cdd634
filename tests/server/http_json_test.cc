#include "server/http_json.h"

#include <gtest/gtest.h>

#include "server/cost_report.h"

namespace docsparse::http {
namespace {

Json Parse(const std::string& text) { return Json::parse(text); }

TEST(HttpJsonTest, BodyMustBeAJsonObject) {
  EXPECT_TRUE(ParseBody(R"({"inputs": "a"})").ok());
  EXPECT_EQ(ParseBody("{oops").status().message(), "body: is not valid JSON");
  EXPECT_EQ(ParseBody("[1]").status().message(), "body: must be a JSON object, not array");
}

TEST(HttpJsonTest, TextsAreAStringOrANonEmptyBoundedListOfStrings) {
  auto one = ReadTexts(Parse(R"({"inputs": "a"})"), "inputs", 4);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, std::vector<std::string>{"a"});
  auto two = ReadTexts(Parse(R"({"inputs": ["a", "b"]})"), "inputs", 4);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->size(), 2u);
  EXPECT_EQ(ReadTexts(Parse("{}"), "inputs", 4).status().message(), "inputs: is required");
  EXPECT_EQ(ReadTexts(Parse(R"({"inputs": []})"), "inputs", 4).status().message(),
            "inputs: must not be empty");
  EXPECT_EQ(ReadTexts(Parse(R"({"inputs": ["a", 2]})"), "inputs", 4).status().message(),
            "inputs[1]: must be a string, not number");
  EXPECT_EQ(
      ReadTexts(Parse(R"({"inputs": ["a","a","a","a","a"]})"), "inputs", 4).status().message(),
      "inputs: has 5 inputs; at most 4 per request");
}

TEST(HttpJsonTest, CommonFieldsFillTheRequestParts) {
  auto common = ReadCommon(Parse(R"({"model": "m", "truncate": true, "return_mask_map": true,
      "budget": {"max_density": 0.2, "attention": "sbm", "seed": 7, "strict": true},
      "request_id": "r1"})"));
  ASSERT_TRUE(common.ok()) << common.status();
  EXPECT_EQ(common->model, "m");
  EXPECT_EQ(common->options.overflow(), v1::OVERFLOW_TRUNCATE);
  EXPECT_TRUE(common->options.return_mask_map());
  EXPECT_EQ(common->options.request_id(), "r1");
  EXPECT_DOUBLE_EQ(common->budget.max_density(), 0.2);
  EXPECT_EQ(common->budget.attention(), v1::ATTENTION_KIND_SBM);
  EXPECT_EQ(common->budget.seed(), 7u);
  EXPECT_TRUE(common->budget.strict());
  // The proto's enum names work too; overflow wins over truncate.
  auto proto_names = ReadCommon(Parse(
      R"({"budget": {"attention": "ATTENTION_KIND_LSG"}, "truncate": true, "overflow": "chunk"})"));
  ASSERT_TRUE(proto_names.ok());
  EXPECT_EQ(proto_names->budget.attention(), v1::ATTENTION_KIND_LSG);
  EXPECT_EQ(proto_names->options.overflow(), v1::OVERFLOW_CHUNK);
}

TEST(HttpJsonTest, EveryBadFieldIsNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model": 3})", "model: must be a string, not number"},
      {R"({"budget": 1})", "budget: must be an object, not number"},
      {R"({"budget": {"max_density": "x"}})", "budget.max_density: must be a number, not string"},
      {R"({"budget": {"max_density": 0.5, "max_attention_gflops": 2}})",
       "budget: at most one of max_density, max_attention_gflops and edge_regularization"},
      {R"({"budget": {"seed": -1}})", "budget.seed: must be an integer in [0, 2^64)"},
      {R"({"budget": {"strict": "yes"}})", "budget.strict: must be a boolean, not string"},
      {R"({"budget": {"attention": "fancy"}})",
       "budget.attention: \"fancy\" is not one of dense, lsg, sbm, longformer, bigbird, "
       "sparse_transformer, star, lsh, routing, modernbert, etc, union"},
      {R"({"budget": {"densty": 0.1}})",
       "budget: unknown field \"densty\" (known: max_density, max_attention_gflops, "
       "edge_regularization, attention, seed, strict)"},
      // A client's key or value never breaks the "field: problem" form.
      {R"({"budget": {"a: b\nc": 1}})",
       "budget: unknown field \"a: b\\nc\" (known: max_density, max_attention_gflops, "
       "edge_regularization, attention, seed, strict)"},
      {R"({"overflow": "drop"})", "overflow: \"drop\" is not one of reject, truncate, chunk"},
      {R"({"truncate": 1})", "truncate: must be a boolean, not number"},
  };
  for (const auto& [body, message] : cases) {
    SCOPED_TRACE(body);
    const absl::Status status = ReadCommon(Parse(body)).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), message);
  }
}

TEST(HttpJsonTest, IntegersAreBounded) {
  EXPECT_EQ(ReadInteger(Parse(R"({"n": 1.5})"), "n").status().message(),
            "n: must be an integer, not number");
  EXPECT_EQ(ReadInteger(Parse(R"({"n": 99999999999})"), "n").status().message(), "n: is too large");
  EXPECT_EQ(ReadInteger(Parse(R"({"n": -99999999999})"), "n").status().message(),
            "n: is too small");
  EXPECT_EQ(**ReadInteger(Parse(R"({"n": -3})"), "n"), -3);
  EXPECT_FALSE(ReadInteger(Parse(R"({"n": null})"), "n")->has_value());
}

TEST(HttpJsonTest, CostJsonUsesProtoNamesAndNumbersFor64BitIntegers) {
  v1::CostReport cost;
  cost.set_input_tokens(6842);
  cost.set_attention(v1::ATTENTION_KIND_LSG);
  cost.set_mean_density(0.09);
  cost.set_attention_edges(int64_t{1} << 40);
  cost.mutable_knobs()->set_seed(uint64_t{1} << 63);
  cost.add_layers()->add_head_edges(12);
  const Json json = CostJson(cost);
  EXPECT_EQ(json["input_tokens"], 6842);
  EXPECT_EQ(json["attention_edges"], int64_t{1} << 40);
  EXPECT_EQ(json["knobs"]["seed"], uint64_t{1} << 63);
  EXPECT_EQ(json["layers"][0]["head_edges"][0], 12);
  EXPECT_EQ(json["attention"], "ATTENTION_KIND_LSG");
  EXPECT_EQ(json["budget_met"], false);  // defaults are printed too
  EXPECT_EQ(AttentionName(v1::ATTENTION_KIND_SPARSE_TRANSFORMER), "sparse_transformer");
}

TEST(HttpJsonTest, DocumentErrorsAreRetoldAboutTheHttpField) {
  EXPECT_EQ(RenameDocumentField(absl::InvalidArgumentError("document.text: empty"), "inputs[2]")
                .message(),
            "inputs[2]: empty");
  EXPECT_EQ(RenameDocumentField(absl::InvalidArgumentError("budget: bad"), "inputs").message(),
            "budget: bad");
}

TEST(CostReportTest, CombinedReportsSumFlopsAndAverageDensity) {
  v1::CostReport a;
  a.set_input_tokens(10);
  a.set_total_flops(1e9);
  a.set_mean_density(0.2);
  a.set_budget_met(true);
  a.set_batch_size(2);
  a.mutable_timings()->set_total_ms(5);
  v1::CostReport b = a;
  b.set_input_tokens(30);
  b.set_mean_density(0.4);
  b.set_budget_met(false);
  b.set_batch_size(3);
  b.mutable_timings()->set_total_ms(9);
  const v1::CostReport combined = CombineCostReports({&a, &b});
  EXPECT_EQ(combined.input_tokens(), 40);
  EXPECT_DOUBLE_EQ(combined.total_flops(), 2e9);
  EXPECT_DOUBLE_EQ(combined.mean_density(), 0.3);
  EXPECT_FALSE(combined.budget_met());
  EXPECT_EQ(combined.batch_size(), 3);
  EXPECT_DOUBLE_EQ(combined.timings().total_ms(), 9);
}

}  // namespace
}  // namespace docsparse::http
