#include "server/model_registry.h"

#include <c10/core/InferenceMode.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "model/attention/attention_switch.h"
#include "model/attention/lsg_attention.h"
#include "model/attention/sbm_attention.h"
#include "model/text/tokenizer_loader.h"
#include "model/text/wordpiece_tokenizer.h"
#include "nlohmann/json.hpp"

namespace docsparse {

namespace {

// The planner docsparse.json asks for, if the checkpoint can run it; null
// for SBM, whose parameters MakeServingAttention loads.
absl::StatusOr<std::unique_ptr<AttentionMechanism>> MakeNativeAttention(
    const std::string& path, const AttentionChoice& choice, const EncoderConfig& config) {
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
  if (choice.kind == "sbm") return nullptr;  // MakeServingAttention loads the parameters
  return absl::InvalidArgumentError(absl::StrCat(path, "/docsparse.json: attention.kind \"",
                                                 choice.kind, "\" is not served yet"));
}

// The model's own mechanism (docsparse.json attention.kind) and the ones a
// request may ask for instead (budget.attention): dense always, since every
// checkpoint has what it needs; SBM when sbm.safetensors is in the folder.
// Sets `sbm_clusters` when SBM parameters are loaded.
absl::StatusOr<std::unique_ptr<AttentionMechanism>> MakeServingAttention(
    const std::string& path, const AttentionChoice& choice, const EncoderConfig& config,
    int* sbm_clusters) {
  ASSIGN_OR_RETURN(std::unique_ptr<AttentionMechanism> native,
                   MakeNativeAttention(path, choice, config));
  std::unique_ptr<AttentionMechanism> sbm;
  if (native == nullptr ||
      std::filesystem::exists(std::filesystem::path(path) / SbmParameters::kFileName)) {
    const EncoderShape shape{config.num_layers, config.num_heads, config.head_dim(),
                             config.hidden_size, config.intermediate_size};
    ASSIGN_OR_RETURN(std::shared_ptr<const SbmParameters> parameters,
                     SbmParameters::LoadFromModelDir(path, shape));
    *sbm_clusters = parameters->num_clusters();
    sbm = MakeSbmAttention(std::move(parameters));
  }
  if (native == nullptr) native = std::move(sbm);
  std::map<AttentionKind, std::unique_ptr<AttentionMechanism>> alternatives;
  if (native->kind() != AttentionKind::kDense) {
    alternatives[AttentionKind::kDense] = MakeDenseAttention();
  }
  if (sbm != nullptr) alternatives[AttentionKind::kSbm] = std::move(sbm);
  return MakeSwitchingAttention(std::move(native), std::move(alternatives));
}

}  // namespace

namespace {

// The encoder attention of a summarizer; null is the checkpoint's native one
// (LSG for an LSG-BART, else dense), which Seq2SeqModel picks itself.
absl::StatusOr<std::unique_ptr<AttentionMechanism>> MakeSummarizerAttention(
    const std::string& path, const AttentionChoice& choice, const BartConfig& config) {
  if (choice.kind == "native") return std::unique_ptr<AttentionMechanism>();
  if (choice.kind == "dense") return MakeDenseAttention();
  if (choice.kind == "lsg") {
    if (!config.lsg.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path,
          "/docsparse.json: attention.kind \"lsg\" needs an LSG checkpoint (config.json with LSG "
          "fields; make one with docsparse-convert lsg)"));
    }
    return MakeLsgAttention(*config.lsg);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path, "/docsparse.json: attention.kind \"", choice.kind, "\" is not served for ",
      std::string(Seq2SeqArchitectureName(config.architecture)), " models (native, dense or lsg)"));
}

// A BART / Pegasus / LSG-BART folder: the encoder-decoder, its tokenizer
// (byte-level BPE or SentencePiece) and its generation defaults.
absl::Status LoadSummarizer(ServedModel* model) {
  const std::string& path = model->path;
  for (Task task : model->serving.tasks) {
    if (task != Task::kSummarize) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, "/docsparse.json: tasks: \"", std::string(TaskName(task)),
                       "\" is not served by an encoder-decoder; write \"tasks\": [\"summarize\"]"));
    }
  }
  if (model->serving.precision == Precision::kBf16 ||
      model->serving.precision == Precision::kInt8) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, "/docsparse.json: precision: \"",
        std::string(PrecisionName(model->serving.precision)),
        "\" is not served for encoder-decoder models yet (\"fp32\" or \"auto\", which is "
        "fp32 for them)"));
  }
  ASSIGN_OR_RETURN(const BartConfig config, LoadBartConfig(path + "/config.json"));
  ASSIGN_OR_RETURN(std::unique_ptr<AttentionMechanism> attention,
                   MakeSummarizerAttention(path, model->serving.attention, config));
  ASSIGN_OR_RETURN(model->seq2seq, Seq2SeqModel::Create(path, config, std::move(attention)));
  ASSIGN_OR_RETURN(model->tokenizer, LoadTokenizer(path));
  ASSIGN_OR_RETURN(const GenerationConfig generation, LoadGenerationConfig(path));
  // The model's own values must fit its decoder too.
  const int limit = static_cast<int>(
      std::min<int64_t>(model->seq2seq->max_decoder_length(), kMaxGenerationLength));
  absl::StatusOr<GenerationConfig> checked = ApplyGenerationOverrides(generation, {}, limit);
  if (!checked.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, "/generation_config.json: ", checked.status().message()));
  }
  model->generation = *std::move(checked);
  return absl::OkStatus();
}

}  // namespace

std::string ServedModel::architecture() const {
  return std::string(abstractive() ? Seq2SeqArchitectureName(seq2seq->config().architecture)
                                   : ArchitectureName(config.architecture));
}

Precision ServedModel::precision() const {
  return abstractive() ? Precision::kFp32 : encoder->precision();
}

const AttentionMechanism& ServedModel::attention() const {
  return abstractive() ? seq2seq->encoder().attention() : encoder->attention();
}

EncoderShape ServedModel::encoder_shape() const {
  return abstractive() ? seq2seq->encoder().shape() : encoder->shape();
}

const std::optional<LsgConfig>& ServedModel::lsg() const {
  return abstractive() ? seq2seq->config().lsg : config.lsg;
}

int ServedModel::vocab_size() const {
  return abstractive() ? seq2seq->config().vocab_size : config.vocab_size;
}

int64_t ServedModel::max_sequence_length() const {
  return abstractive() ? seq2seq->config().max_position_embeddings : encoder->max_sequence_length();
}

absl::Status WarmUp(const ServedModel& model) {
  CostAccount cost(model.encoder_shape());
  if (!model.abstractive()) {
    return model.text->EmbedTexts({"docsparse warm-up"}, PoolingMode::kMean, true, &cost).status();
  }
  c10::InferenceMode inference_mode;
  EncoderBatch batch;
  batch.sequences.push_back(
      model.tokenizer->Frame(model.tokenizer->Encode("docsparse warm-up"),
                             static_cast<size_t>(model.max_sequence_length())));
  ASSIGN_OR_RETURN(const Seq2SeqEncoding encoding, model.seq2seq->Encode(batch, {&cost}));
  ASSIGN_OR_RETURN(std::unique_ptr<DecoderStepper> stepper,
                   model.seq2seq->StartDecoding(encoding, 1));
  return stepper->Step(at::full({1}, model.generation.decoder_start_token_id, at::kLong)).status();
}

bool IsSeq2SeqCheckpoint(const std::string& path) {
  std::ifstream in(path + "/config.json");
  if (!in) return false;
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return false;
  const auto type = config.find("model_type");
  return type != config.end() && type->is_string() && (*type == "bart" || *type == "pegasus");
}

absl::StatusOr<std::unique_ptr<ServedModel>> LoadServedModel(const std::string& name,
                                                             const std::string& path,
                                                             const ModelLoadOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto model = std::make_unique<ServedModel>();
  model->name = name;
  model->path = path;
  ASSIGN_OR_RETURN(model->serving, LoadServingConfig(path + "/docsparse.json"));
  if (IsSeq2SeqCheckpoint(path)) {
    RETURN_IF_ERROR(LoadSummarizer(model.get()));
    model->load_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return model;
  }
  ASSIGN_OR_RETURN(model->config, LoadEncoderConfig(path + "/config.json"));
  ASSIGN_OR_RETURN(std::unique_ptr<WordPieceTokenizer> tokenizer,
                   WordPieceTokenizer::FromModelDir(path));
  model->tokenizer = std::move(tokenizer);
  ASSIGN_OR_RETURN(
      std::unique_ptr<AttentionMechanism> attention,
      MakeServingAttention(path, model->serving.attention, model->config, &model->sbm_clusters));
  ASSIGN_OR_RETURN(model->encoder,
                   Encoder::Create(path, model->config, std::move(attention),
                                   options.precision.value_or(model->serving.precision)));
  model->text = std::make_unique<TextEncoder>(*model->tokenizer, *model->encoder,
                                              model->serving.batching.max_batch_size);
  model->labels = std::make_unique<LabelEmbeddingCache>(options.label_cache_bytes);
  if (model->config.has_classification_head) {
    ASSIGN_OR_RETURN(model->head, ClassificationHead::Load(path, model->config));
  }
  model->load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return model;
}

absl::StatusOr<std::unique_ptr<ModelRegistry>> ModelRegistry::Load(
    const std::string& repository, const ModelLoadOptions& options) {
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
        LoadServedModel(name, entry.path().string(), options);
    if (!model.ok()) {
      registry->failed_.emplace(
          name, absl::UnavailableError(
                    absl::StrCat("model '", name, "' failed to load: ", model.status().message())));
      continue;
    }
    registry->models_.emplace(name, *std::move(model));
  }
  if (registry->models_.empty() && !registry->failed_.empty()) {
    std::vector<std::string> reasons;
    for (const auto& [name, status] : registry->failed_) {
      reasons.push_back(std::string(status.message()));
    }
    return absl::UnavailableError(absl::StrCat("no model loaded: ", absl::StrJoin(reasons, "; ")));
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
  if (const auto failed = failed_.find(name); failed != failed_.end()) return failed->second;
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
