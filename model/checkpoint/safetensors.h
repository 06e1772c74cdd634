// Reader for Hugging Face safetensors checkpoints: one file, or a folder with
// a sharded `model.safetensors.index.json`. Tensors are exposed as borrowed
// views into a read-only memory mapping; nothing is copied.
//
// Validation accepts exactly what the reference Rust implementation
// (huggingface/safetensors, which Python's `safetensors` uses) accepts, minus
// dtypes we cannot represent (FP8, FP4, unsigned 16/32/64-bit):
//   - the file is >= 8 bytes; the little-endian u64 header length N is at most
//     kMaxHeaderBytes and 8 + N lies within the file;
//   - the header is UTF-8 JSON, an object; `__metadata__` (optional) maps
//     strings to strings; no key appears twice;
//   - every other entry has a known `dtype`, a `shape` of non-negative integers
//     and `data_offsets` [begin, end] with begin <= end, relative to the data
//     section (the bytes after the header);
//   - end - begin == product(shape) * dtype size, computed without overflow;
//   - sorted by offset, the tensors tile the data section exactly: the first
//     begins at 0, each begins where the previous ends (no overlap, no hole)
//     and the last ends at the end of the file (no trailing bytes). The spec
//     says buffers are contiguous; a hole or tail means a corrupt or crafted
//     file, so we refuse it rather than guess.
// Unknown keys inside a tensor entry are ignored, as the reference does.
//
// Error codes: DATA_LOSS when the file is shorter than its header says (a
// truncated download: header or a tensor runs past the end); INVALID_ARGUMENT
// for every other malformation. Messages name the file, the tensor and the
// field, e.g. "model.safetensors: tensor 'x': data_offsets end 123 beyond data
// section of 100 bytes".
#ifndef DOCSPARSE_MODEL_CHECKPOINT_SAFETENSORS_H_
#define DOCSPARSE_MODEL_CHECKPOINT_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace docsparse {

enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

// The safetensors spelling: "F32", "BF16", "BOOL", ...
std::string_view DTypeName(DType dtype);
// Bytes per element.
size_t DTypeSize(DType dtype);
// Inverse of DTypeName; nullopt for names we do not support.
std::optional<DType> DTypeFromName(std::string_view name);

// One tensor of a safetensors file. `data` points into the file's mapping and
// stays valid as long as the SafetensorsFile (or Checkpoint) that produced it.
// Data is little-endian, C-contiguous, and NOT necessarily aligned to the
// element size (the format only aligns the data section to 8 bytes, and
// writers need not order tensors by alignment): copy it (memcpy, or
// torch::from_blob(...).clone()) before reading it as typed values.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // empty for a 0-d scalar
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  // Number of elements (1 for a scalar, 0 when any dimension is 0).
  int64_t numel() const;
};

// One parsed safetensors file. Immutable after construction, so all const
// methods are thread-safe.
class SafetensorsFile {
 public:
  // The reference implementation's limit: a header bigger than this is not a
  // real checkpoint, and parsing it would cost unbounded memory.
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;

  // Maps `path` read-only (MAP_PRIVATE) and validates it (rules above).
  // The mapping lives until the returned object is destroyed. As with any
  // mmap, truncating the file on disk while it is mapped makes later reads of
  // the vanished pages fault (SIGBUS); model folders must not be rewritten in
  // place while served.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  // Validates `bytes` (a whole file's contents) without copying them; the
  // views borrow `bytes`, which the caller keeps alive and unchanged for the
  // lifetime of the returned object. `source_name` prefixes error messages.
  // Open() is Parse() over a mapping; fuzzers and tests call this directly.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Parse(std::string_view bytes,
                                                                std::string source_name);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // The tensor called `name`, or nullptr.
  const TensorView* Find(std::string_view name) const;
  // All tensor names, sorted.
  std::vector<std::string> names() const;
  size_t num_tensors() const { return tensors_.size(); }
  // The optional `__metadata__` map (e.g. {"format": "pt"}); empty if absent.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The path (or source name) used in error messages.
  const std::string& source_name() const { return source_name_; }

  // Public only so that the factories can use std::make_unique.
  struct PrivateTag {
    explicit PrivateTag() = default;
  };
  SafetensorsFile(PrivateTag, std::string source_name);

 private:
  // Fills tensors_ and metadata_ from `bytes`, enforcing every rule above.
  absl::Status Index(std::string_view bytes);

  std::string source_name_;
  void* mapping_ = nullptr;  // owned mmap region, or nullptr for Parse()
  size_t mapping_size_ = 0;
  std::map<std::string, TensorView, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

// The weights of one model folder: `model.safetensors`, or when that is
// absent, the shards named by `model.safetensors.index.json`. Immutable after
// construction; const methods are thread-safe.
class Checkpoint {
 public:
  static constexpr const char* kSingleFile = "model.safetensors";
  static constexpr const char* kIndexFile = "model.safetensors.index.json";

  // Opens and validates every file of the checkpoint in `model_dir`. For a
  // sharded checkpoint, the index's "weight_map" (tensor -> shard file) must:
  // name only files inside `model_dir` (no absolute paths, no ".."
  // components), every named shard must exist and parse, every listed tensor
  // must be in its shard, and every tensor of every shard must be listed for
  // that shard (a stale index is refused rather than half-used).
  // NOT_FOUND when neither file exists.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& model_dir);

  // A copy of the view of tensor `name` (the data stays borrowed from this
  // object); NOT_FOUND naming the tensor and the checkpoint when absent.
  absl::StatusOr<TensorView> Get(std::string_view name) const;
  bool Has(std::string_view name) const;
  // All tensor names, sorted.
  std::vector<std::string> names() const;
  size_t num_tensors() const { return index_.size(); }
  // `model_dir` as given to Open(), for messages.
  const std::string& model_dir() const { return model_dir_; }

  struct PrivateTag {
    explicit PrivateTag() = default;
  };
  Checkpoint(PrivateTag, std::string model_dir);

 private:
  absl::Status OpenSingle(const std::string& path);
  absl::Status OpenSharded(const std::string& index_path);

  std::string model_dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  // Points into files_' views.
  std::map<std::string, const TensorView*, std::less<>> index_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_CHECKPOINT_SAFETENSORS_H_
