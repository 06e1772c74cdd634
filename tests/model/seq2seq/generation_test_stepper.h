// A DecoderStepper for generation tests: each row is a (document, decoder
// prefix) pair and its next-token logits are a fixed function of that pair,
// so expected outputs can be derived by hand or by transformers running the
// same function. Records the rows of every Step so tests can see sequences
// leave the batch.
#ifndef DOCSPARSE_TESTS_MODEL_GENERATION_TEST_STEPPER_H_
#define DOCSPARSE_TESTS_MODEL_GENERATION_TEST_STEPPER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "model/seq2seq/decoder_stepper.h"

namespace docsparse {

class TableStepper : public DecoderStepper {
 public:
  using LogitsFunction =
      std::function<std::vector<float>(int64_t document, const std::vector<int64_t>& prefix)>;

  // One row per document, nothing fed yet.
  TableStepper(const std::vector<int64_t>& documents, LogitsFunction logits)
      : logits_(std::move(logits)) {
    for (const int64_t document : documents) rows_.push_back(Row{document, {}});
  }

  int64_t rows() const override { return static_cast<int64_t>(rows_.size()); }

  absl::StatusOr<at::Tensor> Step(const at::Tensor& tokens) override {
    if (tokens.dim() != 1 || tokens.size(0) != rows() || tokens.scalar_type() != at::kLong) {
      return absl::InvalidArgumentError(
          absl::StrFormat("Step: expected [%d] int64 tokens", rows()));
    }
    rows_per_step_.push_back(rows());
    std::vector<float> flat;
    int64_t vocab = 0;
    for (int64_t r = 0; r < rows(); ++r) {
      Row& row = rows_[static_cast<size_t>(r)];
      row.prefix.push_back(tokens[r].item<int64_t>());
      const std::vector<float> next = logits_(row.document, row.prefix);
      vocab = static_cast<int64_t>(next.size());
      flat.insert(flat.end(), next.begin(), next.end());
    }
    return at::tensor(flat, at::kFloat).reshape({rows(), vocab});
  }

  absl::Status Reorder(const at::Tensor& source) override {
    ++reorders_;
    std::vector<Row> next;
    for (int64_t i = 0; i < source.size(0); ++i) {
      const int64_t from = source[i].item<int64_t>();
      if (from < 0 || from >= rows()) return absl::InvalidArgumentError("Reorder: bad source row");
      next.push_back(rows_[static_cast<size_t>(from)]);
    }
    rows_ = std::move(next);
    return absl::OkStatus();
  }

  double flops() const override { return 0.0; }

  const std::vector<int64_t>& rows_per_step() const { return rows_per_step_; }
  int reorders() const { return reorders_; }

 private:
  struct Row {
    int64_t document;
    std::vector<int64_t> prefix;  // tokens fed so far
  };
  LogitsFunction logits_;
  std::vector<Row> rows_;
  std::vector<int64_t> rows_per_step_;
  int reorders_ = 0;
};

}  // namespace docsparse

#endif  // DOCSPARSE_TESTS_MODEL_GENERATION_TEST_STEPPER_H_
