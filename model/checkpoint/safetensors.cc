#include "model/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

// Tensor bytes are little-endian and are handed out unconverted.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; big-endian hosts need a "
              "byte-swapping copy");

namespace docsparse {
namespace {

using json = nlohmann::json;

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kF64, "F64", 8},   {DType::kF32, "F32", 4}, {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2}, {DType::kI64, "I64", 8}, {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2},   {DType::kI8, "I8", 1},   {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1},
};

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// A JSON value's type, for "expected X, got Y" messages.
std::string_view JsonTypeName(const json& value) {
  if (value.is_number_unsigned()) return "non-negative integer";
  if (value.is_number_integer()) return "negative integer";
  if (value.is_number_float()) return "non-integer number";
  return value.type_name();
}

// Parses the header, refusing duplicate top-level keys: nlohmann keeps the
// last of two equal keys silently, which would let a file describe one tensor
// twice and have us pick one arbitrarily.
absl::StatusOr<json> ParseHeaderJson(std::string_view text, const std::string& source) {
  std::set<std::string> seen;
  std::string duplicate;
  json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && duplicate.empty() &&
        !seen.insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), on_event);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": header is not valid JSON: ", e.what()));
  }
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: header names tensor '%s' twice", source, duplicate));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: header is a JSON %s, expected an object", source, root.type_name()));
  }
  return root;
}

// A tensor entry before its data pointer is known.
struct Entry {
  TensorView view;
  uint64_t begin = 0;
  uint64_t end = 0;
};

absl::StatusOr<Entry> ParseEntry(const std::string& source, const std::string& name,
                                 const json& value, uint64_t data_size) {
  const std::string where = absl::StrFormat("%s: tensor '%s'", source, name);
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: expected an object with dtype, shape and data_offsets, got %s", where,
                        JsonTypeName(value)));
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(field)) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: missing field '%s'", where, field));
    }
  }
  Entry entry;
  entry.view.name = name;

  const json& dtype = value["dtype"];
  if (!dtype.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: dtype: expected string, got %s", where, JsonTypeName(dtype)));
  }
  const std::optional<DType> parsed_dtype = DTypeFromName(dtype.get_ref<const std::string&>());
  if (!parsed_dtype.has_value()) {
    std::vector<std::string> supported;
    for (const DTypeInfo& info : kDTypes) {
      supported.push_back(std::string(info.name));
    }
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: dtype: unsupported value \"%s\" (supported: %s)", where,
                        dtype.get_ref<const std::string&>(), absl::StrJoin(supported, ", ")));
  }
  entry.view.dtype = *parsed_dtype;

  const json& shape = value["shape"];
  if (!shape.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: shape: expected array, got %s", where, JsonTypeName(shape)));
  }
  // Element count with overflow checks; a zero dimension makes the tensor
  // empty whatever the other dimensions are.
  uint64_t numel = 1;
  bool overflow = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    const json& dim = shape[i];
    if (!dim.is_number_unsigned()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: shape[%d]: expected non-negative integer, got %s", where, i, JsonTypeName(dim)));
    }
    const uint64_t d = dim.get<uint64_t>();
    if (d > static_cast<uint64_t>(INT64_MAX)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: shape[%d]: dimension %d is too large", where, i, d));
    }
    entry.view.shape.push_back(static_cast<int64_t>(d));
    overflow = overflow || __builtin_mul_overflow(numel, d, &numel);
  }
  const bool empty =
      std::find(entry.view.shape.begin(), entry.view.shape.end(), 0) != entry.view.shape.end();
  uint64_t nbytes = 0;
  if (!empty && (overflow || __builtin_mul_overflow(numel, DTypeSize(entry.view.dtype), &nbytes))) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: shape %s of %s overflows a 64-bit byte count", where,
                        ShapeString(entry.view.shape), DTypeName(entry.view.dtype)));
  }

  const json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: data_offsets: expected [begin, end], got %s", where,
                        offsets.is_array() ? absl::StrCat("an array of ", offsets.size())
                                           : std::string(JsonTypeName(offsets))));
  }
  for (int i = 0; i < 2; ++i) {
    if (!offsets[i].is_number_unsigned()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: data_offsets[%d]: expected non-negative integer, got %s", where, i,
                          JsonTypeName(offsets[i])));
    }
  }
  entry.begin = offsets[0].get<uint64_t>();
  entry.end = offsets[1].get<uint64_t>();
  if (entry.begin > entry.end) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: data_offsets begin %d is after end %d",
                                                      where, entry.begin, entry.end));
  }
  if (entry.end > data_size) {
    return absl::DataLossError(absl::StrFormat(
        "%s: data_offsets end %d beyond data section of %d bytes", where, entry.end, data_size));
  }
  if (entry.end - entry.begin != nbytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: shape %s of %s needs %d bytes but data_offsets [%d,%d] span %d", where,
                        ShapeString(entry.view.shape), DTypeName(entry.view.dtype), nbytes,
                        entry.begin, entry.end, entry.end - entry.begin));
  }
  entry.view.nbytes = static_cast<size_t>(nbytes);
  return entry;
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string JoinPath(const std::string& dir, std::string_view file) {
  std::string path = dir;
  if (!path.empty() && path.back() != '/') path += '/';
  path += file;
  return path;
}

// A shard name from the index must stay inside the model folder: the index
// is data, and a crafted one must not make us map arbitrary files.
absl::Status CheckShardPath(const std::string& index_path, const std::string& tensor,
                            const std::string& shard) {
  bool escapes = shard.empty() || shard.front() == '/';
  for (absl::string_view part : absl::StrSplit(shard, '/')) {
    escapes = escapes || part == "..";
  }
  if (escapes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: weight_map['%s']: shard path \"%s\" must be a relative path "
                        "inside the model folder",
                        index_path, tensor, shard));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return absl::DataLossError(absl::StrCat(path, ": read failed"));
  }
  std::string text = std::move(contents).str();
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %d bytes is larger than the %d allowed",
                                                      path, text.size(), max_bytes));
  }
  return text;
}

}  // namespace

std::string_view DTypeName(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info.name;
  }
  return "?";
}

size_t DTypeSize(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info.size;
  }
  return 0;
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return std::nullopt;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // cannot overflow: validated at parse time
  return n;
}

SafetensorsFile::SafetensorsFile(PrivateTag, std::string source_name)
    : source_name_(std::move(source_name)) {}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_size_);
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Parse(std::string_view bytes,
                                                                        std::string source_name) {
  auto file = std::make_unique<SafetensorsFile>(PrivateTag(), std::move(source_name));
  RETURN_IF_ERROR(file->Index(bytes));
  return file;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return absl::Status(absl::ErrnoToStatusCode(error),
                        absl::StrCat(path, ": cannot open: ", std::strerror(error)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  auto file = std::make_unique<SafetensorsFile>(PrivateTag(), path);
  const size_t size = static_cast<size_t>(st.st_size);
  // mmap refuses length 0; an empty file fails validation on its own.
  if (size > 0) {
    void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      return absl::Status(absl::ErrnoToStatusCode(error),
                          absl::StrCat(path, ": mmap failed: ", std::strerror(error)));
    }
    file->mapping_ = mapping;
    file->mapping_size_ = size;
  }
  ::close(fd);  // the mapping keeps the file alive
  RETURN_IF_ERROR(
      file->Index(std::string_view(static_cast<const char*>(file->mapping_), file->mapping_size_)));
  return file;
}

absl::Status SafetensorsFile::Index(std::string_view bytes) {
  const std::string& source = source_name_;
  if (bytes.size() < 8) {
    return absl::DataLossError(absl::StrFormat(
        "%s: file is %d bytes, too short for the 8-byte header length", source, bytes.size()));
  }
  uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) {
    header_size |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  }
  if (header_size > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: header length %d exceeds the limit of %d bytes", source, header_size,
                        kMaxHeaderBytes));
  }
  if (header_size > bytes.size() - 8) {
    return absl::DataLossError(
        absl::StrFormat("%s: header length %d runs past the end of the file (%d bytes)", source,
                        header_size, bytes.size()));
  }
  const std::string_view header = bytes.substr(8, header_size);
  const std::string_view data = bytes.substr(8 + header_size);

  ASSIGN_OR_RETURN(const json root, ParseHeaderJson(header, source));
  std::vector<Entry> entries;
  entries.reserve(root.size());
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: __metadata__: expected object, got %s", source, JsonTypeName(value)));
      }
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          return absl::InvalidArgumentError(
              absl::StrFormat("%s: __metadata__['%s']: expected string, got %s", source, meta_key,
                              JsonTypeName(meta_value)));
        }
        metadata_[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    ASSIGN_OR_RETURN(Entry entry, ParseEntry(source, key, value, data.size()));
    entries.push_back(std::move(entry));
  }

  // Sorted by offset, the tensors must tile the data section exactly. Sorting
  // by (begin, end) puts empty tensors before a non-empty one at the same
  // offset, so they tile too.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.view.name) < std::tie(b.begin, b.end, b.view.name);
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& entry : entries) {
    if (entry.begin < covered) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: tensor '%s': data_offsets [%d,%d] overlap tensor '%s' [%d,%d]",
                          source, entry.view.name, entry.begin, entry.end, previous->view.name,
                          previous->begin, previous->end));
    }
    if (entry.begin > covered) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: tensor '%s': data_offsets begin %d leaves a hole after byte %d "
                          "(tensors must be contiguous)",
                          source, entry.view.name, entry.begin, covered));
    }
    covered = entry.end;
    previous = &entry;
  }
  if (covered != data.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: tensors cover %d bytes but the data section has %d (trailing "
                        "bytes)",
                        source, covered, data.size()));
  }

  const auto* base = reinterpret_cast<const uint8_t*>(data.data());
  for (Entry& entry : entries) {
    entry.view.data = base + entry.begin;
    std::string name = entry.view.name;
    tensors_.emplace(std::move(name), std::move(entry.view));
  }
  return absl::OkStatus();
}

const TensorView* SafetensorsFile::Find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> result;
  result.reserve(tensors_.size());
  for (const auto& [name, view] : tensors_) result.push_back(name);
  return result;
}

Checkpoint::Checkpoint(PrivateTag, std::string model_dir) : model_dir_(std::move(model_dir)) {}

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& model_dir) {
  struct stat st;
  if (::stat(model_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(model_dir, ": model folder not found"));
  }
  auto checkpoint = std::make_unique<Checkpoint>(PrivateTag(), model_dir);
  const std::string single = JoinPath(model_dir, kSingleFile);
  const std::string index = JoinPath(model_dir, kIndexFile);
  // Hugging Face prefers the single file when both exist; so do we.
  if (IsRegularFile(single)) {
    RETURN_IF_ERROR(checkpoint->OpenSingle(single));
  } else if (IsRegularFile(index)) {
    RETURN_IF_ERROR(checkpoint->OpenSharded(index));
  } else {
    return absl::NotFoundError(absl::StrFormat("%s: no weights: neither %s nor %s found", model_dir,
                                               kSingleFile, kIndexFile));
  }
  return checkpoint;
}

absl::Status Checkpoint::OpenSingle(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
  for (const std::string& name : file->names()) {
    index_.emplace(name, file->Find(name));
  }
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

absl::Status Checkpoint::OpenSharded(const std::string& index_path) {
  // Real indexes are a few hundred KB; the cap only stops a runaway file.
  ASSIGN_OR_RETURN(const std::string text, ReadSmallFile(index_path, 64 << 20));
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": not valid JSON: ", e.what()));
  }
  if (!root.is_object() || !root.contains("weight_map")) {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path, ": expected an object with a \"weight_map\" field"));
  }
  const json& weight_map = root["weight_map"];
  if (!weight_map.is_object()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: weight_map: expected object, got %s",
                                                      index_path, JsonTypeName(weight_map)));
  }

  // shard file -> tensors the index places there
  std::map<std::string, std::set<std::string>> shards;
  for (const auto& [tensor, shard] : weight_map.items()) {
    if (!shard.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: weight_map['%s']: expected string, got %s", index_path, tensor,
                          JsonTypeName(shard)));
    }
    const std::string& shard_name = shard.get_ref<const std::string&>();
    RETURN_IF_ERROR(CheckShardPath(index_path, tensor, shard_name));
    shards[shard_name].insert(tensor);
  }

  for (const auto& [shard_name, tensors] : shards) {
    const std::string shard_path = JoinPath(model_dir_, shard_name);
    if (!IsRegularFile(shard_path)) {
      return absl::NotFoundError(
          absl::StrFormat("%s: shard \"%s\" (holding tensor '%s') not found at %s", index_path,
                          shard_name, *tensors.begin(), shard_path));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(shard_path));
    for (const std::string& tensor : tensors) {
      const TensorView* view = file->Find(tensor);
      if (view == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: tensor '%s' is mapped to shard \"%s\" but is not in it",
                            index_path, tensor, shard_name));
      }
      index_.emplace(tensor, view);
    }
    for (const std::string& tensor : file->names()) {
      if (tensors.count(tensor) == 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: shard \"%s\" holds tensor '%s' that weight_map does not map "
                            "to it (stale index?)",
                            index_path, shard_name, tensor));
      }
    }
    files_.push_back(std::move(file));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorView> Checkpoint::Get(std::string_view name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) {
    return absl::NotFoundError(
        absl::StrFormat("%s: checkpoint has no tensor '%s'", model_dir_, name));
  }
  return *it->second;
}

bool Checkpoint::Has(std::string_view name) const { return index_.find(name) != index_.end(); }

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> result;
  result.reserve(index_.size());
  for (const auto& [name, view] : index_) result.push_back(name);
  return result;
}

}  // namespace docsparse
