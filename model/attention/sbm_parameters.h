// The per-layer parameters of SBM attention (DESIGN.md, "SBM, precisely";
// Cho et al., NeurIPS 2022): a 2-layer MLP d_h -> d_h -> d_h with ReLU,
// shared by the heads of a layer, and per-head cluster embeddings C [k, d_h].
//
// On disk they live in `sbm.safetensors` beside a checkpoint, written by
// `docsparse-convert sbm`. Tensor names (layer i from 0; the MLP indices are
// those of the reference's nn.Sequential(Linear, ReLU, Linear)):
//   layers.{i}.mlp.0.weight  [d_h, d_h]   first Linear, y = x Wᵀ + b
//   layers.{i}.mlp.0.bias    [d_h]
//   layers.{i}.mlp.2.weight  [d_h, d_h]   second Linear
//   layers.{i}.mlp.2.bias    [d_h]
//   layers.{i}.clusters      [heads, k, d_h]
// dtype F32 (F16/BF16/F64 are accepted and converted). `__metadata__` holds
// "format": "docsparse-sbm" plus free-form calibration facts (clusters,
// lambda, steps, corpus...). Every layer has the same k.
#ifndef DOCSPARSE_MODEL_ATTENTION_SBM_PARAMETERS_H_
#define DOCSPARSE_MODEL_ATTENTION_SBM_PARAMETERS_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/attention/cost_model.h"

namespace docsparse {

struct SbmLayerParameters {
  at::Tensor mlp_in_weight;   // [d_h, d_h]
  at::Tensor mlp_in_bias;     // [d_h]
  at::Tensor mlp_out_weight;  // [d_h, d_h]
  at::Tensor mlp_out_bias;    // [d_h]
  at::Tensor clusters;        // [heads, k, d_h]
};

// Immutable after creation; shared by every SBM attention of a model, so all
// methods are thread-safe.
class SbmParameters {
 public:
  static constexpr const char* kFileName = "sbm.safetensors";
  static constexpr const char* kFormat = "docsparse-sbm";

  // Validates and takes `layers` (float32 CPU tensors of the shapes above;
  // copied to contiguous float32). INVALID_ARGUMENT naming the layer and the
  // tensor for a wrong rank or shape, a k that differs between layers, or a
  // non-finite value.
  static absl::StatusOr<std::shared_ptr<const SbmParameters>> Create(
      std::vector<SbmLayerParameters> layers, std::map<std::string, std::string> metadata = {});

  // Reads `path` (a sbm.safetensors file) and checks it against the encoder
  // it will serve: `shape.num_layers` layers, `shape.num_heads` heads and
  // `shape.head_dim`. Errors name the file and the tensor (NOT_FOUND for a
  // missing file or tensor, INVALID_ARGUMENT for a wrong shape, dtype or
  // value).
  static absl::StatusOr<std::shared_ptr<const SbmParameters>> Load(const std::string& path,
                                                                   const EncoderShape& shape);
  // Load(model_dir + "/" + kFileName, shape).
  static absl::StatusOr<std::shared_ptr<const SbmParameters>> LoadFromModelDir(
      const std::string& model_dir, const EncoderShape& shape);

  // The reference's initialisation, deterministic in `seed`: each Linear as
  // torch.nn.Linear (uniform ±1/√d_h for weight and bias), clusters
  // kaiming-normal (std √(2/(k·d_h))). Memberships then sit near 1/2 and the
  // natural density near 1 - e^(-1/4) ≈ 22%: an uncalibrated model.
  static std::shared_ptr<const SbmParameters> Random(int num_layers, int num_heads, int head_dim,
                                                     int num_clusters, uint64_t seed);

  // Writes the parameters and metadata to `path` (atomically, see
  // WriteSafetensorsFile).
  absl::Status Save(const std::string& path) const;

  int num_layers() const { return static_cast<int>(layers_.size()); }
  int num_heads() const { return num_heads_; }
  int head_dim() const { return head_dim_; }
  int num_clusters() const { return num_clusters_; }
  const SbmLayerParameters& layer(int i) const { return layers_[i]; }
  // S = softmax over all k² entries of C·Cᵀ, per head, computed once in
  // double: [heads, k, k] row-major.
  const std::vector<double>& block_matrix(int layer) const { return blocks_[layer]; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // "layers.{layer}.{suffix}", the on-disk name.
  static std::string TensorName(int layer, const std::string& suffix);

  struct PrivateTag {
    explicit PrivateTag() = default;
  };
  SbmParameters(PrivateTag, std::vector<SbmLayerParameters> layers,
                std::map<std::string, std::string> metadata);

 private:
  std::vector<SbmLayerParameters> layers_;
  std::vector<std::vector<double>> blocks_;
  std::map<std::string, std::string> metadata_;
  int num_heads_ = 0;
  int head_dim_ = 0;
  int num_clusters_ = 0;
};

// S for one head's clusters [k, d_h]: softmax over all k² entries of C·Cᵀ,
// written to `block` [k, k].
void SbmBlockMatrix(const float* clusters, int num_clusters, int head_dim, double* block);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_SBM_PARAMETERS_H_
