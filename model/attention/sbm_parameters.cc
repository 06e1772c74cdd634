#include "model/attention/sbm_parameters.h"

#include <c10/util/Exception.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "kernels/sbm_sampling.h"
#include "model/checkpoint/safetensors.h"
#include "model/checkpoint/safetensors_writer.h"

namespace docsparse {
namespace {

constexpr const char* kSuffixes[] = {"mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias",
                                     "clusters"};

std::vector<at::Tensor*> Fields(SbmLayerParameters& layer) {
  return {&layer.mlp_in_weight, &layer.mlp_in_bias, &layer.mlp_out_weight, &layer.mlp_out_bias,
          &layer.clusters};
}

std::string ShapeText(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// Copies a (possibly unaligned, read-only) float tensor out of the mapping.
absl::StatusOr<at::Tensor> ReadFloat(const SafetensorsFile& file, const std::string& name) {
  const TensorView* view = file.Find(name);
  if (view == nullptr) {
    return absl::NotFoundError(absl::StrCat(file.source_name(), ": tensor '", name, "' not found"));
  }
  at::ScalarType dtype;
  switch (view->dtype) {
    case DType::kF32:
      dtype = at::kFloat;
      break;
    case DType::kF16:
      dtype = at::kHalf;
      break;
    case DType::kBF16:
      dtype = at::kBFloat16;
      break;
    case DType::kF64:
      dtype = at::kDouble;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(file.source_name(), ": tensor '", name,
                                                     "' has non-float dtype ",
                                                     std::string(DTypeName(view->dtype))));
  }
  at::Tensor tensor = at::empty(view->shape, at::TensorOptions().dtype(dtype));
  if (view->nbytes > 0) std::memcpy(tensor.data_ptr(), view->data, view->nbytes);
  return tensor.to(at::kFloat);
}

// Box-Muller on the counter-based generator, so Random() does not depend on
// torch's generator (or its version).
void FillNormal(at::Tensor& tensor, double stddev, CounterRng& rng) {
  float* data = tensor.data_ptr<float>();
  for (int64_t i = 0; i < tensor.numel(); ++i) {
    const double u = 1 - rng.Uniform();  // (0, 1]
    const double v = rng.Uniform();
    data[i] = static_cast<float>(stddev * std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * v));
  }
}

void FillUniform(at::Tensor& tensor, double bound, CounterRng& rng) {
  float* data = tensor.data_ptr<float>();
  for (int64_t i = 0; i < tensor.numel(); ++i) {
    data[i] = static_cast<float>((2 * rng.Uniform() - 1) * bound);
  }
}

}  // namespace

void SbmBlockMatrix(const float* clusters, int num_clusters, int head_dim, double* block) {
  const int k = num_clusters;
  double max_logit = -HUGE_VAL;
  for (int a = 0; a < k; ++a) {
    for (int b = 0; b < k; ++b) {
      double dot = 0;
      for (int d = 0; d < head_dim; ++d) {
        dot += static_cast<double>(clusters[a * head_dim + d]) * clusters[b * head_dim + d];
      }
      block[a * k + b] = dot;
      max_logit = std::max(max_logit, dot);
    }
  }
  double total = 0;
  for (int i = 0; i < k * k; ++i) total += (block[i] = std::exp(block[i] - max_logit));
  for (int i = 0; i < k * k; ++i) block[i] /= total;
}

std::string SbmParameters::TensorName(int layer, const std::string& suffix) {
  return absl::StrCat("layers.", layer, ".", suffix);
}

SbmParameters::SbmParameters(PrivateTag, std::vector<SbmLayerParameters> layers,
                             std::map<std::string, std::string> metadata)
    : layers_(std::move(layers)), metadata_(std::move(metadata)) {
  num_heads_ = static_cast<int>(layers_[0].clusters.size(0));
  num_clusters_ = static_cast<int>(layers_[0].clusters.size(1));
  head_dim_ = static_cast<int>(layers_[0].clusters.size(2));
  for (const SbmLayerParameters& layer : layers_) {
    std::vector<double> block(static_cast<size_t>(num_heads_) * num_clusters_ * num_clusters_);
    const float* clusters = layer.clusters.data_ptr<float>();
    for (int h = 0; h < num_heads_; ++h) {
      SbmBlockMatrix(clusters + static_cast<int64_t>(h) * num_clusters_ * head_dim_, num_clusters_,
                     head_dim_,
                     block.data() + static_cast<size_t>(h) * num_clusters_ * num_clusters_);
    }
    blocks_.push_back(std::move(block));
  }
}

absl::StatusOr<std::shared_ptr<const SbmParameters>> SbmParameters::Create(
    std::vector<SbmLayerParameters> layers, std::map<std::string, std::string> metadata) {
  if (layers.empty()) return absl::InvalidArgumentError("SBM parameters: no layers");
  int64_t heads = -1, k = -1, d = -1;
  for (size_t i = 0; i < layers.size(); ++i) {
    std::vector<at::Tensor*> fields = Fields(layers[i]);
    for (size_t f = 0; f < fields.size(); ++f) {
      const std::string name = TensorName(static_cast<int>(i), kSuffixes[f]);
      at::Tensor& tensor = *fields[f];
      if (!tensor.defined()) return absl::InvalidArgumentError(absl::StrCat(name, ": missing"));
      // A private copy: callers (calibration) keep training their tensors.
      tensor = tensor.detach().to(at::kFloat).clone(at::MemoryFormat::Contiguous);
      if (!tensor.isfinite().all().item<bool>()) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": non-finite value"));
      }
    }
    const at::Tensor& clusters = layers[i].clusters;
    const std::string clusters_name = TensorName(static_cast<int>(i), "clusters");
    if (clusters.dim() != 3 || clusters.size(0) < 1 || clusters.size(1) < 1 ||
        clusters.size(2) < 1) {
      return absl::InvalidArgumentError(absl::StrCat(clusters_name, ": shape ",
                                                     ShapeText(clusters.sizes()),
                                                     ", expected [heads, clusters, head_dim]"));
    }
    if (i == 0) {
      heads = clusters.size(0);
      k = clusters.size(1);
      d = clusters.size(2);
    } else if (clusters.size(0) != heads || clusters.size(1) != k || clusters.size(2) != d) {
      return absl::InvalidArgumentError(
          absl::StrCat(clusters_name, ": shape ", ShapeText(clusters.sizes()), ", layer 0 has [",
                       heads, ",", k, ",", d, "] (every layer has the same heads, k, d_h)"));
    }
    const std::vector<std::vector<int64_t>> expected = {{d, d}, {d}, {d, d}, {d}};
    for (size_t f = 0; f < expected.size(); ++f) {
      const at::Tensor& tensor = *Fields(layers[i])[f];
      if (tensor.sizes() != at::IntArrayRef(expected[f])) {
        return absl::InvalidArgumentError(absl::StrCat(
            TensorName(static_cast<int>(i), kSuffixes[f]), ": shape ", ShapeText(tensor.sizes()),
            ", expected ", ShapeText(expected[f]), " (head_dim ", d, ")"));
      }
    }
  }
  metadata.emplace("format", kFormat);
  return std::make_shared<const SbmParameters>(PrivateTag(), std::move(layers),
                                               std::move(metadata));
}

absl::StatusOr<std::shared_ptr<const SbmParameters>> SbmParameters::Load(
    const std::string& path, const EncoderShape& shape) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(
        path, ": SBM parameters not found (attach them with `docsparse-convert sbm`)"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
  std::vector<SbmLayerParameters> layers(shape.num_layers);
  try {
    for (int i = 0; i < shape.num_layers; ++i) {
      std::vector<at::Tensor*> fields = Fields(layers[i]);
      for (size_t f = 0; f < fields.size(); ++f) {
        ASSIGN_OR_RETURN(*fields[f], ReadFloat(*file, TensorName(i, kSuffixes[f])));
      }
    }
  } catch (const c10::Error& error) {
    return absl::InternalError(
        absl::StrCat(path, ": reading tensors failed: ", error.what_without_backtrace()));
  }
  const std::string extra = TensorName(shape.num_layers, "clusters");
  if (file->Find(extra) != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": has tensor '", extra, "' but the model has ", shape.num_layers, " layers"));
  }
  const int64_t expected_heads = shape.num_heads, expected_dim = shape.head_dim;
  const at::Tensor& clusters = layers[0].clusters;
  if (clusters.dim() != 3 || clusters.size(0) != expected_heads ||
      clusters.size(2) != expected_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": tensor '", TensorName(0, "clusters"), "' has shape ", ShapeText(clusters.sizes()),
        ", the model implies [", expected_heads, ",k,", expected_dim, "]"));
  }
  std::map<std::string, std::string> metadata = file->metadata();
  auto format = metadata.find("format");
  if (format != metadata.end() && format->second != kFormat) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": __metadata__.format is '",
                                                   format->second, "', expected '", kFormat, "'"));
  }
  auto created = Create(std::move(layers), std::move(metadata));
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat(path, ": ", created.status().message()));
  }
  return created;
}

absl::StatusOr<std::shared_ptr<const SbmParameters>> SbmParameters::LoadFromModelDir(
    const std::string& model_dir, const EncoderShape& shape) {
  return Load(model_dir + "/" + kFileName, shape);
}

std::shared_ptr<const SbmParameters> SbmParameters::Random(int num_layers, int num_heads,
                                                           int head_dim, int num_clusters,
                                                           uint64_t seed) {
  std::vector<SbmLayerParameters> layers(num_layers);
  const double linear_bound = 1 / std::sqrt(static_cast<double>(head_dim));
  const double cluster_std = std::sqrt(2.0 / (static_cast<double>(num_clusters) * head_dim));
  for (int i = 0; i < num_layers; ++i) {
    CounterRng rng(DeriveKey(seed, static_cast<uint64_t>(i)));
    SbmLayerParameters& layer = layers[i];
    layer.mlp_in_weight = at::empty({head_dim, head_dim}, at::kFloat);
    layer.mlp_in_bias = at::empty({head_dim}, at::kFloat);
    layer.mlp_out_weight = at::empty({head_dim, head_dim}, at::kFloat);
    layer.mlp_out_bias = at::empty({head_dim}, at::kFloat);
    layer.clusters = at::empty({num_heads, num_clusters, head_dim}, at::kFloat);
    FillUniform(layer.mlp_in_weight, linear_bound, rng);
    FillUniform(layer.mlp_in_bias, linear_bound, rng);
    FillUniform(layer.mlp_out_weight, linear_bound, rng);
    FillUniform(layer.mlp_out_bias, linear_bound, rng);
    FillNormal(layer.clusters, cluster_std, rng);
  }
  std::map<std::string, std::string> metadata = {{"calibrated", "false"},
                                                 {"init_seed", std::to_string(seed)}};
  return *Create(std::move(layers), std::move(metadata));
}

absl::Status SbmParameters::Save(const std::string& path) const {
  std::vector<TensorBytes> tensors;
  for (int i = 0; i < num_layers(); ++i) {
    SbmLayerParameters layer = layers_[i];
    std::vector<at::Tensor*> fields = Fields(layer);
    for (size_t f = 0; f < fields.size(); ++f) {
      const at::Tensor& tensor = *fields[f];
      tensors.push_back({TensorName(i, kSuffixes[f]), DType::kF32, tensor.sizes().vec(),
                         static_cast<const uint8_t*>(tensor.data_ptr()),
                         static_cast<size_t>(tensor.nbytes())});
    }
  }
  return WriteSafetensorsFile(path, tensors, metadata_);
}

}  // namespace docsparse
