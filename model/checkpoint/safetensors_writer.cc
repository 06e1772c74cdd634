#include "model/checkpoint/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; big-endian hosts need a byte-swapping copy");

namespace docsparse {
namespace {

// The position of each dtype in the Rust crate's `Dtype` enum (whose derived
// Ord the writer sorts by, descending). Only the relative order of the dtypes
// we support matters.
int RustDtypeRank(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return 0;
    case DType::kU8:
      return 1;
    case DType::kI8:
      return 2;
    case DType::kI16:
      return 3;
    case DType::kF16:
      return 4;
    case DType::kBF16:
      return 5;
    case DType::kI32:
      return 6;
    case DType::kF32:
      return 7;
    case DType::kF64:
      return 8;
    case DType::kI64:
      return 9;
  }
  return -1;
}

absl::Status CheckTensor(const TensorBytes& tensor) {
  if (tensor.name.empty()) return absl::InvalidArgumentError("tensor with an empty name");
  if (tensor.name == "__metadata__") {
    return absl::InvalidArgumentError("a tensor may not be called '__metadata__'");
  }
  uint64_t numel = 1;
  for (int64_t d : tensor.shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("tensor '%s': negative dimension %d", tensor.name, d));
    }
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("tensor '%s': shape overflows", tensor.name));
    }
  }
  uint64_t expected = 0;
  if (__builtin_mul_overflow(numel, DTypeSize(tensor.dtype), &expected) ||
      expected != tensor.nbytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor '%s': %d bytes given, but its shape of %s needs %d", tensor.name,
                        tensor.nbytes, DTypeName(tensor.dtype), expected));
  }
  if (tensor.nbytes > 0 && tensor.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("tensor '%s': no data", tensor.name));
  }
  return absl::OkStatus();
}

// write(2) until done; EINTR-safe.
absl::Status WriteAll(int fd, const uint8_t* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      return absl::Status(absl::ErrnoToStatusCode(error),
                          absl::StrCat(path, ": write failed: ", std::strerror(error)));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SafetensorsLayout> LayoutSafetensors(
    const std::vector<TensorBytes>& tensors, const std::map<std::string, std::string>& metadata) {
  std::set<std::string_view> names;
  for (const TensorBytes& tensor : tensors) {
    RETURN_IF_ERROR(CheckTensor(tensor));
    if (!names.insert(tensor.name).second) {
      return absl::InvalidArgumentError(absl::StrFormat("tensor '%s' is given twice", tensor.name));
    }
  }
  SafetensorsLayout layout;
  layout.order.resize(tensors.size());
  std::iota(layout.order.begin(), layout.order.end(), 0);
  std::sort(layout.order.begin(), layout.order.end(), [&](size_t a, size_t b) {
    const int rank_a = RustDtypeRank(tensors[a].dtype);
    const int rank_b = RustDtypeRank(tensors[b].dtype);
    if (rank_a != rank_b) return rank_a > rank_b;
    return tensors[a].name < tensors[b].name;
  });

  // ordered_json keeps insertion order: __metadata__ first, then file order,
  // and dtype/shape/data_offsets inside each entry, as serde writes them.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  for (size_t index : layout.order) {
    const TensorBytes& tensor = tensors[index];
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = std::string(DTypeName(tensor.dtype));
    entry["shape"] = tensor.shape;
    entry["data_offsets"] = {offset, offset + tensor.nbytes};
    header[tensor.name] = std::move(entry);
    offset += tensor.nbytes;
  }
  layout.data_bytes = offset;

  std::string json = header.dump();
  // The data section must start 8-aligned; the reference pads with spaces.
  json.append((8 - json.size() % 8) % 8, ' ');
  layout.header.resize(8);
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) layout.header[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  layout.header += json;
  return layout;
}

absl::StatusOr<std::string> SerializeSafetensors(
    const std::vector<TensorBytes>& tensors, const std::map<std::string, std::string>& metadata) {
  ASSIGN_OR_RETURN(SafetensorsLayout layout, LayoutSafetensors(tensors, metadata));
  std::string bytes = std::move(layout.header);
  bytes.reserve(bytes.size() + layout.data_bytes);
  for (size_t index : layout.order) {
    bytes.append(reinterpret_cast<const char*>(tensors[index].data), tensors[index].nbytes);
  }
  return bytes;
}

absl::Status WriteSafetensorsFile(const std::string& path, const std::vector<TensorBytes>& tensors,
                                  const std::map<std::string, std::string>& metadata,
                                  const WriteProgressCallback& progress) {
  ASSIGN_OR_RETURN(const SafetensorsLayout layout, LayoutSafetensors(tensors, metadata));
  const std::string tmp_path = path + ".tmp";
  const int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int error = errno;
    return absl::Status(absl::ErrnoToStatusCode(error),
                        absl::StrCat(tmp_path, ": cannot create: ", std::strerror(error)));
  }
  WriteProgress state;
  state.tensors_total = tensors.size();
  state.bytes_total = layout.data_bytes;
  auto write_all = [&]() -> absl::Status {
    RETURN_IF_ERROR(WriteAll(fd, reinterpret_cast<const uint8_t*>(layout.header.data()),
                             layout.header.size(), tmp_path));
    if (progress) progress(state);
    for (size_t index : layout.order) {
      const TensorBytes& tensor = tensors[index];
      // Chunked so that a single 100 MB embedding table still moves the
      // progress line.
      for (size_t done = 0; done < tensor.nbytes;) {
        const size_t n = std::min(kProgressChunkBytes, tensor.nbytes - done);
        RETURN_IF_ERROR(WriteAll(fd, tensor.data + done, n, tmp_path));
        done += n;
        state.bytes_done += n;
        if (progress && done < tensor.nbytes) progress(state);
      }
      ++state.tensors_done;
      if (progress) progress(state);
    }
    if (::fsync(fd) != 0) {
      const int error = errno;
      return absl::Status(absl::ErrnoToStatusCode(error),
                          absl::StrCat(tmp_path, ": fsync failed: ", std::strerror(error)));
    }
    return absl::OkStatus();
  };
  absl::Status status = write_all();
  if (::close(fd) != 0 && status.ok()) {
    const int error = errno;
    status = absl::Status(absl::ErrnoToStatusCode(error),
                          absl::StrCat(tmp_path, ": close failed: ", std::strerror(error)));
  }
  if (status.ok() && ::rename(tmp_path.c_str(), path.c_str()) != 0) {
    const int error = errno;
    status = absl::Status(
        absl::ErrnoToStatusCode(error),
        absl::StrCat(path, ": cannot rename ", tmp_path, " to it: ", std::strerror(error)));
  }
  if (!status.ok()) ::unlink(tmp_path.c_str());
  return status;
}

}  // namespace docsparse
