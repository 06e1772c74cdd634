#include "server/kserve_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace docsparse {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

inference::ModelInferRequest TextRequest(const std::vector<std::string>& texts) {
  inference::ModelInferRequest request;
  request.set_model_name("minilm");
  auto* input = request.add_inputs();
  input->set_name("text");
  input->set_datatype("BYTES");
  input->add_shape(static_cast<int64_t>(texts.size()));
  for (const std::string& text : texts) input->mutable_contents()->add_bytes_contents(text);
  return request;
}

std::string ErrorOf(const inference::ModelInferRequest& request) {
  absl::StatusOr<KServeInferCall> call = ParseKServeInferRequest(request);
  EXPECT_FALSE(call.ok());
  EXPECT_EQ(call.status().code(), absl::StatusCode::kInvalidArgument) << call.status();
  return std::string(call.status().message());
}

TEST(KServeRequestTest, RawBytesRoundTrip) {
  const std::vector<std::string> elements = {"abc", "", std::string("\0\xff", 2)};
  const std::string raw = EncodeRawBytesTensor(elements);
  EXPECT_EQ(raw.substr(0, 4), std::string("\x03\0\0\0", 4));  // little-endian length
  absl::StatusOr<std::vector<std::string>> decoded = DecodeRawBytesTensor(raw, "raw");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, elements);
}

TEST(KServeRequestTest, RawBytesRejectsTruncation) {
  const std::string raw = EncodeRawBytesTensor({"abcd"});
  EXPECT_THAT(std::string(DecodeRawBytesTensor(raw.substr(0, 6), "f").status().message()),
              HasSubstr("f: element 0 claims 4 bytes but 2 remain"));
  EXPECT_THAT(std::string(DecodeRawBytesTensor(raw + "\x01", "f").status().message()),
              HasSubstr("truncated 4-byte length prefix"));
}

TEST(KServeRequestTest, DefaultsToEmbeddingAndTypedContents) {
  absl::StatusOr<KServeInferCall> call = ParseKServeInferRequest(TextRequest({"a", "b"}));
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_THAT(call->texts, ElementsAre("a", "b"));
  EXPECT_FALSE(call->raw);
  EXPECT_THAT(call->outputs, ElementsAre("embedding"));
  EXPECT_EQ(call->budget.cap_case(), v1::SparsityBudget::CAP_NOT_SET);
}

TEST(KServeRequestTest, RawInputContents) {
  inference::ModelInferRequest request = TextRequest({});
  request.mutable_inputs(0)->set_shape(0, 2);
  request.add_raw_input_contents(EncodeRawBytesTensor({"one", "two"}));
  absl::StatusOr<KServeInferCall> call = ParseKServeInferRequest(request);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_TRUE(call->raw);
  EXPECT_THAT(call->texts, ElementsAre("one", "two"));

  request.mutable_inputs(0)->mutable_contents()->add_bytes_contents("x");
  EXPECT_THAT(ErrorOf(request), HasSubstr("inputs[0].contents: must be empty"));
}

TEST(KServeRequestTest, BudgetAndOptionParameters) {
  inference::ModelInferRequest request = TextRequest({"a"});
  request.set_id("req-1");
  auto& parameters = *request.mutable_parameters();
  parameters["max_density"].set_int64_param(1);
  parameters["strict"].set_bool_param(true);
  parameters["overflow"].set_string_param("Truncate");
  parameters["labels"].set_string_param(" software license ,recipe");
  parameters["seed"].set_uint64_param(7);
  parameters["pooling"].set_string_param("cls");
  absl::StatusOr<KServeInferCall> call = ParseKServeInferRequest(request);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->budget.max_density(), 1.0);
  EXPECT_TRUE(call->budget.strict());
  EXPECT_EQ(call->budget.seed(), 7u);
  EXPECT_EQ(call->options.overflow(), v1::OVERFLOW_TRUNCATE);
  EXPECT_EQ(call->options.request_id(), "req-1");
  EXPECT_EQ(call->pooling, v1::POOLING_CLS);
  EXPECT_THAT(call->labels, ElementsAre("software license", "recipe"));
}

// KServe's own client (InferenceGRPCClient) sends bool, int64 and string
// parameters only: numbers as strings must work.
TEST(KServeRequestTest, NumbersAndBoolsAsStringsForKServeClients) {
  inference::ModelInferRequest request = TextRequest({"a"});
  auto& parameters = *request.mutable_parameters();
  parameters["max_density"].set_string_param(" 0.2 ");
  parameters["strict"].set_string_param("True");
  parameters["seed"].set_string_param("18446744073709551615");
  parameters["temperature"].set_string_param("0.05");
  absl::StatusOr<KServeInferCall> call = ParseKServeInferRequest(request);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_DOUBLE_EQ(call->budget.max_density(), 0.2);
  EXPECT_TRUE(call->budget.strict());
  EXPECT_EQ(call->budget.seed(), 18446744073709551615u);
  ASSERT_TRUE(call->temperature.has_value());
  EXPECT_FLOAT_EQ(*call->temperature, 0.05f);

  request = TextRequest({"a"});
  (*request.mutable_parameters())["edge_regularization"].set_string_param("1.5e0");
  call = ParseKServeInferRequest(request);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_DOUBLE_EQ(call->budget.edge_regularization(), 1.5);
}

TEST(KServeRequestTest, ParameterErrorsNameTheField) {
  inference::ModelInferRequest request = TextRequest({"a"});
  (*request.mutable_parameters())["max_density"].set_string_param("half");
  EXPECT_EQ(ErrorOf(request), "parameters.max_density: 'half' is not a finite number");

  request = TextRequest({"a"});
  (*request.mutable_parameters())["max_density"].set_string_param("nan");
  EXPECT_EQ(ErrorOf(request), "parameters.max_density: 'nan' is not a finite number");

  request = TextRequest({"a"});
  (*request.mutable_parameters())["max_density"].set_bool_param(true);
  EXPECT_EQ(ErrorOf(request),
            "parameters.max_density: expected a double, an int64 or a numeric string");

  request = TextRequest({"a"});
  (*request.mutable_parameters())["strict"].set_string_param("maybe");
  EXPECT_THAT(ErrorOf(request), HasSubstr("parameters.strict: expected a bool"));

  request = TextRequest({"a"});
  (*request.mutable_parameters())["seed"].set_string_param("-3");
  EXPECT_THAT(ErrorOf(request), HasSubstr("parameters.seed: expected a non-negative"));

  request = TextRequest({"a"});
  (*request.mutable_parameters())["max_density"].set_double_param(0.5);
  (*request.mutable_parameters())["max_attention_gflops"].set_double_param(1);
  EXPECT_THAT(ErrorOf(request), HasSubstr("at most one of"));

  request = TextRequest({"a"});
  (*request.mutable_parameters())["labels"].set_string_param("a,,b");
  EXPECT_EQ(ErrorOf(request), "parameters.labels: label 1 is empty");

  request = TextRequest({"a"});
  (*request.mutable_parameters())["overflow"].set_string_param("spill");
  EXPECT_THAT(ErrorOf(request), HasSubstr("parameters.overflow: 'spill' is not one of"));

  request = TextRequest({"a"});
  (*request.mutable_parameters())["attention"].set_string_param("bogus");
  EXPECT_THAT(ErrorOf(request), HasSubstr("parameters.attention"));

  request = TextRequest({"a"});
  (*request.mutable_parameters())["colour"].set_string_param("red");
  EXPECT_THAT(ErrorOf(request), HasSubstr("parameters.colour: unknown parameter"));
}

TEST(KServeRequestTest, InputErrorsNameTheField) {
  inference::ModelInferRequest request = TextRequest({"a"});
  request.mutable_inputs(0)->set_datatype("FP32");
  EXPECT_EQ(ErrorOf(request), "inputs[0].datatype: expected BYTES, got 'FP32'");

  request = TextRequest({"a"});
  request.clear_inputs();
  EXPECT_EQ(ErrorOf(request), "inputs: missing input 'text'");

  request = TextRequest({"a"});
  request.mutable_inputs(0)->set_shape(0, 2);
  EXPECT_THAT(ErrorOf(request), HasSubstr("inputs[0].contents.bytes_contents: 1 elements"));

  request = TextRequest({"a"});
  request.mutable_inputs(0)->add_shape(3);
  EXPECT_THAT(ErrorOf(request), HasSubstr("inputs[0].shape: expected [N] or [N, 1]"));

  request = TextRequest({});
  request.mutable_inputs(0)->set_shape(0, 0);
  EXPECT_EQ(ErrorOf(request), "inputs[0].shape: no documents");

  request = TextRequest({"a"});
  request.add_raw_input_contents("x");
  request.add_raw_input_contents("y");
  EXPECT_THAT(ErrorOf(request), HasSubstr("raw_input_contents: 2 entries for 1 inputs"));

  request = TextRequest({"a"});
  request.add_outputs()->set_name("scores");
  request.add_outputs()->set_name("scores");
  EXPECT_THAT(ErrorOf(request), HasSubstr("outputs[1].name: output 'scores' requested twice"));
}

TEST(KServeRequestTest, Fp32OutputsRawAreLittleEndian) {
  inference::ModelInferResponse response;
  AddFp32Output("embedding", {1, 2}, {1.0f, -2.0f}, /*raw=*/true, &response);
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_EQ(response.raw_output_contents(0), std::string("\0\0\x80\x3f\0\0\0\xc0", 8));
  EXPECT_EQ(response.outputs(0).contents().fp32_contents_size(), 0);
  EXPECT_THAT(response.outputs(0).shape(), ElementsAre(1, 2));

  inference::ModelInferResponse typed;
  AddFp32Output("scores", {1, 2}, {0.25f, 0.75f}, /*raw=*/false, &typed);
  EXPECT_EQ(typed.raw_output_contents_size(), 0);
  EXPECT_THAT(typed.outputs(0).contents().fp32_contents(), ElementsAre(0.25f, 0.75f));
  EXPECT_EQ(typed.outputs(0).datatype(), "FP32");
}

TEST(KServeRequestTest, CostTotalsWeightDensityByPairs) {
  KServeCostTotals totals;
  v1::CostReport a;
  a.set_attention_edges(100);
  a.set_mean_density(1.0);  // 100 dense pairs
  a.set_attention_flops(2e9);
  a.set_budget_met(true);
  v1::CostReport b;
  b.set_attention_edges(100);
  b.set_mean_density(0.25);  // 400 dense pairs
  b.set_attention_flops(1e9);
  b.set_budget_met(false);
  totals.Add(a);
  totals.Add(b);
  inference::ModelInferResponse response;
  totals.WriteParameters(&response);
  EXPECT_DOUBLE_EQ(response.parameters().at("density").double_param(), 200.0 / 500.0);
  EXPECT_DOUBLE_EQ(response.parameters().at("attention_gflops").double_param(), 3.0);
  EXPECT_FALSE(response.parameters().at("budget_met").bool_param());
  // Every figure also as JSON in a string, which KServe's client keeps.
  const std::string cost = response.parameters().at("cost").string_param();
  EXPECT_THAT(cost, HasSubstr("\"attention_edges\":\"200\""));
  EXPECT_THAT(cost, HasSubstr("\"mean_density\":0.4"));
  EXPECT_THAT(cost, HasSubstr("\"attention_flops\":3000000000"));
  EXPECT_THAT(cost, HasSubstr("\"budget_met\":false"));
}

}  // namespace
}  // namespace docsparse
