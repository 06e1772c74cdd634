// The model repository: one folder per model, each a Hugging Face checkpoint
// plus docsparse.json, loaded once at start-up.
#ifndef DOCSPARSE_SERVER_MODEL_REGISTRY_H_
#define DOCSPARSE_SERVER_MODEL_REGISTRY_H_

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/attention/cost_model.h"
#include "model/attention/planner_registry.h"
#include "model/checkpoint/generation_config.h"
#include "model/checkpoint/hf_config.h"
#include "model/checkpoint/precision.h"
#include "model/checkpoint/serving_config.h"
#include "model/encoder/classification_head.h"
#include "model/encoder/encoder.h"
#include "model/encoder/text_encoder.h"
#include "model/seq2seq/seq2seq_model.h"
#include "model/text/tokenizer.h"
#include "server/label_embedding_cache.h"

namespace docsparse {

// One loaded model: an encoder (BERT family: embeddings, classification,
// extractive summaries) or an encoder-decoder summarizer (BART, Pegasus,
// LSG-BART: abstractive summaries only). The accessors below answer for
// either kind, from whichever encoder it has.
struct ServedModel {
  std::string name;
  std::string path;
  ServingConfig serving;
  // Encoder models only (unset for summarizers): config, encoder, text,
  // labels, head.
  EncoderConfig config;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Encoder> encoder;
  std::unique_ptr<TextEncoder> text;
  std::unique_ptr<LabelEmbeddingCache> labels;
  // Set when the checkpoint is a fine-tuned sequence classifier.
  std::unique_ptr<ClassificationHead> head;
  // The attention planners a request may run (its own first), which price
  // and fit budgets; the encoder runs their mechanisms.
  std::unique_ptr<ModelPlanners> planners;
  // Summarizers only: the encoder-decoder, and generation_config.json's
  // defaults (checked against the decoder's length) that requests override.
  std::unique_ptr<Seq2SeqModel> seq2seq;
  GenerationConfig generation;
  double load_seconds = 0;

  bool abstractive() const { return seq2seq != nullptr; }
  // "bert", "roberta", "distilbert", "bart", "pegasus".
  std::string architecture() const;
  // The encoder's attention mechanism (every planner's, switched per item)
  // and shape.
  const AttentionMechanism& attention() const;
  // What the model runs in (kFp32, kBf16 or kInt8, never kAuto): the
  // encoder's resolved precision; summarizers run fp32 on the CPU, bf16 or
  // fp32 on a CUDA device.
  Precision precision() const;
  // Where it runs (--device).
  at::Device device() const;
  // What computes it, as the cost report and /metrics name it: the CPU's
  // instruction set ("amx", "avx512_bf16", ...) or "cuda".
  std::string isa() const;
  EncoderShape encoder_shape() const;
  int vocab_size() const;
  // Longest encoder input, special tokens included.
  int64_t max_sequence_length() const;
};

// How the server loads every model (its flags).
struct ModelLoadOptions {
  // When set (--precision), replaces every encoder model's docsparse.json
  // "precision" (on a CUDA device, every summarizer's too).
  std::optional<Precision> precision;
  // Where every model runs (--device): the CPU, or one CUDA device.
  at::Device device = at::kCPU;
  // Each encoder model's label embedding cache (--label_cache_bytes).
  size_t label_cache_bytes = LabelEmbeddingCache::kDefaultCapacityBytes;
};

class ModelRegistry {
 public:
  // Loads every sub-folder of `repository` that holds a docsparse.json. A
  // folder that does not load (a truncated checkpoint, a bad config) fails
  // only its model: it is kept as a failure, and the others serve. Fails if
  // no model loads, with every folder's reason.
  static absl::StatusOr<std::unique_ptr<ModelRegistry>> Load(const std::string& repository,
                                                             const ModelLoadOptions& options = {});

  // The model named `name`; an empty name means the default model (the one
  // whose docsparse.json says "default": true, else the first by name).
  // UNAVAILABLE naming why for a model that failed to load; NotFound lists
  // the models there are; INVALID_ARGUMENT for a name no folder can have
  // (a path such as "../x", a control character, over 255 bytes): a model
  // name never reaches the file system, and says so rather than "not found".
  absl::StatusOr<const ServedModel*> Find(const std::string& name) const;
  std::vector<const ServedModel*> models() const;
  // The folders that did not load: name -> why (UNAVAILABLE, "model 'x'
  // failed to load: ...").
  const std::map<std::string, absl::Status>& failed() const { return failed_; }

 private:
  std::map<std::string, std::unique_ptr<ServedModel>> models_;
  std::map<std::string, absl::Status> failed_;
  const ServedModel* default_model_ = nullptr;
};

// Whether `path`/config.json describes an encoder-decoder (model_type "bart"
// or "pegasus", LSG-BART included); false when it is missing or unreadable
// (the encoder loader then says what is wrong).
bool IsSeq2SeqCheckpoint(const std::string& path);

// One forward pass through the model (for a summarizer: the encoder and one
// decoder step), so that the first request does not pay for first-use
// allocations.
absl::Status WarmUp(const ServedModel& model);

// Loads one model folder.
absl::StatusOr<std::unique_ptr<ServedModel>> LoadServedModel(const std::string& name,
                                                             const std::string& path,
                                                             const ModelLoadOptions& options = {});

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_MODEL_REGISTRY_H_
