#include "convert/lsg_conversion.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "convert/lsg_positions.h"
#include "convert/model_files.h"

namespace docsparse::convert {
namespace {

using json = nlohmann::json;

// What the reference's per-architecture ConversionScript subclass knows.
struct LsgFamily {
  std::string model_type;
  std::string task_prefix;    // base_model_prefix of the task classes, with "."
  int64_t positional_offset;  // rows kept in front of the position tables
  int64_t config_offset;      // added to max_position_embeddings in config.json
  bool adds_token_type;       // update_global adds token_type_embeddings[0]
  std::string base_architecture;
  std::string default_architecture;
  std::vector<std::string> architectures;                     // convertible (without "LSG")
  std::string modeling_module;                                // auto_map module
  std::vector<std::pair<std::string, std::string>> auto_map;  // Auto* -> class
  std::vector<std::string> word_embeddings;                   // candidates, relative to the prefix
  std::vector<std::string> position_tables;
  std::string global_embeddings;
  std::string token_type_embeddings;       // "" when none
  std::vector<std::string> stale_buffers;  // non-persistent in the LSG classes
};

const std::vector<LsgFamily>& Families() {
  static const std::vector<LsgFamily>* families = new std::vector<LsgFamily>{
      {"bert",
       "bert.",
       0,
       0,
       true,
       "BertModel",
       "BertForPreTraining",
       {"BertModel", "BertForMaskedLM", "BertForPreTraining", "BertLMHeadModel",
        "BertForMultipleChoice", "BertForQuestionAnswering", "BertForSequenceClassification",
        "BertForTokenClassification"},
       "modeling_lsg_bert",
       {{"AutoConfig", "LSGBertConfig"},
        {"AutoModel", "LSGBertModel"},
        {"AutoModelForCausalLM", "LSGBertLMHeadModel"},
        {"AutoModelForMaskedLM", "LSGBertForMaskedLM"},
        {"AutoModelForPreTraining", "LSGBertForPreTraining"},
        {"AutoModelForMultipleChoice", "LSGBertForMultipleChoice"},
        {"AutoModelForQuestionAnswering", "LSGBertForQuestionAnswering"},
        {"AutoModelForSequenceClassification", "LSGBertForSequenceClassification"},
        {"AutoModelForTokenClassification", "LSGBertForTokenClassification"}},
       {"embeddings.word_embeddings.weight"},
       {"embeddings.position_embeddings.weight"},
       "embeddings.global_embeddings.weight",
       "embeddings.token_type_embeddings.weight",
       {"embeddings.position_ids", "embeddings.token_type_ids"}},
      {"roberta",
       "roberta.",
       2,
       2,
       // The reference's RoBERTa update_global never adds token types.
       false,
       "RobertaModel",
       "RobertaForMaskedLM",
       {"RobertaModel", "RobertaForMaskedLM", "RobertaForCausalLM", "RobertaForMultipleChoice",
        "RobertaForQuestionAnswering", "RobertaForSequenceClassification",
        "RobertaForTokenClassification"},
       "modeling_lsg_roberta",
       {{"AutoConfig", "LSGRobertaConfig"},
        {"AutoModel", "LSGRobertaModel"},
        {"AutoModelForCausalLM", "LSGRobertaForCausalLM"},
        {"AutoModelForMaskedLM", "LSGRobertaForMaskedLM"},
        {"AutoModelForMultipleChoice", "LSGRobertaForMultipleChoice"},
        {"AutoModelForQuestionAnswering", "LSGRobertaForQuestionAnswering"},
        {"AutoModelForSequenceClassification", "LSGRobertaForSequenceClassification"},
        {"AutoModelForTokenClassification", "LSGRobertaForTokenClassification"}},
       {"embeddings.word_embeddings.weight"},
       {"embeddings.position_embeddings.weight"},
       "embeddings.global_embeddings.weight",
       "",
       {"embeddings.position_ids", "embeddings.token_type_ids"}},
      {"distilbert",
       "distilbert.",
       0,
       0,
       false,
       "DistilBertModel",
       "DistilBertForMaskedLM",
       {"DistilBertModel", "DistilBertForMaskedLM", "DistilBertForMultipleChoice",
        "DistilBertForQuestionAnswering", "DistilBertForSequenceClassification",
        "DistilBertForTokenClassification"},
       "modeling_lsg_distilbert",
       {{"AutoConfig", "LSGDistilBertConfig"},
        {"AutoModel", "LSGDistilBertModel"},
        {"AutoModelForMaskedLM", "LSGDistilBertForMaskedLM"},
        {"AutoModelForMultipleChoice", "LSGDistilBertForMultipleChoice"},
        {"AutoModelForQuestionAnswering", "LSGDistilBertForQuestionAnswering"},
        {"AutoModelForSequenceClassification", "LSGDistilBertForSequenceClassification"},
        {"AutoModelForTokenClassification", "LSGDistilBertForTokenClassification"}},
       {"embeddings.word_embeddings.weight"},
       {"embeddings.position_embeddings.weight"},
       "embeddings.global_embeddings.weight",
       "",
       {"embeddings.position_ids"}},
      {"bart",
       "model.",
       2,
       0,
       false,
       "BartModel",
       "BartForConditionalGeneration",
       // BartForCausalLM has no encoder: the reference cannot convert it.
       {"BartModel", "BartForConditionalGeneration", "BartForQuestionAnswering",
        "BartForSequenceClassification"},
       "modeling_lsg_bart",
       {{"AutoConfig", "LSGBartConfig"},
        {"AutoModel", "LSGBartModel"},
        {"AutoModelForCausalLM", "LSGBartForCausalLM"},
        {"AutoModelForQuestionAnswering", "LSGBartForQuestionAnswering"},
        {"AutoModelForSequenceClassification", "LSGBartForSequenceClassification"},
        {"AutoModelForSeq2SeqLM", "LSGBartForConditionalGeneration"}},
       // `shared` is tied to the encoder's embed_tokens; a file keeps one.
       {"shared.weight", "encoder.embed_tokens.weight"},
       {"encoder.embed_positions.weight", "decoder.embed_positions.weight"},
       "encoder.global_embeddings.weight",
       "",
       {}},
  };
  return *families;
}

constexpr std::string_view kSparsityTypes[] = {"none",   "norm",         "lsh",        "pooling",
                                               "stride", "block_stride", "bos_pooling"};

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

std::optional<at::ScalarType> TorchDtype(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return at::kDouble;
    case DType::kF32:
      return at::kFloat;
    case DType::kF16:
      return at::kHalf;
    case DType::kBF16:
      return at::kBFloat16;
    default:
      return std::nullopt;
  }
}

// A float table of the checkpoint as a tensor (a copy: the mapped bytes may
// be unaligned for their element type).
absl::StatusOr<at::Tensor> ReadTable(const Checkpoint& checkpoint, const std::string& name) {
  ASSIGN_OR_RETURN(const TensorView view, checkpoint.Get(name));
  const std::optional<at::ScalarType> dtype = TorchDtype(view.dtype);
  if (!dtype.has_value()) {
    return Invalid(
        absl::StrFormat("%s: tensor '%s' is %s; the converter needs a floating-point "
                        "table (F32, F16, BF16, F64)",
                        checkpoint.model_dir(), name, DTypeName(view.dtype)));
  }
  if (view.shape.size() != 2) {
    return Invalid(absl::StrFormat("%s: tensor '%s' has %d dimensions, expected 2",
                                   checkpoint.model_dir(), name, view.shape.size()));
  }
  at::Tensor tensor = at::empty(view.shape, at::TensorOptions().dtype(*dtype));
  std::memcpy(tensor.data_ptr(), view.data, view.nbytes);
  return tensor;
}

// The LSG config field `key`: the flag's value, else the input config's,
// else the default.
template <typename T>
absl::StatusOr<T> LsgField(const json& config, const char* key, const std::optional<T>& flag,
                           T fallback) {
  if (flag.has_value()) return *flag;
  const auto it = config.find(key);
  if (it == config.end()) return fallback;
  try {
    if constexpr (std::is_same_v<T, std::string>) {
      if (it->is_null()) return std::string("none");
    }
    if constexpr (std::is_same_v<T, int64_t>) {
      if (!it->is_number_integer()) throw std::runtime_error("not an integer");
    }
    if constexpr (std::is_same_v<T, bool>) {
      if (!it->is_boolean()) throw std::runtime_error("not a boolean");
    }
    return it->get<T>();
  } catch (const std::exception&) {
    return Invalid(
        absl::StrFormat("config.json: field '%s': unexpected value %s", key, it->dump()));
  }
}

struct ResolvedLsgFields {
  int64_t block_size, sparse_block_size, sparsity_factor, num_global_tokens, lsh_num_pre_rounds;
  std::string sparsity_type;
  bool adaptive, mask_first_token, pool_with_global, pass_global_tokens_to_decoder;
};

// The checks LSG*Config.__init__ makes, as errors: the reference turns some
// into warnings and silently changes the value, which would make the model
// differ from what the user asked for.
absl::StatusOr<ResolvedLsgFields> ResolveLsgFields(const json& config, const LsgOptions& o) {
  ResolvedLsgFields f;
  ASSIGN_OR_RETURN(f.block_size, LsgField<int64_t>(config, "block_size", o.block_size, 128));
  ASSIGN_OR_RETURN(f.sparse_block_size,
                   LsgField<int64_t>(config, "sparse_block_size", o.sparse_block_size, 128));
  ASSIGN_OR_RETURN(f.sparsity_factor,
                   LsgField<int64_t>(config, "sparsity_factor", o.sparsity_factor, 2));
  ASSIGN_OR_RETURN(f.sparsity_type,
                   LsgField<std::string>(config, "sparsity_type", o.sparsity_type, "norm"));
  ASSIGN_OR_RETURN(f.num_global_tokens,
                   LsgField<int64_t>(config, "num_global_tokens", o.num_global_tokens, 1));
  ASSIGN_OR_RETURN(f.lsh_num_pre_rounds,
                   LsgField<int64_t>(config, "lsh_num_pre_rounds", o.lsh_num_pre_rounds, 1));
  ASSIGN_OR_RETURN(f.adaptive, LsgField<bool>(config, "adaptive", o.adaptive, true));
  ASSIGN_OR_RETURN(f.mask_first_token,
                   LsgField<bool>(config, "mask_first_token", o.mask_first_token, false));
  ASSIGN_OR_RETURN(f.pool_with_global,
                   LsgField<bool>(config, "pool_with_global", o.pool_with_global, true));
  ASSIGN_OR_RETURN(f.pass_global_tokens_to_decoder,
                   LsgField<bool>(config, "pass_global_tokens_to_decoder",
                                  o.pass_global_tokens_to_decoder, true));
  if (f.block_size < 1) {
    return Invalid(absl::StrFormat("--block-size: %d must be at least 1", f.block_size));
  }
  // 0 is the reference's "local attention only": no sparse keys at all.
  if (f.sparse_block_size < 0) {
    return Invalid(
        absl::StrFormat("--sparse-block-size: %d must not be negative", f.sparse_block_size));
  }
  if (f.sparsity_factor < 1) {
    return Invalid(absl::StrFormat("--sparsity-factor: %d must be at least 1", f.sparsity_factor));
  }
  if (f.block_size % f.sparsity_factor != 0) {
    return Invalid(absl::StrFormat(
        "--sparsity-factor: %d does not divide --block-size %d (LSG needs block_size %% "
        "sparsity_factor == 0)",
        f.sparsity_factor, f.block_size));
  }
  if (std::find(std::begin(kSparsityTypes), std::end(kSparsityTypes), f.sparsity_type) ==
      std::end(kSparsityTypes)) {
    std::vector<std::string> names(std::begin(kSparsityTypes), std::end(kSparsityTypes));
    return Invalid(absl::StrFormat("--sparsity-type: unsupported value \"%s\" (supported: %s)",
                                   f.sparsity_type, absl::StrJoin(names, ", ")));
  }
  if (f.num_global_tokens < 1 || f.num_global_tokens > kLsgGlobalTableRows) {
    return Invalid(absl::StrFormat("--num-global-tokens: %d is out of range [1, %d]",
                                   f.num_global_tokens, kLsgGlobalTableRows));
  }
  if (f.lsh_num_pre_rounds < 0) {
    return Invalid(
        absl::StrFormat("--lsh-num-pre-rounds: %d must not be negative", f.lsh_num_pre_rounds));
  }
  if (f.mask_first_token && !f.pool_with_global) {
    return Invalid(
        "--mask-first-token needs --pool-with-global (LSG cannot mask the first token "
        "without pooling with the global tokens)");
  }
  return f;
}

const LsgFamily* FindFamily(const std::string& model_type) {
  for (const LsgFamily& family : Families()) {
    if (family.model_type == model_type) return &family;
  }
  return nullptr;
}

// get_architecture + validate_architecture: the architecture named by the
// flag, else config.json's first, else the family default; with or without
// the "LSG" prefix. Returns the name without "LSG".
absl::StatusOr<std::string> ChooseArchitecture(const LsgFamily& family, const json& config,
                                               const LsgOptions& options, std::string* as_given) {
  std::string name = options.architecture;
  std::string source = "--architecture";
  if (name.empty()) {
    source = "config.json: architectures";
    const auto it = config.find("architectures");
    if (it != config.end() && it->is_string()) {
      name = it->get<std::string>();
    } else if (it != config.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
      name = (*it)[0].get<std::string>();
    } else if (it != config.end() && !it->is_null()) {
      return Invalid("config.json: field 'architectures': expected a list of strings");
    }
  }
  if (name.empty()) name = std::string(family.default_architecture);
  *as_given = name;
  const std::string bare = absl::StartsWith(name, "LSG") ? name.substr(3) : name;
  if (std::find(family.architectures.begin(), family.architectures.end(), bare) ==
      family.architectures.end()) {
    std::vector<std::string> names(family.architectures.begin(), family.architectures.end());
    return Invalid(absl::StrFormat(
        "%s: \"%s\" cannot be converted to LSG (supported for model_type %s: %s, also with "
        "an \"LSG\" prefix)",
        source, name, family.model_type, absl::StrJoin(names, ", ")));
  }
  return bare;
}

// The BOS id as the reference picks it: tokenizer bos, else cls, else
// config.json's bos_token_id.
absl::StatusOr<int64_t> BosId(const ConverterSpecialTokens& tokens, const json& config,
                              const std::string& model_dir) {
  for (const SpecialToken* token : {&tokens.bos, &tokens.cls}) {
    if (token->text.empty()) continue;
    if (!token->id.has_value()) {
      return Invalid(
          absl::StrFormat("%s: special token \"%s\" is not in the tokenizer's "
                          "vocabulary",
                          model_dir, token->text));
    }
    return *token->id;
  }
  const auto it = config.find("bos_token_id");
  if (it != config.end() && it->is_number_integer()) return it->get<int64_t>();
  return Invalid(absl::StrFormat(
      "%s: the tokenizer names neither a BOS nor a CLS token, and config.json has no "
      "bos_token_id: the first global token cannot be initialised",
      model_dir));
}

}  // namespace

TensorBytes ConvertedTensor::bytes() const {
  if (source.has_value()) {
    TensorBytes b = TensorBytes::FromView(*source);
    b.name = name;
    return b;
  }
  TensorBytes b;
  b.name = name;
  switch (computed.scalar_type()) {
    case at::kDouble:
      b.dtype = DType::kF64;
      break;
    case at::kHalf:
      b.dtype = DType::kF16;
      break;
    case at::kBFloat16:
      b.dtype = DType::kBF16;
      break;
    default:
      b.dtype = DType::kF32;
      break;
  }
  b.shape = computed.sizes().vec();
  b.data = static_cast<const uint8_t*>(computed.data_ptr());
  b.nbytes = computed.nbytes();
  return b;
}

std::string SupportedModelTypes() {
  std::vector<std::string> names;
  for (const LsgFamily& family : Families()) names.emplace_back(family.model_type);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<LsgConversion> ConvertToLsg(const Checkpoint& checkpoint, const json& config,
                                           const ConverterSpecialTokens& tokens,
                                           const LsgOptions& options) {
  const std::string& dir = checkpoint.model_dir();
  if (!config.is_object()) return Invalid("config.json: expected a JSON object");
  const auto type_it = config.find("model_type");
  if (type_it == config.end() || !type_it->is_string()) {
    return Invalid("config.json: missing string field 'model_type'");
  }
  const std::string model_type = type_it->get<std::string>();
  const LsgFamily* family = FindFamily(model_type);
  if (family == nullptr) {
    return Invalid(absl::StrFormat(
        "config.json: field 'model_type': \"%s\" cannot be converted to LSG (supported: %s)",
        model_type, SupportedModelTypes()));
  }
  if (options.max_length < 1) {
    return Invalid(absl::StrFormat("--max-length: %d must be positive", options.max_length));
  }
  if (options.global_positional_stride < 1) {
    return Invalid(absl::StrFormat("--global-positional-stride: %d must be positive",
                                   options.global_positional_stride));
  }
  ASSIGN_OR_RETURN(const ResolvedLsgFields fields, ResolveLsgFields(config, options));

  std::string initial_architecture;
  ASSIGN_OR_RETURN(const std::string architecture,
                   ChooseArchitecture(*family, config, options, &initial_architecture));
  const bool is_base = architecture == family->base_architecture;
  const auto prefix_it = config.find("base_model_prefix");
  const bool is_lsg = (prefix_it != config.end() && *prefix_it == "lsg") ||
                      absl::StrContains(initial_architecture, "LSG");

  LsgConversion result;
  result.model_type = model_type;
  result.lsg_architecture = absl::StrCat("LSG", architecture);
  result.prefix = is_base ? "" : std::string(family->task_prefix);

  // Where the encoder's tensors sit in the input (it need not match the
  // architecture: transformers adds or strips the prefix on load).
  std::string in_prefix;
  std::string word_name;
  for (const std::string& prefix : {std::string(), family->task_prefix}) {
    for (const std::string& word : family->word_embeddings) {
      if (word_name.empty() && checkpoint.Has(absl::StrCat(prefix, word))) {
        in_prefix = prefix;
        word_name = absl::StrCat(prefix, word);
      }
    }
  }
  if (word_name.empty()) {
    return Invalid(absl::StrFormat("%s: checkpoint has no word embeddings ('%s' or '%s%s')", dir,
                                   family->word_embeddings[0], family->task_prefix,
                                   family->word_embeddings[0]));
  }
  const std::string& out_prefix = result.prefix;
  if (in_prefix != out_prefix) {
    result.notes.push_back(absl::StrFormat(
        "tensor names: the input's encoder is under \"%s\" but %s saves it under \"%s\"; "
        "renamed%s",
        in_prefix, result.lsg_architecture, out_prefix,
        out_prefix.empty() ? " (and tensors outside the encoder, i.e. the task head, dropped)"
                           : " (the task head, absent from the input, is not invented)"));
  }

  // Tables.
  ASSIGN_OR_RETURN(const at::Tensor word, ReadTable(checkpoint, word_name));
  std::map<std::string, at::Tensor> replaced;  // relative name -> new tensor
  const std::string first_table = absl::StrCat(in_prefix, family->position_tables[0]);
  ASSIGN_OR_RETURN(const at::Tensor positions, ReadTable(checkpoint, first_table));
  if (positions.size(0) <= family->positional_offset) {
    return Invalid(
        absl::StrFormat("%s: tensor '%s' has only %d rows", dir, first_table, positions.size(0)));
  }

  const std::string global_name = absl::StrCat(in_prefix, family->global_embeddings);
  const bool keep_first = is_lsg && options.keep_first_global_token;
  if (options.keep_first_global_token && !is_lsg) {
    result.notes.push_back(
        "--keep-first-global-token ignored: the input is not an LSG model (as the reference)");
  }
  if (is_lsg && options.resize_lsg) {
    result.notes.push_back("--resize-lsg: global embeddings kept, only positions re-tiled");
  } else {
    if (is_lsg && !keep_first) {
      result.notes.push_back(
          "the input is already an LSG model: its global embeddings are re-initialised (use "
          "--resize-lsg to keep them, --keep-first-global-token to keep the first)");
    }
    ASSIGN_OR_RETURN(const int64_t bos_id, BosId(tokens, config, dir));
    if (tokens.mask.text.empty() || !tokens.mask.id.has_value()) {
      return Invalid(absl::StrFormat(
          tokens.mask.text.empty()
              ? "%s: the tokenizer has no mask token: the global tokens cannot be initialised"
              : "%s: mask token \"%s\" is not in the tokenizer's vocabulary",
          dir, tokens.mask.text));
    }
    std::optional<at::Tensor> token_type_row;
    if (family->adds_token_type && options.use_token_ids) {
      const std::string name = absl::StrCat(in_prefix, family->token_type_embeddings);
      if (checkpoint.Has(name)) {
        ASSIGN_OR_RETURN(const at::Tensor types, ReadTable(checkpoint, name));
        token_type_row = types[0];
      } else {
        result.notes.push_back(
            absl::StrFormat("no '%s': global embeddings get no token type", name));
      }
    }
    std::optional<at::Tensor> previous;
    if (keep_first) {
      if (!checkpoint.Has(global_name)) {
        return Invalid(absl::StrFormat(
            "%s: --keep-first-global-token: the LSG input has no tensor '%s'", dir, global_name));
      }
      ASSIGN_OR_RETURN(previous, ReadTable(checkpoint, global_name));
    }
    absl::StatusOr<at::Tensor> global = GlobalEmbeddings(
        positions.slice(0, family->positional_offset), word, bos_id, *tokens.mask.id,
        token_type_row, options.global_positional_stride, previous);
    if (!global.ok()) {
      return Invalid(absl::StrFormat("%s: global embeddings from '%s': %s", dir, first_table,
                                     global.status().message()));
    }
    replaced[std::string(family->global_embeddings)] = *std::move(global);
  }

  for (const std::string& table_name : family->position_tables) {
    const std::string name = absl::StrCat(in_prefix, table_name);
    ASSIGN_OR_RETURN(const at::Tensor table, ReadTable(checkpoint, name));
    absl::StatusOr<at::Tensor> tiled =
        TilePositions(table, family->positional_offset, options.max_length);
    if (!tiled.ok()) {
      return Invalid(absl::StrFormat("--max-length: %s (tensor '%s' of %s)",
                                     tiled.status().message(), name, dir));
    }
    const int64_t reference_rows =
        family->positional_offset +
        (options.max_length / table.size(0) + 1) * (table.size(0) - family->positional_offset);
    if (reference_rows < family->positional_offset + options.max_length) {
      result.notes.push_back(absl::StrFormat(
          "'%s': the reference converter would write only %d rows here (its tiling falls "
          "short); written in full: %d rows",
          name, reference_rows, tiled->size(0)));
    }
    replaced[std::string(table_name)] = *std::move(tiled);
  }

  // The output tensor list.
  std::set<std::string> stale(family->stale_buffers.begin(), family->stale_buffers.end());
  std::vector<std::string> dropped;
  for (const std::string& name : checkpoint.names()) {
    // Tensors outside the encoder prefix belong to the task head.
    const bool in_encoder = in_prefix.empty() || absl::StartsWith(name, in_prefix);
    if (!in_encoder && out_prefix.empty()) {  // a base class has no head
      dropped.push_back(name);
      continue;
    }
    const std::string relative = in_encoder ? name.substr(in_prefix.size()) : name;
    if (in_encoder && stale.count(relative) > 0) {
      dropped.push_back(name);
      continue;
    }
    ConvertedTensor tensor;
    tensor.name = in_encoder ? absl::StrCat(out_prefix, relative) : name;
    if (const auto it = replaced.find(relative); in_encoder && it != replaced.end()) {
      tensor.computed = it->second;
      replaced.erase(it);
    } else {
      ASSIGN_OR_RETURN(TensorView view, checkpoint.Get(name));
      tensor.source = std::move(view);
    }
    result.tensors.push_back(std::move(tensor));
  }
  for (auto& [relative, computed] : replaced) {  // the new global table
    result.tensors.push_back({absl::StrCat(out_prefix, relative), std::nullopt, computed});
  }
  if (!dropped.empty()) {
    result.notes.push_back(absl::StrFormat("dropped (not saved by %s): %s", result.lsg_architecture,
                                           absl::StrJoin(dropped, ", ")));
  }

  // config.json.
  json out = config;
  out["adaptive"] = fields.adaptive;
  out["base_model_prefix"] = "lsg";
  out["block_size"] = fields.block_size;
  out["lsh_num_pre_rounds"] = fields.lsh_num_pre_rounds;
  out["mask_first_token"] = fields.mask_first_token;
  out["num_global_tokens"] = fields.num_global_tokens;
  out["pool_with_global"] = fields.pool_with_global;
  out["sparse_block_size"] = fields.sparse_block_size;
  out["sparsity_factor"] = fields.sparsity_factor;
  out["sparsity_type"] = fields.sparsity_type;
  if (model_type == "bart") {
    out["pass_global_tokens_to_decoder"] = fields.pass_global_tokens_to_decoder;
  }
  out["architectures"] = json::array({result.lsg_architecture});
  json auto_map = json::object();
  for (const auto& [auto_class, lsg_class] : family->auto_map) {
    auto_map[std::string(auto_class)] = absl::StrCat(family->modeling_module, ".", lsg_class);
  }
  out["auto_map"] = std::move(auto_map);
  out["max_position_embeddings"] = options.max_length + family->config_offset;
  if (!options.name_or_path.empty()) out["_name_or_path"] = options.name_or_path;
  result.config = std::move(out);
  return result;
}

absl::StatusOr<LsgFolderSummary> ConvertLsgFolder(const std::string& input_dir,
                                                  const std::string& output_dir,
                                                  const LsgOptions& options,
                                                  const WriteProgressCallback& progress) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(input_dir, error)) {
    return absl::NotFoundError(absl::StrCat("--input: ", input_dir, ": not a folder"));
  }
  if (output_dir.empty()) return Invalid("--output: empty path");
  if (fs::exists(output_dir, error) && fs::equivalent(input_dir, output_dir, error)) {
    return Invalid(absl::StrCat("--output: ", output_dir,
                                " is the input folder; write the LSG model to a new folder"));
  }
  const std::string config_path = JoinPath(input_dir, "config.json");
  if (!IsRegularFile(config_path)) {
    return absl::NotFoundError(absl::StrCat(config_path, ": not found"));
  }
  ASSIGN_OR_RETURN(const std::string config_text, ReadTextFile(config_path));
  json config;
  try {
    config = json::parse(config_text);
  } catch (const json::exception& e) {
    return Invalid(absl::StrCat(config_path, ": not valid JSON: ", e.what()));
  }
  const std::string model_type =
      config.is_object() && config.contains("model_type") && config["model_type"].is_string()
          ? config["model_type"].get<std::string>()
          : "";
  ASSIGN_OR_RETURN(const std::unique_ptr<Checkpoint> checkpoint, Checkpoint::Open(input_dir));
  ASSIGN_OR_RETURN(const ConverterSpecialTokens tokens, ReadSpecialTokens(input_dir, model_type));

  LsgFolderSummary summary;
  ASSIGN_OR_RETURN(summary.conversion, ConvertToLsg(*checkpoint, config, tokens, options));

  fs::create_directories(output_dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("--output: cannot create ", output_dir, ": ", error.message()));
  }
  std::vector<TensorBytes> tensors;
  for (const ConvertedTensor& tensor : summary.conversion.tensors) {
    tensors.push_back(tensor.bytes());
  }
  const std::string weights_path = JoinPath(output_dir, Checkpoint::kSingleFile);
  RETURN_IF_ERROR(WriteSafetensorsFile(weights_path, tensors, {{"format", "pt"}}, progress));
  summary.weight_bytes = fs::file_size(weights_path, error);
  summary.files_written.push_back(Checkpoint::kSingleFile);

  // transformers' to_json_string: sorted keys, indent 2, ASCII escapes.
  RETURN_IF_ERROR(WriteFileAtomically(JoinPath(output_dir, "config.json"),
                                      summary.conversion.config.dump(2, ' ', true) + "\n"));
  summary.files_written.push_back("config.json");

  // tokenizer.save_pretrained writes model_max_length = the new length.
  const std::string tokenizer_config_path = JoinPath(input_dir, "tokenizer_config.json");
  ASSIGN_OR_RETURN(std::optional<nlohmann::ordered_json> tokenizer_config,
                   ReadJsonFileIfExists(tokenizer_config_path));
  if (!tokenizer_config.has_value()) tokenizer_config = nlohmann::ordered_json::object();
  if (!tokenizer_config->is_object()) {
    return Invalid(absl::StrCat(tokenizer_config_path, ": expected a JSON object"));
  }
  (*tokenizer_config)["model_max_length"] = options.max_length;
  RETURN_IF_ERROR(WriteFileAtomically(JoinPath(output_dir, "tokenizer_config.json"),
                                      tokenizer_config->dump(2) + "\n"));
  summary.files_written.push_back("tokenizer_config.json");

  // Copied unchanged: the tokenizer's own files, generation defaults, and
  // our serving config.
  for (const char* name :
       {"tokenizer.json", "vocab.txt", "vocab.json", "merges.txt", "special_tokens_map.json",
        "added_tokens.json", "spiece.model", "sentencepiece.bpe.model", "tokenizer.model",
        "generation_config.json", "docsparse.json"}) {
    const std::string from = JoinPath(input_dir, name);
    if (!IsRegularFile(from)) continue;
    RETURN_IF_ERROR(CopyFileAtomically(from, JoinPath(output_dir, name)));
    summary.files_written.push_back(name);
  }
  return summary;
}

}  // namespace docsparse::convert
