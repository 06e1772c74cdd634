// The CUDA fastRG sampler against the CPU planner's row process, run on the
// host with the same primitives (kernels/sbm_sampling.h): for the same tables
// and head key, the same distinct edges per row and the same number of copies.
// Rows of every kind: no copies (λ = 0), few (Poisson by search, λ < 10),
// many (PTRS, λ >= 10), and dense ones whose copies repeat keys.
#include "kernels/sbm_fastrg_cuda.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "kernels/sbm_sampling.h"
#include "tests/cuda/device_buffer.h"

namespace docsparse {
namespace {

using test::DeviceBuffer;

struct HeadTables {
  int32_t tokens, clusters;
  std::vector<double> row_rate;
  std::vector<float> row_profile;
  std::vector<double> key_mass;
  std::vector<AliasTable> key_alias;
};

// Random memberships: R = Q̂ S per row (some rows zero), K̂ per key and
// cluster; κ_b = Σ_j K̂_jb and λ_i = Σ_b R_ib κ_b as the planner computes them.
HeadTables MakeTables(int32_t tokens, int32_t clusters, double rate_scale, uint32_t seed) {
  HeadTables t{tokens, clusters, {}, {}, {}, {}};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(0, 1);
  std::vector<float> key_membership(static_cast<size_t>(clusters) * tokens);  // [k, n]
  for (float& x : key_membership) x = uniform(rng) < 0.3f ? 0.0f : uniform(rng);
  t.key_mass.assign(clusters, 0.0);
  AliasScratch scratch;
  for (int b = 0; b < clusters; ++b) {
    for (int j = 0; j < tokens; ++j) t.key_mass[b] += key_membership[b * tokens + j];
    t.key_alias.emplace_back();
    t.key_alias.back().Build(key_membership.data() + b * tokens, tokens, &scratch);
  }
  t.row_profile.resize(static_cast<size_t>(tokens) * clusters);
  t.row_rate.assign(tokens, 0.0);
  for (int i = 0; i < tokens; ++i) {
    const bool empty = i % 17 == 3;
    const float row_scale = static_cast<float>(rate_scale) * (i % 5 == 0 ? 8.0f : 1.0f);
    for (int b = 0; b < clusters; ++b) {
      float& r = t.row_profile[static_cast<size_t>(i) * clusters + b];
      r = empty ? 0.0f : uniform(rng) * row_scale / static_cast<float>(tokens);
      t.row_rate[i] += static_cast<double>(r) * t.key_mass[b];
    }
  }
  return t;
}

// SbmHeadSampler::SampleRow's process for every row, on the host.
std::vector<std::set<int32_t>> HostSample(const HeadTables& t, uint64_t head_key,
                                          int64_t* copies_total) {
  std::vector<std::set<int32_t>> rows(t.tokens);
  *copies_total = 0;
  for (int32_t i = 0; i < t.tokens; ++i) {
    CounterRng rng(DeriveKey(head_key, static_cast<uint64_t>(i)));
    const int64_t copies = SamplePoisson(t.row_rate[i], rng);
    *copies_total += copies;
    std::vector<float> cumulative(t.clusters);
    float total = 0;
    int32_t last_positive = 0;
    for (int b = 0; b < t.clusters; ++b) {
      const float weight = static_cast<float>(
          t.row_profile[static_cast<size_t>(i) * t.clusters + b] * t.key_mass[b]);
      total += weight;
      cumulative[b] = total;
      if (weight > 0) last_positive = b;
    }
    const float scale = total * 0x1.0p-32f;
    for (int64_t c = 0; c < copies; ++c) {
      const uint64_t bits = rng.Next();
      const float x = static_cast<float>(static_cast<uint32_t>(bits >> 32)) * scale;
      int32_t b = 0;
      for (int k = 0; k < t.clusters; ++k) b += cumulative[k] <= x;
      b = std::min(b, last_positive);
      rows[i].insert(t.key_alias[b].Draw(static_cast<uint32_t>(bits)));
    }
  }
  return rows;
}

struct DeviceTables {
  explicit DeviceTables(const HeadTables& t)
      : rate(t.row_rate), profile(t.row_profile), mass(t.key_mass), alias([&] {
          std::vector<AliasEntry> all;
          for (const AliasTable& table : t.key_alias) {
            all.insert(all.end(), table.entries(), table.entries() + table.size());
          }
          return all;
        }()) {}
  SbmHeadTablesView View(const HeadTables& t) const {
    return {t.tokens, t.clusters, rate.get(), profile.get(), mass.get(), alias.get()};
  }
  DeviceBuffer<double> rate;
  DeviceBuffer<float> profile;
  DeviceBuffer<double> mass;
  DeviceBuffer<AliasEntry> alias;
};

void ExpectSameEdgesAsHost(const HeadTables& t, uint64_t head_key) {
  int64_t host_copies = 0;
  const std::vector<std::set<int32_t>> want = HostSample(t, head_key, &host_copies);
  const DeviceTables device(t);
  SbmDeviceEdges edges;
  ASSERT_EQ(SampleSbmHeadCuda(device.View(t), head_key, nullptr, &edges), cudaSuccess);
  std::vector<int64_t> offsets(t.tokens + 1);
  std::vector<int32_t> keys(edges.edges);
  ASSERT_EQ(cudaMemcpy(offsets.data(), edges.row_offsets, sizeof(int64_t) * offsets.size(),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  if (edges.edges > 0) {
    ASSERT_EQ(
        cudaMemcpy(keys.data(), edges.keys, sizeof(int32_t) * keys.size(), cudaMemcpyDeviceToHost),
        cudaSuccess);
  }
  FreeSbmDeviceEdges(&edges, nullptr);
  int64_t distinct = 0;
  for (const auto& row : want) distinct += static_cast<int64_t>(row.size());
  ASSERT_EQ(offsets[t.tokens], distinct);
  for (int32_t i = 0; i < t.tokens; ++i) {
    const std::vector<int32_t> got(keys.begin() + offsets[i], keys.begin() + offsets[i + 1]);
    ASSERT_EQ(got, std::vector<int32_t>(want[i].begin(), want[i].end())) << "row " << i;
  }
  EXPECT_GT(host_copies, distinct);  // dense rows repeated keys, deduplicated
}

TEST(SbmFastRgCudaTest, SameEdgesAsTheCpuProcessForTheSameKey) {
  DOCSPARSE_SKIP_WITHOUT_GPU();
  // λ up to ~40 (PTRS) on every fifth row, below 10 (search) elsewhere.
  ExpectSameEdgesAsHost(MakeTables(2000, 5, 5.0, 1), 0x1234);
  ExpectSameEdgesAsHost(MakeTables(2000, 5, 5.0, 1), 0x1235);
  // Dense rows: λ of hundreds over 300 keys.
  ExpectSameEdgesAsHost(MakeTables(300, 3, 60.0, 2), 7);
  ExpectSameEdgesAsHost(MakeTables(37, 64, 2.0, 3), 9);
}

TEST(SbmFastRgCudaTest, CopiesCountedBeforeDeduplication) {
  DOCSPARSE_SKIP_WITHOUT_GPU();
  const HeadTables t = MakeTables(500, 4, 30.0, 4);
  int64_t host_copies = 0;
  HostSample(t, 5, &host_copies);
  const DeviceTables device(t);
  SbmDeviceEdges edges;
  ASSERT_EQ(SampleSbmHeadCuda(device.View(t), 5, nullptr, &edges), cudaSuccess);
  EXPECT_EQ(edges.multigraph_edges, host_copies);
  EXPECT_LT(edges.edges, host_copies);
  FreeSbmDeviceEdges(&edges, nullptr);
}

TEST(SbmFastRgCudaTest, TablesItDoesNotTakeAreRefused) {
  SbmHeadTablesView view{10, 0, nullptr, nullptr, nullptr, nullptr};
  SbmDeviceEdges edges;
  EXPECT_EQ(SampleSbmHeadCuda(view, 1, nullptr, &edges), cudaErrorInvalidValue);
  view.clusters = kSbmMaxClusters + 1;
  EXPECT_EQ(SampleSbmHeadCuda(view, 1, nullptr, &edges), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace docsparse
