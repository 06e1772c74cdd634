#include "server/model_registry.h"

#include <c10/core/InferenceMode.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "kernels/cpu_features.h"
#include "model/attention/planner_registry.h"
#include "model/encoder/linear_precision.h"
#include "model/text/tokenizer_loader.h"
#include "nlohmann/json.hpp"

namespace docsparse {

namespace {

// The native planner docsparse.json's attention.kind names: "native" is
// the checkpoint's own (model/attention/planner_registry.h).
absl::StatusOr<AttentionKind> NativeKind(const std::string& path, const AttentionChoice& choice,
                                         const NativeAttention& checkpoint) {
  if (choice.kind == "native") return checkpoint.kind;
  const std::optional<AttentionKind> kind = AttentionKindNamed(choice.kind);
  if (!kind.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(path, "/docsparse.json: attention.kind \"",
                                                   choice.kind, "\" is not served yet"));
  }
  return *kind;
}

// The model's planners (model/attention/planner_registry.h): the native one
// and every other the checkpoint has what it needs for. The checkpoint's own
// knobs hold where its planner serves, with docsparse.json's over them.
// Errors name docsparse.json.
absl::StatusOr<std::unique_ptr<ModelPlanners>> MakePlanners(const std::string& path,
                                                            const AttentionChoice& choice,
                                                            const NativeAttention& checkpoint,
                                                            PlannerSource source,
                                                            bool alternatives) {
  ASSIGN_OR_RETURN(const AttentionKind native, NativeKind(path, choice, checkpoint));
  source.model_dir = path;
  if (native == checkpoint.kind) source.configured_knobs = checkpoint.knobs;
  for (const auto& [name, value] : choice.knobs) source.configured_knobs[name] = value;
  for (const std::string& part : choice.union_parts) {
    // serving_config.cc admits only planner names.
    source.union_parts.push_back(*AttentionKindNamed(part));
  }
  absl::StatusOr<std::unique_ptr<ModelPlanners>> planners =
      ModelPlanners::Make(native, source, alternatives);
  if (!planners.ok()) {
    return absl::Status(planners.status().code(),
                        absl::StrCat(path, "/docsparse.json: ", planners.status().message()));
  }
  return planners;
}

// A BART / Pegasus / LSG-BART / LED folder: the encoder-decoder, its tokenizer
// (byte-level BPE or SentencePiece) and its generation defaults.
absl::Status LoadSummarizer(ServedModel* model, const ModelLoadOptions& options) {
  const std::string& path = model->path;
  for (Task task : model->serving.tasks) {
    if (task != Task::kSummarize) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, "/docsparse.json: tasks: \"", std::string(TaskName(task)),
                       "\" is not served by an encoder-decoder; write \"tasks\": [\"summarize\"]"));
    }
  }
  // On the CPU our summarizers run as docsparse.json says: fp32; bf16 where
  // the CPU has AMX or AVX512-BF16 (the products on them, and a decode step,
  // bound by reading the weights, reads half the bytes); or int8 products
  // (a quarter), the rest bf16 where the CPU has it. `auto` is fp32 there:
  // bf16 and int8 can change the token greedy or beam search picks, and
  // fp32 matches transformers token for token. On a CUDA device bf16 (auto),
  // fp16 or fp32, as docsparse.json or --precision says.
  const bool on_cpu = options.device.is_cpu();
  const Precision precision =
      on_cpu ? model->serving.precision : options.precision.value_or(model->serving.precision);
  if (on_cpu && precision == Precision::kBf16 && !HasNativeBf16(HostCpuFeatures())) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        "/docsparse.json: precision: \"bf16\" needs a CPU with AMX or AVX512-BF16 for an "
        "encoder-decoder model (this one: ",
        std::string(IsaName(HostCpuFeatures())), "); write \"fp32\", \"int8\" or \"auto\""));
  }
  if (absl::Status placeable = CheckPrecisionOn(precision, options.device, "a summarizer");
      !placeable.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, "/docsparse.json: ", placeable.message()));
  }
  ASSIGN_OR_RETURN(const BartConfig config, LoadBartConfig(path + "/config.json"));
  // Summarizers run their native attention (LSG for LSG-BART, Longformer
  // for LED, BigBird for BigBird-Pegasus, else dense) or dense: the other
  // planners are not served for them yet.
  const NativeAttention checkpoint = NativeAttentionOf(config);
  const std::string native_name(AttentionKindName(checkpoint.kind));
  const std::string& kind = model->serving.attention.kind;
  if (kind != "native" && kind != "dense" && kind != native_name) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, "/docsparse.json: attention.kind \"", kind, "\" is not served for ",
        std::string(Seq2SeqArchitectureName(config.architecture)), " models (native, dense",
        checkpoint.kind == AttentionKind::kDense ? "" : absl::StrCat(" or ", native_name), ")"));
  }
  ASSIGN_OR_RETURN(model->planners, MakePlanners(path, model->serving.attention, checkpoint,
                                                 PlannerSourceOf(config), /*alternatives=*/false));
  ASSIGN_OR_RETURN(model->seq2seq,
                   Seq2SeqModel::Create(path, config, model->planners->MakeMechanism(),
                                        options.device, precision));
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
  return abstractive() ? seq2seq->precision() : encoder->precision();
}

at::Device ServedModel::device() const {
  return abstractive() ? seq2seq->device() : encoder->device();
}

std::string ServedModel::isa() const {
  return device().is_cpu() ? std::string(IsaName(HostCpuFeatures())) : "cuda";
}

const AttentionMechanism& ServedModel::attention() const {
  return abstractive() ? seq2seq->encoder().attention() : encoder->attention();
}

EncoderShape ServedModel::encoder_shape() const {
  return abstractive() ? seq2seq->encoder().shape() : encoder->shape();
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
  return type != config.end() && type->is_string() &&
         (*type == "bart" || *type == "pegasus" || *type == "led" || *type == "bigbird_pegasus");
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
    RETURN_IF_ERROR(LoadSummarizer(model.get(), options));
    model->load_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return model;
  }
  ASSIGN_OR_RETURN(model->config, LoadEncoderConfig(path + "/config.json"));
  ASSIGN_OR_RETURN(model->tokenizer, LoadTokenizer(path));
  ASSIGN_OR_RETURN(model->planners,
                   MakePlanners(path, model->serving.attention, NativeAttentionOf(model->config),
                                PlannerSourceOf(model->config),
                                /*alternatives=*/true));
  ASSIGN_OR_RETURN(
      model->encoder,
      Encoder::Create(path, model->config, model->planners->MakeMechanism(),
                      options.precision.value_or(model->serving.precision), options.device));
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

namespace {

// Why `name` cannot be a model folder's name; empty when it can be.
std::string NotAFolderName(const std::string& name) {
  if (name.size() > 255) return "over 255 bytes";
  if (name == "." || name == "..") return "a path, not a folder name";
  for (const char c : name) {
    if (c == '/' || c == '\\') return "a path, not a folder name";
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "a control character in it";
  }
  return "";
}

}  // namespace

absl::StatusOr<const ServedModel*> ModelRegistry::Find(const std::string& name) const {
  if (name.empty()) return default_model_;
  if (const std::string why = NotAFolderName(name); !why.empty()) {
    // Escaped: the name may hold control characters (a forged log line).
    return absl::InvalidArgumentError(
        absl::StrCat("model: ", Quote(absl::CHexEscape(name)), " is not a model name (", why, ")"));
  }
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
