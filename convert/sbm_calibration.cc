#include "convert/sbm_calibration.h"

#include <c10/util/Exception.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "convert/model_files.h"
#include "convert/sbm_student.h"
#include "model/attention/sbm_parameters.h"
#include "kernels/sbm_sampling.h"
#include "model/checkpoint/hf_config.h"
#include "model/encoder/encoder.h"
#include "nlohmann/json.hpp"

namespace docsparse::convert {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCheckpointTensors = "sbm-calibration.pt";
constexpr const char* kCheckpointState = "sbm-calibration.json";
// Stream labels (DeriveKey) of the calibration's random choices.
constexpr uint64_t kBatchStream = 0x62617463;  // "batc"
constexpr uint64_t kMaskStream = 0x6d61736b;   // "mask"

// Dense attention that also keeps what every layer computed, for the student.
// Used by one calibration thread at a time (the mutex only makes that safe
// to rely on).
class RecordingAttention final : public AttentionMechanism {
 public:
  AttentionKind kind() const override { return AttentionKind::kDense; }

  at::Tensor Forward(const AttentionInputs& in,
                     std::vector<ItemAttentionCost>* item_costs) const override {
    at::Tensor context = dense_->Forward(in, item_costs);
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back({in.query, in.key, in.value, context, in.lengths});
    return context;
  }

  // The records of the last forward pass, in layer order, as normal tensors
  // (the encoder runs in inference mode; its tensors cannot be saved for
  // backward, so they are cloned here, outside it).
  std::vector<LayerRecord> Take() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<LayerRecord> records;
    for (const LayerRecord& r : records_) {
      records.push_back(
          {r.query.clone(), r.key.clone(), r.value.clone(), r.context.clone(), r.lengths});
    }
    records_.clear();
    return records;
  }

 private:
  std::unique_ptr<AttentionMechanism> dense_ = MakeDenseAttention();
  mutable std::mutex mu_;
  mutable std::vector<LayerRecord> records_;
};

// FNV-1a over the chunks: a checkpoint is only resumed on the same corpus.
std::string CorpusFingerprint(const std::vector<std::vector<int32_t>>& chunks) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const std::vector<int32_t>& chunk : chunks) {
    for (int32_t id : chunk) {
      hash = (hash ^ static_cast<uint32_t>(id)) * 0x100000001b3ULL;
    }
    hash = (hash ^ 0xffffffffu) * 0x100000001b3ULL;
  }
  return absl::StrFormat("%016x", hash);
}

// Everything a checkpoint must agree on to be continued.
nlohmann::json Signature(const SbmCalibrationOptions& options, const EncoderConfig& config,
                         const std::vector<std::vector<int32_t>>& chunks) {
  return {{"clusters", options.clusters},
          {"lambda", options.lambda},
          {"delta", options.delta},
          {"mass_weight", options.mass_weight},
          {"logit_decay", options.logit_decay},
          {"train_density_min", options.train_density_min},
          {"train_density_max", options.train_density_max},
          {"batch", options.batch},
          {"learning_rate", options.learning_rate},
          {"seed", options.seed},
          {"layers", config.num_layers},
          {"heads", config.num_heads},
          {"hidden", config.hidden_size},
          {"chunks", chunks.size()},
          {"chunk_tokens", chunks.empty() ? 0 : chunks[0].size()},
          {"corpus", CorpusFingerprint(chunks)}};
}

// Where a checkpoint left off.
struct CheckpointState {
  int64_t step = 0;  // 0: no checkpoint
  double distill = 0;
  double density = 0;
};

absl::Status SaveCheckpoint(const std::string& dir, const SbmStudent& student,
                            const torch::optim::Adam& optimizer, const CheckpointState& at,
                            const nlohmann::json& signature) {
  const std::string tensors = JoinPath(dir, kCheckpointTensors);
  try {
    torch::serialize::OutputArchive archive;
    for (const auto& [name, tensor] : student.named_parameters()) archive.write(name, tensor);
    torch::serialize::OutputArchive adam;
    optimizer.save(adam);
    archive.write("adam", adam);
    archive.save_to(tensors + ".tmp");
  } catch (const c10::Error& error) {
    return absl::InternalError(
        absl::StrCat(tensors, ": cannot write: ", error.what_without_backtrace()));
  }
  std::error_code error;
  fs::rename(tensors + ".tmp", tensors, error);
  if (error) return absl::InternalError(absl::StrCat(tensors, ": ", error.message()));
  // The state names the step last, so a crash between the two writes leaves
  // a state that still matches older tensors only if the step is unchanged:
  // resuming then redoes at most `checkpoint_every` steps.
  const nlohmann::json state = {{"step", at.step},
                                {"distill", at.distill},
                                {"density", at.density},
                                {"signature", signature}};
  return WriteFileAtomically(JoinPath(dir, kCheckpointState), state.dump(2) + "\n");
}

// Loads the checkpoint in `dir` (if any) into `student` and `optimizer`.
absl::StatusOr<CheckpointState> LoadCheckpoint(const std::string& dir,
                                               const nlohmann::json& signature, SbmStudent& student,
                                               torch::optim::Adam& optimizer) {
  const std::string state_path = JoinPath(dir, kCheckpointState);
  ASSIGN_OR_RETURN(std::optional<nlohmann::ordered_json> state, ReadJsonFileIfExists(state_path));
  if (!state.has_value()) return CheckpointState{};
  if (!state->contains("step") || !state->contains("signature")) {
    return absl::InvalidArgumentError(absl::StrCat(state_path, ": missing step or signature"));
  }
  const nlohmann::json saved = nlohmann::json::parse((*state)["signature"].dump());
  for (const auto& [key, value] : signature.items()) {
    if (!saved.contains(key) || saved[key] != value) {
      return absl::FailedPreconditionError(
          absl::StrCat(state_path, ": the checkpoint was made with ", key, " = ",
                       saved.contains(key) ? saved[key].dump() : "(none)", ", this run has ",
                       value.dump(), "; pass the same settings, or delete ", kCheckpointState,
                       " and ", kCheckpointTensors, " to start over"));
    }
  }
  const std::string tensors = JoinPath(dir, kCheckpointTensors);
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(tensors);
    torch::NoGradGuard no_grad;
    for (auto& [name, tensor] : student.named_parameters()) {
      torch::Tensor loaded;
      archive.read(name, loaded);
      tensor.copy_(loaded);
    }
    torch::serialize::InputArchive adam;
    archive.read("adam", adam);
    optimizer.load(adam);
  } catch (const c10::Error& error) {
    return absl::InvalidArgumentError(
        absl::StrCat(tensors, ": cannot resume: ", error.what_without_backtrace()));
  }
  CheckpointState at;
  at.step = (*state)["step"].get<int64_t>();
  at.distill = state->value("distill", 0.0);
  at.density = state->value("density", 0.0);
  return at;
}

// The output folder as a model folder: the input's files, hard-linked
// (copied across file systems), except what this command writes and the
// serving config, which belongs to the variant.
absl::Status PrepareOutputFolder(const std::string& input, const std::string& output) {
  std::error_code error;
  fs::create_directories(output, error);
  if (error) return absl::InternalError(absl::StrCat("--output ", output, ": ", error.message()));
  if (fs::equivalent(input, output, error)) return absl::OkStatus();
  for (const fs::directory_entry& entry : fs::directory_iterator(input, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name == SbmParameters::kFileName || name == "docsparse.json" ||
        name.rfind("sbm-calibration", 0) == 0) {
      continue;
    }
    const std::string target = JoinPath(output, name);
    if (fs::exists(target)) continue;
    std::error_code link_error;
    fs::create_hard_link(entry.path(), target, link_error);
    if (link_error) RETURN_IF_ERROR(CopyFileAtomically(entry.path().string(), target));
  }
  if (error) return absl::InternalError(absl::StrCat("--input ", input, ": ", error.message()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SbmCalibrationResult> CalibrateSbm(
    const SbmCalibrationOptions& options, const std::vector<std::vector<int32_t>>& chunks,
    const std::map<std::string, std::string>& corpus_metadata,
    const std::function<void(const SbmCalibrationProgress&)>& progress) {
  if (options.clusters < 1 || options.clusters > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("--clusters: ", options.clusters, " is outside [1, 4096]"));
  }
  if (!(options.lambda >= 0) || !(options.delta >= 0 && options.delta < 1) ||
      !(options.mass_weight >= 0) || !(options.logit_decay >= 0)) {
    return absl::InvalidArgumentError(
        "--lambda and --mass-weight must be >= 0 and --delta in [0, 1)");
  }
  if (options.train_density_max > 0 &&
      !(options.train_density_min > 0 && options.train_density_min <= options.train_density_max &&
        options.train_density_max <= 1)) {
    return absl::InvalidArgumentError(
        "--train-density: need 0 < min <= max <= 1 (or max 0 to train at beta = 0)");
  }
  if (options.steps < 0 || options.batch < 1 || !(options.learning_rate > 0) ||
      options.checkpoint_every < 1) {
    return absl::InvalidArgumentError(
        "--steps must be >= 0, --batch and --checkpoint-every >= 1, --learning-rate > 0");
  }
  if (chunks.empty()) return absl::InvalidArgumentError("--corpus: no chunks");
  for (const std::vector<int32_t>& chunk : chunks) {
    if (chunk.size() != chunks[0].size()) {
      return absl::InvalidArgumentError("chunks: all must have the same length");
    }
  }
  ASSIGN_OR_RETURN(const EncoderConfig config,
                   LoadEncoderConfig(JoinPath(options.input_dir, "config.json")));
  auto recorder = std::make_unique<RecordingAttention>();
  const RecordingAttention* records = recorder.get();
  ASSIGN_OR_RETURN(std::unique_ptr<Encoder> teacher,
                   Encoder::Create(options.input_dir, config, std::move(recorder)));
  RETURN_IF_ERROR(PrepareOutputFolder(options.input_dir, options.output_dir));

  const auto start = std::chrono::steady_clock::now();
  const std::shared_ptr<const SbmParameters> initial = SbmParameters::Random(
      config.num_layers, config.num_heads, config.head_dim(), options.clusters, options.seed);
  SbmStudent student(*initial);
  torch::optim::Adam optimizer(student.parameters(),
                               torch::optim::AdamOptions(options.learning_rate));
  const nlohmann::json signature = Signature(options, config, chunks);
  CheckpointState resumed;
  if (options.resume) {
    ASSIGN_OR_RETURN(resumed, LoadCheckpoint(options.output_dir, signature, student, optimizer));
  }
  const int64_t first_step = resumed.step;

  SbmCalibrationProgress status;
  status.steps = options.steps;
  status.step = first_step;
  status.distill = resumed.distill;
  status.density = resumed.density;
  const int layers = config.num_layers;
  try {
    for (int64_t step = first_step; step < options.steps; ++step) {
      EncoderBatch batch;
      CounterRng picks(DeriveKey(DeriveKey(options.seed, kBatchStream), step));
      for (int b = 0; b < options.batch; ++b) {
        batch.sequences.push_back(chunks[picks.Next() % chunks.size()]);
      }
      double target = 0;
      if (options.train_density_max > 0) {
        const double low = std::log(options.train_density_min);
        const double high = std::log(options.train_density_max);
        target = std::exp(low + (high - low) * picks.Uniform());
      }
      ASSIGN_OR_RETURN(EncoderOutput ignored, teacher->Forward(batch, nullptr));
      (void)ignored;
      const std::vector<LayerRecord> recorded = records->Take();
      if (static_cast<int>(recorded.size()) != layers) {
        return absl::InternalError(absl::StrCat("teacher recorded ", recorded.size(),
                                                " attention calls for ", layers, " layers"));
      }
      at::Generator generator = at::detail::createCPUGenerator(
          DeriveKey(DeriveKey(options.seed, kMaskStream), static_cast<uint64_t>(step)));
      torch::Tensor loss = torch::zeros({});
      double distill = 0, density = 0, mass = 0;
      for (int layer = 0; layer < layers; ++layer) {
        const StudentLoss part =
            student.Loss(layer, recorded[layer], options.delta, target, generator);
        loss = loss + part.distill + options.lambda * part.density -
               options.mass_weight * part.mass + options.logit_decay * part.logit_scale;
        distill += part.distill.item<double>();
        density += part.density.item<double>();
        mass += part.mass.item<double>();
      }
      loss = loss / layers;
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();

      status.step = step + 1;
      status.loss = loss.item<double>();
      status.distill = distill / layers;
      status.density = density / layers;
      status.mass = mass / layers;
      status.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!std::isfinite(status.loss)) {
        return absl::InternalError(absl::StrCat("calibration diverged at step ", status.step,
                                                " (loss ", status.loss,
                                                "); try a smaller --learning-rate"));
      }
      if (progress) progress(status);
      if (status.step % options.checkpoint_every == 0 || status.step == options.steps) {
        RETURN_IF_ERROR(SaveCheckpoint(options.output_dir, student, optimizer,
                                       {status.step, status.distill, status.density}, signature));
      }
    }
  } catch (const c10::Error& error) {
    return absl::InternalError(
        absl::StrCat("calibration failed: ", error.what_without_backtrace()));
  }

  std::map<std::string, std::string> metadata = corpus_metadata;
  metadata["calibrated"] = "true";
  metadata["clusters"] = std::to_string(options.clusters);
  metadata["lambda"] = absl::StrCat(options.lambda);
  metadata["delta"] = absl::StrCat(options.delta);
  metadata["mass_weight"] = absl::StrCat(options.mass_weight);
  metadata["logit_decay"] = absl::StrCat(options.logit_decay);
  metadata["train_densities"] =
      absl::StrCat(options.train_density_min, "..", options.train_density_max);
  metadata["steps"] = std::to_string(std::max(options.steps, first_step));
  metadata["batch"] = std::to_string(options.batch);
  metadata["learning_rate"] = absl::StrCat(options.learning_rate);
  metadata["seed"] = std::to_string(options.seed);
  metadata["chunk_tokens"] = std::to_string(chunks[0].size());
  metadata["corpus_fingerprint"] = signature["corpus"].get<std::string>();
  metadata["final_distill"] = absl::StrFormat("%.5f", status.distill);
  metadata["final_density"] = absl::StrFormat("%.5f", status.density);
  metadata["init"] = "reference: Linear default, clusters kaiming-normal";
  ASSIGN_OR_RETURN(std::shared_ptr<const SbmParameters> calibrated,
                   student.Snapshot(std::move(metadata)));
  SbmCalibrationResult result;
  result.sbm_path = JoinPath(options.output_dir, SbmParameters::kFileName);
  RETURN_IF_ERROR(calibrated->Save(result.sbm_path));
  result.first_step = first_step;
  result.steps = std::max(options.steps, first_step);
  result.distill = status.distill;
  result.density = status.density;
  result.mass = status.mass;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace docsparse::convert
