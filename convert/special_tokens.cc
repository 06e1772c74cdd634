#include "convert/special_tokens.h"

#include <map>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "convert/model_files.h"

namespace docsparse::convert {
namespace {

using json = nlohmann::ordered_json;

struct TokenTexts {
  std::optional<std::string> bos, cls, mask;
};

// The special tokens a transformers tokenizer class has when its files do
// not name them (its __init__ defaults).
TokenTexts ClassDefaults(std::string_view tokenizer_class, std::string_view model_type) {
  std::string_view name = tokenizer_class;
  if (name.size() >= 4 && name.substr(name.size() - 4) == "Fast") name.remove_suffix(4);
  const bool bert_like = name == "BertTokenizer" || name == "DistilBertTokenizer" ||
                         name == "ElectraTokenizer" ||
                         (name.empty() && (model_type == "bert" || model_type == "distilbert"));
  const bool roberta_like = name == "RobertaTokenizer" || name == "BartTokenizer" ||
                            name == "CamembertTokenizer" || name == "XLMRobertaTokenizer" ||
                            (name.empty() && (model_type == "roberta" || model_type == "bart"));
  if (bert_like) return {std::nullopt, "[CLS]", "[MASK]"};
  if (roberta_like) return {"<s>", "<s>", "<mask>"};
  if (name == "PegasusTokenizer" || (name.empty() && model_type == "pegasus")) {
    return {std::nullopt, std::nullopt, "<mask_2>"};
  }
  return {};
}

// A *_token entry: "text", {"content": "text", ...} or null.
absl::Status ApplyTokenEntry(const json& file, std::string_view key, const std::string& source,
                             std::optional<std::string>* text) {
  const auto it = file.find(key);
  if (it == file.end()) return absl::OkStatus();
  if (it->is_null()) {
    text->reset();
  } else if (it->is_string()) {
    *text = it->get<std::string>();
  } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    *text = (*it)["content"].get<std::string>();
  } else {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: field '%s': expected a string or an object with \"content\"", source, key));
  }
  return absl::OkStatus();
}

absl::Status ApplyTokenFile(const json& file, const std::string& source, TokenTexts* texts) {
  if (!file.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": expected a JSON object"));
  }
  RETURN_IF_ERROR(ApplyTokenEntry(file, "bos_token", source, &texts->bos));
  RETURN_IF_ERROR(ApplyTokenEntry(file, "cls_token", source, &texts->cls));
  RETURN_IF_ERROR(ApplyTokenEntry(file, "mask_token", source, &texts->mask));
  return absl::OkStatus();
}

using Vocab = std::unordered_map<std::string, int64_t>;

absl::Status ReadTokenizerJsonVocab(const json& root, const std::string& source, Vocab* vocab) {
  const auto model = root.find("model");
  if (model == root.end() || !model->is_object() || !model->contains("vocab")) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": missing field 'model.vocab'"));
  }
  const json& entries = (*model)["vocab"];
  if (entries.is_object()) {  // WordPiece, BPE, WordLevel: token -> id
    for (const auto& [token, id] : entries.items()) {
      if (!id.is_number_integer()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: model.vocab['%s']: expected an integer id", source, token));
      }
      (*vocab)[token] = id.get<int64_t>();
    }
  } else if (entries.is_array()) {  // Unigram: [[piece, score], ...], id = index
    for (size_t i = 0; i < entries.size(); ++i) {
      if (!entries[i].is_array() || entries[i].empty() || !entries[i][0].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: model.vocab[%d]: expected [piece, score]", source, i));
      }
      (*vocab)[entries[i][0].get<std::string>()] = static_cast<int64_t>(i);
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": field 'model.vocab': expected an object or an array"));
  }
  if (const auto added = root.find("added_tokens"); added != root.end() && added->is_array()) {
    for (const json& token : *added) {
      if (token.is_object() && token.contains("content") && token["content"].is_string() &&
          token.contains("id") && token["id"].is_number_integer()) {
        (*vocab)[token["content"].get<std::string>()] = token["id"].get<int64_t>();
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ConverterSpecialTokens> ReadSpecialTokens(const std::string& model_dir,
                                                         std::string_view model_type) {
  const std::string config_path = JoinPath(model_dir, "tokenizer_config.json");
  const std::string map_path = JoinPath(model_dir, "special_tokens_map.json");
  ASSIGN_OR_RETURN(const std::optional<json> tokenizer_config, ReadJsonFileIfExists(config_path));
  ASSIGN_OR_RETURN(const std::optional<json> special_map, ReadJsonFileIfExists(map_path));

  std::string tokenizer_class;
  if (tokenizer_config.has_value() && tokenizer_config->is_object()) {
    const auto it = tokenizer_config->find("tokenizer_class");
    if (it != tokenizer_config->end() && it->is_string()) tokenizer_class = it->get<std::string>();
  }
  TokenTexts texts = ClassDefaults(tokenizer_class, model_type);
  if (tokenizer_config.has_value()) {
    RETURN_IF_ERROR(ApplyTokenFile(*tokenizer_config, config_path, &texts));
  }
  if (special_map.has_value()) RETURN_IF_ERROR(ApplyTokenFile(*special_map, map_path, &texts));

  Vocab vocab;
  const std::string tokenizer_json_path = JoinPath(model_dir, "tokenizer.json");
  const std::string vocab_txt_path = JoinPath(model_dir, "vocab.txt");
  const std::string vocab_json_path = JoinPath(model_dir, "vocab.json");
  ASSIGN_OR_RETURN(const std::optional<json> tokenizer_json,
                   ReadJsonFileIfExists(tokenizer_json_path));
  if (tokenizer_json.has_value()) {
    RETURN_IF_ERROR(ReadTokenizerJsonVocab(*tokenizer_json, tokenizer_json_path, &vocab));
  } else if (IsRegularFile(vocab_txt_path)) {
    ASSIGN_OR_RETURN(const std::string text, ReadTextFile(vocab_txt_path));
    // BertTokenizer.load_vocab: one token per line, id = line number.
    std::vector<std::string> lines = absl::StrSplit(text, '\n');
    if (!lines.empty() && lines.back().empty()) lines.pop_back();
    for (size_t i = 0; i < lines.size(); ++i) vocab[lines[i]] = static_cast<int64_t>(i);
  } else {
    ASSIGN_OR_RETURN(const std::optional<json> vocab_json, ReadJsonFileIfExists(vocab_json_path));
    if (!vocab_json.has_value()) {
      return absl::NotFoundError(absl::StrFormat(
          "%s: no tokenizer vocabulary (tokenizer.json, vocab.txt or vocab.json): the "
          "converter needs the ids of the BOS/CLS and MASK tokens",
          model_dir));
    }
    if (!vocab_json->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(vocab_json_path, ": expected an object"));
    }
    for (const auto& [token, id] : vocab_json->items()) {
      if (!id.is_number_integer()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: '%s': expected an integer id", vocab_json_path, token));
      }
      vocab[token] = id.get<int64_t>();
    }
  }
  const std::string added_path = JoinPath(model_dir, "added_tokens.json");
  ASSIGN_OR_RETURN(const std::optional<json> added, ReadJsonFileIfExists(added_path));
  if (added.has_value() && added->is_object()) {
    for (const auto& [token, id] : added->items()) {
      if (id.is_number_integer()) vocab[token] = id.get<int64_t>();
    }
  }
  if (tokenizer_config.has_value() && tokenizer_config->is_object()) {
    const auto decoder = tokenizer_config->find("added_tokens_decoder");
    if (decoder != tokenizer_config->end() && decoder->is_object()) {
      for (const auto& [id_text, token] : decoder->items()) {
        int64_t id = 0;
        if (token.is_object() && token.contains("content") && token["content"].is_string() &&
            absl::SimpleAtoi(id_text, &id)) {
          vocab[token["content"].get<std::string>()] = id;
        }
      }
    }
  }

  auto resolve = [&](const std::optional<std::string>& text) {
    SpecialToken token;
    if (!text.has_value()) return token;
    token.text = *text;
    if (const auto it = vocab.find(*text); it != vocab.end()) token.id = it->second;
    return token;
  };
  return ConverterSpecialTokens{resolve(texts.bos), resolve(texts.cls), resolve(texts.mask)};
}

}  // namespace docsparse::convert
