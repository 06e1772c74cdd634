// sbm.safetensors: round trip, the block matrix, and errors that name the
// tensor and the file.
#include "model/attention/sbm_parameters.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "model/checkpoint/safetensors_writer.h"

namespace docsparse {
namespace {

class SbmParametersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sbm_parameters_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes the tensors of `parameters`, with `edit` applied to the list.
  std::string WriteEdited(const SbmParameters& parameters,
                          const std::function<void(std::vector<TensorBytes>*)>& edit) {
    std::vector<TensorBytes> tensors;
    std::vector<at::Tensor> keep;
    for (int i = 0; i < parameters.num_layers(); ++i) {
      const SbmLayerParameters& layer = parameters.layer(i);
      const std::pair<const char*, const at::Tensor*> fields[] = {
          {"mlp.0.weight", &layer.mlp_in_weight},
          {"mlp.0.bias", &layer.mlp_in_bias},
          {"mlp.2.weight", &layer.mlp_out_weight},
          {"mlp.2.bias", &layer.mlp_out_bias},
          {"clusters", &layer.clusters}};
      for (const auto& [suffix, tensor] : fields) {
        tensors.push_back({SbmParameters::TensorName(i, suffix), DType::kF32, tensor->sizes().vec(),
                           static_cast<const uint8_t*>(tensor->data_ptr()),
                           static_cast<size_t>(tensor->nbytes())});
      }
    }
    edit(&tensors);
    const std::string path = Path("edited.safetensors");
    EXPECT_TRUE(WriteSafetensorsFile(path, tensors, {}).ok());
    return path;
  }

  std::filesystem::path dir_;
};

const EncoderShape kShape{2, 3, 8, 24, 96};

TEST_F(SbmParametersTest, SaveLoadRoundTrip) {
  const auto original = SbmParameters::Random(2, 3, 8, 5, 42);
  ASSERT_TRUE(original->Save(Path(SbmParameters::kFileName)).ok());
  auto loaded = SbmParameters::LoadFromModelDir(dir_.string(), kShape);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const SbmParameters& p = **loaded;
  EXPECT_EQ(p.num_layers(), 2);
  EXPECT_EQ(p.num_heads(), 3);
  EXPECT_EQ(p.head_dim(), 8);
  EXPECT_EQ(p.num_clusters(), 5);
  EXPECT_EQ(p.metadata().at("format"), SbmParameters::kFormat);
  EXPECT_EQ(p.metadata().at("calibrated"), "false");
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(at::equal(p.layer(i).clusters, original->layer(i).clusters));
    EXPECT_TRUE(at::equal(p.layer(i).mlp_out_weight, original->layer(i).mlp_out_weight));
    EXPECT_EQ(p.block_matrix(i), original->block_matrix(i));
  }
}

TEST_F(SbmParametersTest, RandomIsDeterministicInItsSeed) {
  const auto a = SbmParameters::Random(1, 2, 4, 3, 7);
  const auto b = SbmParameters::Random(1, 2, 4, 3, 7);
  const auto c = SbmParameters::Random(1, 2, 4, 3, 8);
  EXPECT_TRUE(at::equal(a->layer(0).clusters, b->layer(0).clusters));
  EXPECT_FALSE(at::equal(a->layer(0).clusters, c->layer(0).clusters));
}

TEST_F(SbmParametersTest, BlockMatrixIsSoftmaxOverAllEntries) {
  const auto p = SbmParameters::Random(1, 2, 4, 3, 9);
  const at::Tensor c = p->layer(0).clusters.to(at::kDouble);
  for (int h = 0; h < 2; ++h) {
    const at::Tensor want = at::softmax(at::matmul(c[h], c[h].t()).flatten(), 0);
    double total = 0;
    for (int i = 0; i < 9; ++i) {
      EXPECT_NEAR(p->block_matrix(0)[h * 9 + i], want[i].item<double>(), 1e-12);
      total += p->block_matrix(0)[h * 9 + i];
    }
    EXPECT_NEAR(total, 1, 1e-12);
  }
}

TEST_F(SbmParametersTest, MissingFileIsNotFound) {
  auto loaded = SbmParameters::LoadFromModelDir(dir_.string(), kShape);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find("sbm.safetensors"), std::string::npos);
}

TEST_F(SbmParametersTest, MissingTensorIsNamed) {
  const auto p = SbmParameters::Random(2, 3, 8, 5, 1);
  const std::string path = WriteEdited(*p, [](std::vector<TensorBytes>* tensors) {
    tensors->erase(tensors->begin() + 7);  // layers.1.mlp.2.weight
  });
  auto loaded = SbmParameters::Load(path, kShape);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find("'layers.1.mlp.2.weight'"), std::string::npos)
      << loaded.status();
  EXPECT_NE(loaded.status().message().find(path), std::string::npos);
}

TEST_F(SbmParametersTest, WrongShapesAreNamed) {
  const auto p = SbmParameters::Random(2, 3, 8, 5, 1);
  // The model has 4 heads, the file 3.
  const std::string path = Path("p.safetensors");
  ASSERT_TRUE(p->Save(path).ok());
  auto loaded = SbmParameters::Load(path, EncoderShape{2, 4, 8, 32, 96});
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find("layers.0.clusters"), std::string::npos);
  // A bias of the wrong length.
  const std::vector<float> short_bias(7, 0.0f);
  const std::string edited = WriteEdited(*p, [&](std::vector<TensorBytes>* tensors) {
    (*tensors)[1].shape = {7};
    (*tensors)[1].data = reinterpret_cast<const uint8_t*>(short_bias.data());
    (*tensors)[1].nbytes = 7 * sizeof(float);
  });
  loaded = SbmParameters::Load(edited, kShape);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find("layers.0.mlp.0.bias"), std::string::npos)
      << loaded.status();
  // More layers than the model.
  loaded = SbmParameters::Load(path, EncoderShape{1, 3, 8, 24, 96});
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find("layers.1.clusters"), std::string::npos);
}

TEST_F(SbmParametersTest, NonFiniteValuesAreRefused) {
  const auto p = SbmParameters::Random(1, 1, 2, 2, 1);
  std::vector<SbmLayerParameters> layers = {p->layer(0)};
  layers[0].clusters = layers[0].clusters.clone();
  layers[0].clusters[0][1][0] = NAN;
  auto created = SbmParameters::Create(std::move(layers));
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(created.status().message().find("layers.0.clusters"), std::string::npos);
}

}  // namespace
}  // namespace docsparse
