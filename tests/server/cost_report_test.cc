#include "server/cost_report.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace docsparse {
namespace {

TEST(CostReportTest, CopiesEveryFigureOfTheAccount) {
  const EncoderShape shape{/*num_layers=*/2, /*num_heads=*/3, /*head_dim=*/4, /*hidden=*/12,
                           /*intermediate=*/24};
  CostAccount account(shape);
  account.AddSequence(5, 8);
  account.AddSequence(3, 8);
  for (int layer = 0; layer < 2; ++layer) account.AddAttention(layer, {{25 + 9, 20, 10}, 0, {}});
  v1::CostReport report;
  FillCostReport(account, AttentionKind::kDense, /*sampled=*/false, &report);
  EXPECT_EQ(report.input_tokens(), 8);
  EXPECT_EQ(report.padded_tokens(), 16);
  EXPECT_EQ(report.windows(), 2);
  EXPECT_EQ(report.attention(), v1::ATTENTION_KIND_DENSE);
  ASSERT_EQ(report.layers_size(), 2);
  EXPECT_EQ(report.layers(1).layer(), 1);
  ASSERT_EQ(report.layers(0).head_density_size(), 3);
  EXPECT_DOUBLE_EQ(report.layers(0).head_density(0), 1.0);
  EXPECT_DOUBLE_EQ(report.layers(0).head_density(2), 10.0 / 34.0);
  EXPECT_EQ(report.layers(0).head_edges(1), 20);
  EXPECT_EQ(report.attention_edges(), account.TotalEdges());
  EXPECT_DOUBLE_EQ(report.mean_density(), account.MeanDensity());
  EXPECT_DOUBLE_EQ(report.attention_flops(), account.AttentionFlops());
  EXPECT_DOUBLE_EQ(report.total_flops(), account.TotalFlops());
  EXPECT_DOUBLE_EQ(report.dense_equivalent_flops(), account.DenseEquivalentFlops());
}

TEST(CostReportTest, DeviceTimeIsInTheMetadataOnlyOnAGpu) {
  v1::CostReport cpu;
  cpu.mutable_timings()->set_inference_ms(12);
  const auto names = [](const v1::CostReport& report) {
    std::map<std::string, std::string> pairs;
    for (auto& [key, value] : CostMetadata(report)) pairs[key] = value;
    return pairs;
  };
  EXPECT_EQ(names(cpu).count("x-docsparse-device-ms"), 0u);
  EXPECT_EQ(names(cpu).at("x-docsparse-inference-ms"), "12.000");
  v1::CostReport gpu = cpu;
  gpu.mutable_timings()->set_device_ms(7.25);
  EXPECT_EQ(names(gpu).at("x-docsparse-device-ms"), "7.250");
  // Windows of one document batched apart: the longest batch's, as for
  // inference_ms.
  v1::CostReport other = gpu;
  other.mutable_timings()->set_device_ms(9.5);
  EXPECT_DOUBLE_EQ(CombineCostReports({&gpu, &other}).timings().device_ms(), 9.5);
}

}  // namespace
}  // namespace docsparse
