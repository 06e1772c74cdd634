#include "model/text/added_vocabulary.h"

#include <algorithm>

#include "model/text/unicode_text.h"

namespace docsparse {
namespace {

bool IsContinuationByte(char b) { return (static_cast<uint8_t>(b) & 0xC0) == 0x80; }

// The code point that ends text[..end), and where it starts.
char32_t CodePointBefore(std::string_view text, size_t end, size_t* start) {
  size_t pos = end - 1;
  while (pos > 0 && IsContinuationByte(text[pos])) --pos;
  *start = pos;
  return DecodeUtf8At(text, &pos);
}

// Rust regex `\w$` and `^\w`: what single_word looks at.
bool EndsWithWordChar(std::string_view text, size_t end) {
  size_t start = 0;
  return end > 0 && IsWordCharacter(CodePointBefore(text, end, &start));
}
bool StartsWithWordChar(std::string_view text, size_t begin) {
  return begin < text.size() && IsWordCharacter(DecodeUtf8At(text, &begin));
}

}  // namespace

bool AddedTokenSpec::operator==(const AddedTokenSpec& other) const {
  return content == other.content && special == other.special && normalized == other.normalized &&
         lstrip == other.lstrip && rstrip == other.rstrip && single_word == other.single_word;
}

void AddedVocabulary::Build(const std::vector<AddedTokenSpec>& tokens,
                            const std::function<int32_t(std::string_view)>& model_id,
                            int32_t model_vocab_entries) {
  by_id_.clear();
  ids_.clear();
  special_.clear();
  // HF computes the first free id once per add_tokens call; loading adds all
  // the tokens of the file in one call, to an empty vocabulary.
  int32_t next_id = model_vocab_entries;
  for (const AddedTokenSpec& token : tokens) {
    if (token.content.empty()) continue;
    const auto known = ids_.find(token.content);
    if (known != ids_.end()) {
      const auto owner = by_id_.find(known->second);
      if (owner != by_id_.end() && owner->second == token) continue;
    }
    int32_t id = known != ids_.end() ? known->second : model_id(token.content);
    if (id < 0) id = next_id++;
    ids_[token.content] = id;
    if (token.special) special_.insert(token.content);
    by_id_[id] = token;
  }
  Index(false, &raw_);
  Index(true, &normalized_);
}

void AddedVocabulary::Index(bool normalized, MatchSet* set) const {
  set->tokens.clear();
  for (auto& bucket : set->by_first_byte) bucket.clear();
  for (const auto& [id, token] : by_id_) {
    if (token.normalized != normalized) continue;
    set->tokens.push_back({token.content, id, token.lstrip, token.rstrip, token.single_word});
  }
  for (size_t i = 0; i < set->tokens.size(); ++i) {
    set->by_first_byte[static_cast<uint8_t>(set->tokens[i].text[0])].push_back(i);
  }
  for (auto& bucket : set->by_first_byte) {
    std::stable_sort(bucket.begin(), bucket.end(), [set](size_t a, size_t b) {
      return set->tokens[a].text.size() > set->tokens[b].text.size();
    });
  }
}

void AddedVocabulary::Split(std::string_view text, bool normalized,
                            std::vector<Segment>* out) const {
  const MatchSet& set = normalized ? normalized_ : raw_;
  size_t start_offset = 0;
  size_t pos = 0;
  while (!set.tokens.empty() && pos < text.size()) {
    const Candidate* best = nullptr;
    for (const size_t index : set.by_first_byte[static_cast<uint8_t>(text[pos])]) {
      const Candidate& candidate = set.tokens[index];
      if (text.compare(pos, candidate.text.size(), candidate.text) == 0) {
        best = &candidate;  // Longest first: the first match is the longest.
        break;
      }
    }
    if (best == nullptr) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + best->text.size();
    // HF's automaton resumes at the end of the match as found, even when the
    // match is discarded or rstrip moves its end.
    pos = stop;
    if (best->single_word && (EndsWithWordChar(text, start) || StartsWithWordChar(text, stop))) {
      continue;
    }
    if (best->lstrip) {
      size_t new_start = start;
      while (new_start > 0) {
        size_t prev = 0;
        if (!IsBertWhitespace(CodePointBefore(text, new_start, &prev))) break;
        new_start = prev;
      }
      // Whitespace an earlier match already took stays with it.
      start = std::max(new_start, start_offset);
    }
    while (best->rstrip && stop < text.size()) {
      size_t next = stop;
      if (!IsBertWhitespace(DecodeUtf8At(text, &next))) break;
      stop = next;
    }
    if (start_offset < start) out->push_back({text.substr(start_offset, start - start_offset)});
    out->push_back({text.substr(start, stop - start), best->id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out->push_back({text.substr(start_offset)});
}

int32_t AddedVocabulary::IdOf(std::string_view content) const {
  const auto it = ids_.find(std::string(content));
  return it == ids_.end() ? -1 : it->second;
}

const AddedTokenSpec* AddedVocabulary::TokenWithId(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

bool AddedVocabulary::IsSpecialContent(std::string_view text) const {
  return special_.count(std::string(text)) > 0;
}

}  // namespace docsparse
