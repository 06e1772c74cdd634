// One row of fp32 scratch for a kernel that works row by row (softmax,
// LayerNorm): on the stack up to 4,096 floats (a few KiB, the usual width),
// on the heap beyond, allocated once per call rather than per row.
#ifndef DOCSPARSE_KERNELS_ROW_SCRATCH_H_
#define DOCSPARSE_KERNELS_ROW_SCRATCH_H_

#include <cstdint>
#include <memory>

namespace docsparse {

class RowScratch {
 public:
  explicit RowScratch(int64_t width) {
    if (width > kStackFloats) {
      heap_.reset(new float[width]);
      data_ = heap_.get();
    }
  }
  RowScratch(const RowScratch&) = delete;
  RowScratch& operator=(const RowScratch&) = delete;

  float* data() { return data_; }

 private:
  static constexpr int64_t kStackFloats = 4096;
  alignas(64) float stack_[kStackFloats];
  std::unique_ptr<float[]> heap_;
  float* data_ = stack_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_ROW_SCRATCH_H_
