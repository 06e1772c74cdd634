// Writer for Hugging Face safetensors files: the inverse of
// model/checkpoint/safetensors.h, producing what the reference Python/Rust
// implementation (`safetensors.torch.save_file`) produces:
//   - 8-byte little-endian header length N, then N bytes of compact UTF-8
//     JSON, padded with spaces so that the data section starts on an 8-byte
//     boundary, then the tensors' bytes back to back;
//   - the header holds `__metadata__` first (when given), then one entry per
//     tensor, {"dtype", "shape", "data_offsets"} in that key order;
//   - tensors are laid out by descending dtype (the Rust `Dtype` order:
//     I64 > F64 > F32 > I32 > BF16 > F16 > I16 > I8 > U8 > BOOL), then by
//     name, so that every tensor starts at a multiple of its element size.
// Given the same tensors and metadata, the bytes equal save_file's.
#ifndef DOCSPARSE_MODEL_CHECKPOINT_SAFETENSORS_WRITER_H_
#define DOCSPARSE_MODEL_CHECKPOINT_SAFETENSORS_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/checkpoint/safetensors.h"

namespace docsparse {

// One tensor to write. The bytes are borrowed (a checkpoint's mapping, or a
// buffer the caller owns) and must stay valid until the write returns. They
// are little-endian and C-contiguous, exactly as they go to disk.
struct TensorBytes {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // empty for a 0-d scalar
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  // A view read from a checkpoint, to copy unchanged (possibly renamed).
  static TensorBytes FromView(const TensorView& view) {
    return {view.name, view.dtype, view.shape, view.data, view.nbytes};
  }
};

// Where a write stands; passed to the progress callback after the header and
// after every chunk of tensor data (at most kProgressChunkBytes each).
struct WriteProgress {
  size_t tensors_done = 0;
  size_t tensors_total = 0;
  uint64_t bytes_done = 0;  // tensor bytes written so far
  uint64_t bytes_total = 0;
};
using WriteProgressCallback = std::function<void(const WriteProgress&)>;

inline constexpr size_t kProgressChunkBytes = size_t{16} << 20;

// The header (length prefix included) and the order of `tensors` in the data
// section. Fails with INVALID_ARGUMENT naming the tensor when a name is empty,
// is "__metadata__" or appears twice, or when nbytes is not product(shape) x
// the dtype's size.
struct SafetensorsLayout {
  std::string header;         // 8-byte length + padded JSON
  std::vector<size_t> order;  // indices into `tensors`, in file order
  uint64_t data_bytes = 0;    // size of the data section
};
absl::StatusOr<SafetensorsLayout> LayoutSafetensors(
    const std::vector<TensorBytes>& tensors, const std::map<std::string, std::string>& metadata);

// The whole file in memory (tests, small files).
absl::StatusOr<std::string> SerializeSafetensors(
    const std::vector<TensorBytes>& tensors, const std::map<std::string, std::string>& metadata);

// Writes the file at `path`: first to `path` + ".tmp" in the same folder,
// flushed and fsync'ed, then renamed over `path`, so a reader (or a crash)
// never sees a half-written checkpoint. Errors name the path; the temporary
// file is removed on failure. `progress` may be null.
absl::Status WriteSafetensorsFile(const std::string& path, const std::vector<TensorBytes>& tensors,
                                  const std::map<std::string, std::string>& metadata,
                                  const WriteProgressCallback& progress = nullptr);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_CHECKPOINT_SAFETENSORS_WRITER_H_
