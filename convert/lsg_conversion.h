// `docsparse-convert lsg`: extends a BERT, RoBERTa, DistilBERT or BART
// checkpoint to its LSG form (Condevaux & Harispe 2022) exactly as the
// reference converter does (github.com/ccdv-ai/convert_checkpoint_to_lsg at
// c56734b, convert_checkpoint.py with its default arguments):
//   - position tables tiled to --max-length (offset rows of RoBERTa/BART kept
//     in front; BART's encoder and decoder tables both);
//   - a 512-row global embedding table: the position table's strided rows
//     (lsg_positions.h) + the BOS (else CLS) word embedding for row 0, the
//     MASK word embedding for the others, + token type 0 for BERT;
//   - config.json: every original key, then the LSG fields (given, else the
//     input's own when it is already LSG, else the LSG*Config defaults),
//     architectures ["LSG<arch>"], auto_map, base_model_prefix "lsg",
//     max_position_embeddings = max length (+2 for RoBERTa), _name_or_path;
//   - tensor names as transformers saves the LSG class named by the
//     architecture: unprefixed for the base class (e.g. BertModel,
//     "embeddings.global_embeddings.weight"), under "bert." / "roberta." /
//     "distilbert." / "model." for task classes.
// Where we differ from the reference, on purpose:
//   - tensors keep their dtype (the reference loads in float32 and saves
//     float32); the arithmetic runs in that dtype;
//   - tensors the LSG class would create from random init (e.g. a head
//     missing from the input) are not invented; tensors the class does not
//     save are dropped: the stale position_ids / token_type_ids buffers (the
//     LSG classes register them non-persistent) and, for a base-class
//     conversion of a task checkpoint, the head weights;
//   - tables shorter than 512 positions are refused (the reference pads them
//     with unseeded random draws), and RoBERTa/BART tables are always filled
//     to the full length (see TilePositions);
//   - the modeling_lsg_*.py file that the reference copies next to the model
//     (auto_map points at it) is not written: Python loaders need it from the
//     reference repository.
#ifndef DOCSPARSE_CONVERT_LSG_CONVERSION_H_
#define DOCSPARSE_CONVERT_LSG_CONVERSION_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "convert/special_tokens.h"
#include "model/checkpoint/safetensors.h"
#include "model/checkpoint/safetensors_writer.h"
#include "nlohmann/json.hpp"

namespace docsparse::convert {

// The converter's knobs. Unset LSG fields keep the input's values when the
// input is already an LSG model, else the reference's defaults (in
// parentheses).
struct LsgOptions {
  int64_t max_length = 4096;  // positions after conversion (reference --max_sequence_length)

  std::optional<int64_t> block_size;                  // (128)
  std::optional<int64_t> sparse_block_size;           // (128)
  std::optional<int64_t> sparsity_factor;             // (2)
  std::optional<std::string> sparsity_type;           // ("norm")
  std::optional<int64_t> num_global_tokens;           // (1), in [1, 512]
  std::optional<bool> adaptive;                       // (true)
  std::optional<bool> mask_first_token;               // (false)
  std::optional<bool> pool_with_global;               // (true)
  std::optional<int64_t> lsh_num_pre_rounds;          // (1)
  std::optional<bool> pass_global_tokens_to_decoder;  // BART only (true)

  // Reference conversion arguments.
  std::string architecture;               // "" = config's architectures[0], else the default
  int64_t global_positional_stride = 64;  // --global_positional_stride
  bool use_token_ids = true;              // BERT: add token type 0 to the globals
  bool keep_first_global_token = false;   // LSG input: keep global row 0
  bool resize_lsg = false;                // LSG input: only re-tile positions
  std::string name_or_path;               // config "_name_or_path" (reference: output path)
};

// One tensor of the converted checkpoint.
struct ConvertedTensor {
  std::string name;
  // Copied from the input unchanged (its bytes borrowed from the Checkpoint)...
  std::optional<TensorView> source;
  // ...or computed here (contiguous, CPU, the input table's dtype).
  at::Tensor computed;

  TensorBytes bytes() const;
};

struct LsgConversion {
  std::string model_type;        // "bert", "roberta", "distilbert", "bart"
  std::string lsg_architecture;  // e.g. "LSGBertModel"
  std::string prefix;            // of the converted tensor names, e.g. "" or "bert."
  nlohmann::json config;         // config.json to write
  // Every tensor to write (the borrowed ones stay valid while the input
  // Checkpoint lives).
  std::vector<ConvertedTensor> tensors;
  // What was dropped, renamed or decided, one line each, for the user.
  std::vector<std::string> notes;
};

// The model types the converter handles, for messages: "bert, roberta, ...".
std::string SupportedModelTypes();

// Converts in memory. `config` is the input's config.json; `tokens` its
// special tokens (ReadSpecialTokens). INVALID_ARGUMENT naming the field,
// flag or tensor on any inconsistency.
absl::StatusOr<LsgConversion> ConvertToLsg(const Checkpoint& checkpoint,
                                           const nlohmann::json& config,
                                           const ConverterSpecialTokens& tokens,
                                           const LsgOptions& options);

// What ConvertLsgFolder wrote.
struct LsgFolderSummary {
  LsgConversion conversion;
  std::vector<std::string> files_written;  // names inside the output folder
  uint64_t weight_bytes = 0;               // size of model.safetensors
};

// The whole command: reads `input_dir` (config.json, model.safetensors or a
// sharded index, tokenizer files), converts, and writes `output_dir`
// (created if missing; must not be the input folder): model.safetensors
// (metadata {"format": "pt"}), config.json (sorted keys, 2-space indent, as
// transformers writes it), the tokenizer files copied, tokenizer_config.json
// with model_max_length = max length (created when absent, as the reference's
// tokenizer.save_pretrained does), and generation_config.json /
// docsparse.json copied when present. `progress` reports the weights'
// writing.
absl::StatusOr<LsgFolderSummary> ConvertLsgFolder(const std::string& input_dir,
                                                  const std::string& output_dir,
                                                  const LsgOptions& options,
                                                  const WriteProgressCallback& progress = nullptr);

}  // namespace docsparse::convert

#endif  // DOCSPARSE_CONVERT_LSG_CONVERSION_H_
