// The rows of an encoder batch still being computed. A row whose request
// nobody waits for any more (EncoderBatch::abandoned) leaves the batch
// between layers: the remaining rows run on, and the output keeps its shape
// with zeros where the dropped rows were.
#ifndef DOCSPARSE_MODEL_ENCODER_LIVE_ROWS_H_
#define DOCSPARSE_MODEL_ENCODER_LIVE_ROWS_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "model/attention/attention.h"
#include "model/attention/cost_model.h"

namespace docsparse {

class LiveRows {
 public:
  // Every row of a batch live: `options` ([rows] or empty for defaults),
  // `costs` ([rows] or empty when nothing is counted) and `positions`
  // ([rows]: real positions per row).
  LiveRows(std::vector<ItemAttentionOptions> options, std::vector<CostAccount*> costs,
           std::vector<int64_t> positions);

  size_t size() const { return batch_rows_.size(); }

  // Indices (among the live rows, in order) of the rows whose batch row
  // `abandoned` does not name.
  std::vector<int64_t> Kept(const std::function<bool(size_t batch_row)>& abandoned) const;

  // Keeps live rows `keep` (from Kept) of `x` ([live rows, ...]) and of the
  // per-row vectors below; returns the narrowed x.
  at::Tensor Keep(const std::vector<int64_t>& keep, const at::Tensor& x);

  // `x` ([live rows, ...]) as [batch_rows, ...]: each live row at its batch
  // row, zeros at dropped ones. Returns x itself when none was dropped.
  at::Tensor Scatter(const at::Tensor& x, int64_t batch_rows) const;

  // Per live row, in x's row order.
  std::vector<ItemAttentionOptions> options;
  std::vector<CostAccount*> costs;
  std::vector<int64_t> positions;

 private:
  std::vector<int64_t> batch_rows_;  // the batch row of each live row
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ENCODER_LIVE_ROWS_H_
