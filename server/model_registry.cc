#include "server/model_registry.h"

#include <c10/core/InferenceMode.h>

#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "model/lsg_attention.h"
#include "model/sbm_attention.h"
#include "model/wordpiece_tokenizer.h"

namespace docsparse {

std::vector<std::string> LabelEmbeddingCache::Missing(
    const std::vector<std::string>& labels) const {
  std::vector<std::string> missing;
  absl::MutexLock lock(&mu_);
  for (const std::string& label : labels) {
    if (embeddings_.count(label) == 0) missing.push_back(label);
  }
  return missing;
}

void LabelEmbeddingCache::Insert(const std::string& label, const at::Tensor& embedding) {
  absl::MutexLock lock(&mu_);
  if (embeddings_.size() >= kCapacity) return;
  embeddings_.emplace(label, embedding.clone());
}

absl::StatusOr<at::Tensor> LabelEmbeddingCache::Rows(const std::vector<std::string>& labels) const {
  std::vector<at::Tensor> rows;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& label : labels) {
      auto it = embeddings_.find(label);
      if (it == embeddings_.end()) {
        return absl::NotFoundError(absl::StrCat("no embedding for label '", label, "'"));
      }
      rows.push_back(it->second);
    }
  }
  c10::InferenceMode inference_mode;
  return at::stack(rows);
}

namespace {

// The planner docsparse.json asks for, if the checkpoint can run it. Sets
// `sbm_clusters` for an SBM model.
absl::StatusOr<std::unique_ptr<AttentionMechanism>> MakeServingAttention(
    const std::string& path, const AttentionChoice& choice, const EncoderConfig& config,
    int* sbm_clusters) {
  if (choice.kind == "dense" || (choice.kind == "native" && !config.lsg.has_value())) {
    return MakeDenseAttention();
  }
  if (choice.kind == "native" || choice.kind == "lsg") {
    if (!config.lsg.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path,
                       "/docsparse.json: attention.kind \"lsg\" needs an LSG checkpoint "
                       "(config.json with LSG fields; make one with docsparse-convert lsg)"));
    }
    return MakeLsgAttention(*config.lsg);
  }
  if (choice.kind == "sbm") {
    const EncoderShape shape{config.num_layers, config.num_heads, config.head_dim(),
                             config.hidden_size, config.intermediate_size};
    ASSIGN_OR_RETURN(std::shared_ptr<const SbmParameters> parameters,
                     SbmParameters::LoadFromModelDir(path, shape));
    *sbm_clusters = parameters->num_clusters();
    return MakeSbmAttention(std::move(parameters));
  }
  return absl::InvalidArgumentError(absl::StrCat(path, "/docsparse.json: attention.kind \"",
                                                 choice.kind, "\" is not served yet"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServedModel>> LoadServedModel(const std::string& name,
                                                             const std::string& path) {
  const auto start = std::chrono::steady_clock::now();
  auto model = std::make_unique<ServedModel>();
  model->name = name;
  model->path = path;
  ASSIGN_OR_RETURN(model->serving, LoadServingConfig(path + "/docsparse.json"));
  ASSIGN_OR_RETURN(model->config, LoadEncoderConfig(path + "/config.json"));
  ASSIGN_OR_RETURN(std::unique_ptr<WordPieceTokenizer> tokenizer,
                   WordPieceTokenizer::FromModelDir(path));
  model->tokenizer = std::move(tokenizer);
  ASSIGN_OR_RETURN(
      std::unique_ptr<AttentionMechanism> attention,
      MakeServingAttention(path, model->serving.attention, model->config, &model->sbm_clusters));
  ASSIGN_OR_RETURN(model->encoder, Encoder::Create(path, model->config, std::move(attention)));
  model->text = std::make_unique<TextEncoder>(*model->tokenizer, *model->encoder,
                                              model->serving.batching.max_batch_size);
  model->labels = std::make_unique<LabelEmbeddingCache>();
  if (model->config.has_classification_head) {
    ASSIGN_OR_RETURN(model->head, ClassificationHead::Load(path, model->config));
  }
  model->load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return model;
}

absl::StatusOr<std::unique_ptr<ModelRegistry>> ModelRegistry::Load(const std::string& repository) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(repository, error)) {
    return absl::NotFoundError(
        absl::StrCat("model repository '", repository, "' is not a directory"));
  }
  auto registry = std::unique_ptr<ModelRegistry>(new ModelRegistry());
  for (const fs::directory_entry& entry : fs::directory_iterator(repository, error)) {
    if (!entry.is_directory() || !fs::exists(entry.path() / "docsparse.json")) continue;
    const std::string name = entry.path().filename().string();
    absl::StatusOr<std::unique_ptr<ServedModel>> model =
        LoadServedModel(name, entry.path().string());
    if (!model.ok()) {
      return absl::Status(model.status().code(),
                          absl::StrCat("model '", name, "': ", model.status().message()));
    }
    registry->models_.emplace(name, *std::move(model));
  }
  if (registry->models_.empty()) {
    return absl::NotFoundError(absl::StrCat("no model folder with a docsparse.json in '",
                                            repository, "' (run scripts/setup)"));
  }
  registry->default_model_ = registry->models_.begin()->second.get();
  std::vector<std::string> defaults;
  for (const auto& [name, model] : registry->models_) {
    if (!model->serving.default_model) continue;
    defaults.push_back(name);
    registry->default_model_ = model.get();
  }
  if (defaults.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("models ", absl::StrJoin(defaults, ", "),
                                                   " all say \"default\": true; one may"));
  }
  return registry;
}

absl::StatusOr<const ServedModel*> ModelRegistry::Find(const std::string& name) const {
  if (name.empty()) return default_model_;
  auto it = models_.find(name);
  if (it != models_.end()) return it->second.get();
  std::vector<std::string> names;
  for (const auto& [known, unused] : models_) names.push_back(known);
  return absl::NotFoundError(
      absl::StrCat("model ", Quote(name), " not found; available: ", absl::StrJoin(names, ", ")));
}

std::vector<const ServedModel*> ModelRegistry::models() const {
  std::vector<const ServedModel*> result;
  for (const auto& [name, model] : models_) result.push_back(model.get());
  return result;
}

}  // namespace docsparse
