// UTF-8 validation and decoding, the Unicode character classes of the
// Hugging Face BERT normalizer and pre-tokenizer, and the normalizer itself.
//
// The classes are those of HF `tokenizers` (Rust), not of today's Unicode:
// its BertNormalizer and BertPreTokenizer ask the `unicode_categories` crate
// (tables frozen at Unicode 8.0) for control, format, private-use,
// punctuation and non-spacing-mark characters, and Rust's standard library
// (a recent Unicode) for whitespace and lowercasing. Matching HF id for id
// means reproducing that mix; tests/model/text/unicode_text_test.cc checks every
// code point against tables written by HF itself.
#ifndef DOCSPARSE_MODEL_TEXT_UNICODE_TEXT_H_
#define DOCSPARSE_MODEL_TEXT_UNICODE_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace docsparse {

// OK when `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF); otherwise InvalidArgument naming the
// byte offset of the first bad sequence and what is wrong with it.
absl::Status ValidateUtf8(std::string_view text);

// Decodes the code point that starts at text[*pos] and moves *pos past it.
// Requires *pos < text.size(). Never reads out of bounds: a malformed
// sequence decodes as U+FFFD and advances one byte, so callers that skipped
// validation get garbage ids, not a crash.
char32_t DecodeUtf8At(std::string_view text, size_t* pos);

// All code points of `text`, or ValidateUtf8's error.
absl::StatusOr<std::u32string> DecodeUtf8(std::string_view text);

// Appends the UTF-8 form of `cp` (which must be a Unicode scalar value).
void AppendUtf8(char32_t cp, std::string* out);
std::string EncodeUtf8(std::u32string_view text);

// Rust's char::is_whitespace (the White_Space property): BertPreTokenizer
// splits on these, and BertNormalizer's clean_text turns those it keeps
// into ' '.
bool IsBertWhitespace(char32_t c);

// Characters BertNormalizer's clean_text deletes: U+0000, U+FFFD and the
// Cc, Cf and Co categories (Unicode 8.0), except '\t', '\n' and '\r'.
// Unassigned code points (Cn) are kept, unlike Python's BertTokenizer.
bool IsBertRemovedControl(char32_t c);

// BertPreTokenizer's punctuation: ASCII punctuation (which includes symbols
// such as '$', '+', '^') or a P* category in Unicode 8.0.
bool IsBertPunctuation(char32_t c);

// The CJK ideograph ranges BertNormalizer surrounds with spaces.
bool IsBertChineseChar(char32_t c);

// General category Mn in Unicode 8.0: what strip_accents removes after NFD.
bool IsBertNonspacingMark(char32_t c);

// The `\w` class of Rust's regex crate (Alphabetic, marks, decimal digits,
// connector punctuation, Join_Control): where a single_word added token may
// not touch.
bool IsWordCharacter(char32_t c);

// Appends Rust's char::to_lowercase(c): the full, context-free mapping
// (U+0130 -> "i\u0307"; a final sigma stays σ).
void AppendLowercase(char32_t c, std::u32string* out);

// Appends the canonical decomposition (NFD) of `text` as HF computes it:
// ICU's, except that U+11938 (decomposable since Unicode 13) stays whole.
void AppendNfd(std::u32string_view text, std::u32string* out);

// HF normalizers::BertNormalizer. strip_accents is already resolved (HF's
// None means "same as lowercase").
struct BertNormalizerOptions {
  bool clean_text = true;            // Drop controls, whitespace -> ' '.
  bool handle_chinese_chars = true;  // ' ' around CJK ideographs.
  bool strip_accents = true;         // NFD, then drop non-spacing marks.
  bool lowercase = true;
};

// `text` (UTF-8; malformed bytes read as U+FFFD) through BertNormalizer.
std::string BertNormalize(std::string_view text, const BertNormalizerOptions& options);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TEXT_UNICODE_TEXT_H_
