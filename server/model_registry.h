// The model repository: one folder per model, each a Hugging Face checkpoint
// plus docsparse.json, loaded once at start-up.
#ifndef DOCSPARSE_SERVER_MODEL_REGISTRY_H_
#define DOCSPARSE_SERVER_MODEL_REGISTRY_H_

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "model/classification_head.h"
#include "model/cost_model.h"
#include "model/encoder.h"
#include "model/hf_config.h"
#include "model/serving_config.h"
#include "model/text_encoder.h"
#include "model/tokenizer.h"

namespace docsparse {

// Label embeddings for zero-shot classification, computed on first use and
// kept: a label's embedding depends only on the model and its prompt.
// Requests embed the labels they miss together with their document (in the
// same batch) and insert them afterwards.
class LabelEmbeddingCache {
 public:
  static constexpr size_t kCapacity = 4096;

  // The labels without an embedding yet, in order.
  std::vector<std::string> Missing(const std::vector<std::string>& labels) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps the first embedding inserted for a label, up to kCapacity labels
  // (callers' label sets are unbounded over time; memory is not).
  void Insert(const std::string& label, const at::Tensor& embedding) ABSL_LOCKS_EXCLUDED(mu_);
  // [labels, h]; NotFound names a label that is not cached.
  absl::StatusOr<at::Tensor> Rows(const std::vector<std::string>& labels) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, at::Tensor> embeddings_ ABSL_GUARDED_BY(mu_);
};

struct ServedModel {
  std::string name;
  std::string path;
  ServingConfig serving;
  EncoderConfig config;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Encoder> encoder;
  std::unique_ptr<TextEncoder> text;
  std::unique_ptr<LabelEmbeddingCache> labels;
  // Set when the checkpoint is a fine-tuned sequence classifier.
  std::unique_ptr<ClassificationHead> head;
  // SBM models: clusters per head (sbm.safetensors), for FLOP budgets.
  int sbm_clusters = 0;
  double load_seconds = 0;
};

class ModelRegistry {
 public:
  // Loads every sub-folder of `repository` that holds a docsparse.json.
  // Fails (naming the folder) if one of them does not load, or if none does.
  static absl::StatusOr<std::unique_ptr<ModelRegistry>> Load(const std::string& repository);

  // The model named `name`; an empty name means the default model (the one
  // whose docsparse.json says "default": true, else the first by name).
  // NotFound lists the models there are.
  absl::StatusOr<const ServedModel*> Find(const std::string& name) const;
  std::vector<const ServedModel*> models() const;

 private:
  std::map<std::string, std::unique_ptr<ServedModel>> models_;
  const ServedModel* default_model_ = nullptr;
};

// Loads one model folder.
absl::StatusOr<std::unique_ptr<ServedModel>> LoadServedModel(const std::string& name,
                                                             const std::string& path);

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_MODEL_REGISTRY_H_
