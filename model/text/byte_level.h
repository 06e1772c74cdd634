// The byte-level pieces of GPT-2 style BPE tokenizers (GPT-2, RoBERTa, BART),
// as Hugging Face `tokenizers` 0.2x implements its ByteLevel pre-tokenizer
// and decoder:
//   - the split regex
//       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//     matched by hand (a backtracking engine's first-alternative-wins
//     semantics) with HF's Unicode classes;
//   - GPT-2's table mapping each byte to a printable character, and back;
//   - Rust's String::from_utf8_lossy, which the decoder ends with.
#ifndef DOCSPARSE_MODEL_TEXT_BYTE_LEVEL_H_
#define DOCSPARSE_MODEL_TEXT_BYTE_LEVEL_H_

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace docsparse {

// How the split regex sees a code point. HF matches it with Oniguruma, whose
// tables are Unicode 16.0: \p{L} and \p{N} are the L* and N* categories,
// \s is the White_Space property.
enum class Gpt2CharClass { kLetter, kNumber, kWhitespace, kOther };
Gpt2CharClass ClassifyForGpt2(char32_t c);

// Appends the pieces of `text` the split regex matches, in order; they cover
// `text` exactly. Malformed UTF-8 reads as U+FFFD, one byte at a time.
void SplitGpt2Words(std::string_view text, std::vector<std::string_view>* words);

// GPT-2's bytes_to_unicode(): byte b -> the UTF-8 of its stand-in character
// (printable bytes stand for themselves; the others map to U+0100 upwards).
const std::array<std::string, 256>& ByteLevelChars();

// The byte a stand-in character stands for, or -1 for any other character.
int ByteOfByteLevelChar(char32_t c);

// `bytes` as text: each maximal ill-formed subsequence replaced by U+FFFD,
// as Rust's String::from_utf8_lossy (and Python's errors="replace") do.
std::string Utf8Lossy(std::string_view bytes);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TEXT_BYTE_LEVEL_H_
