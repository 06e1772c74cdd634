#include "model/checkpoint/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace docsparse {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

// One tensor to write: `bytes` must already match dtype and shape.
struct TestTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

template <typename T>
std::string BytesOf(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Length prefix (u64 little-endian) + header + data, as the format lays out.
std::string Frame(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// A well-formed file, laid out as the reference writer does (header padded
// with spaces to a multiple of 8, tensors back to back in the given order).
std::string Serialize(const std::vector<TestTensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {}) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string data;
  for (const TestTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return Frame(text, data);
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("safetensors_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) {
    const std::filesystem::path path = dir_ / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
    return path.string();
  }

  std::filesystem::path dir_;
};

std::vector<TestTensor> SampleTensors() {
  return {
      {"f32", "F32", {2, 3}, BytesOf<float>({1, 2, 3, 4, 5, 6})},
      {"f64_scalar", "F64", {}, BytesOf<double>({3.25})},
      {"f16", "F16", {3}, BytesOf<uint16_t>({0x3c00, 0x4000, 0xc000})},
      {"bf16", "BF16", {2, 2}, BytesOf<uint16_t>({0x3f80, 0, 0x4000, 0xbf80})},
      {"i64", "I64", {1, 3}, BytesOf<int64_t>({-1, 0, 1LL << 40})},
      {"i32", "I32", {1, 1, 2}, BytesOf<int32_t>({-7, 7})},
      {"i16", "I16", {2}, BytesOf<int16_t>({-300, 300})},
      {"empty", "F32", {0, 4}, ""},
      {"i8", "I8", {3}, BytesOf<int8_t>({-1, 0, 1})},
      {"u8", "U8", {1}, BytesOf<uint8_t>({255})},
      {"bool", "BOOL", {2}, BytesOf<uint8_t>({1, 0})},
  };
}

void ExpectMatches(const SafetensorsFile& file, const std::vector<TestTensor>& tensors) {
  ASSERT_EQ(file.num_tensors(), tensors.size());
  for (const TestTensor& t : tensors) {
    SCOPED_TRACE(t.name);
    const TensorView* view = file.Find(t.name);
    ASSERT_NE(view, nullptr);
    EXPECT_EQ(view->name, t.name);
    EXPECT_EQ(DTypeName(view->dtype), t.dtype);
    EXPECT_EQ(view->shape, t.shape);
    EXPECT_EQ(view->nbytes, t.bytes.size());
    EXPECT_EQ(view->nbytes, view->numel() * DTypeSize(view->dtype));
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(view->data), view->nbytes), t.bytes);
  }
}

TEST(DTypeTest, NamesAndSizesRoundTrip) {
  const std::map<std::string, size_t> expected = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2},
                                                  {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
                                                  {"U8", 1},  {"BOOL", 1}};
  for (const auto& [name, size] : expected) {
    const std::optional<DType> dtype = DTypeFromName(name);
    ASSERT_TRUE(dtype.has_value()) << name;
    EXPECT_EQ(DTypeName(*dtype), name);
    EXPECT_EQ(DTypeSize(*dtype), size);
  }
  EXPECT_FALSE(DTypeFromName("F8_E4M3").has_value());
  EXPECT_FALSE(DTypeFromName("f32").has_value());
}

TEST_F(SafetensorsTest, RoundTripsDtypesShapesScalarAndEmptyTensor) {
  const std::vector<TestTensor> tensors = SampleTensors();
  const std::string path = Write("model.safetensors", Serialize(tensors, {{"format", "pt"}}));
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ExpectMatches(**file, tensors);
  EXPECT_EQ((*file)->metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ((*file)->Find("f64_scalar")->numel(), 1);
  EXPECT_EQ((*file)->Find("empty")->numel(), 0);
  EXPECT_EQ((*file)->Find("missing"), nullptr);
  EXPECT_THAT((*file)->names(), ElementsAre("bf16", "bool", "empty", "f16", "f32", "f64_scalar",
                                            "i16", "i32", "i64", "i8", "u8"));
  float first = 0;
  std::memcpy(&first, (*file)->Find("f32")->data, sizeof(first));
  EXPECT_EQ(first, 1.0f);
}

TEST_F(SafetensorsTest, ParsesFromMemoryAndAcceptsAnyEntryOrder) {
  // Offsets, not header order, decide the layout; the reference sorts too.
  const std::string header = R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]},)"
                             R"("e":{"dtype":"U8","shape":[0],"data_offsets":[1,1]},)"
                             R"("a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}})";
  const std::string bytes = Frame(header, "xyz");
  auto file = SafetensorsFile::Parse(bytes, "mem");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->Find("a")->data, 'x');
  EXPECT_EQ(*(*file)->Find("b")->data, 'y');
  EXPECT_EQ((*file)->Find("e")->nbytes, 0u);
  EXPECT_TRUE((*file)->metadata().empty());
}

TEST_F(SafetensorsTest, AcceptsFileWithNoTensors) {
  auto file = SafetensorsFile::Parse(Frame("{}      ", ""), "mem");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->num_tensors(), 0u);
}

struct MalformedCase {
  std::string label;
  std::string bytes;
  absl::StatusCode code;
  std::vector<std::string> message_parts;
};

std::string OneTensor(const std::string& entry, const std::string& data) {
  return Frame(R"({"x":)" + entry + "}", data);
}

std::vector<MalformedCase> MalformedCases() {
  const std::string data24(24, '\0');
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const auto kDataLoss = absl::StatusCode::kDataLoss;
  std::string huge_header_length(8, '\0');
  huge_header_length[4] = 1;  // 2^32 bytes
  std::string past_eof = Frame("{}", "");
  past_eof[0] = 100;
  return {
      {"empty file", "", kDataLoss, {"0 bytes", "too short"}},
      {"truncated length", std::string("\x08\0\0", 3), kDataLoss, {"too short"}},
      {"header length past EOF", past_eof, kDataLoss, {"header length 100", "past the end"}},
      {"header length over limit", huge_header_length, kInvalid, {"exceeds the limit"}},
      {"non-JSON header", Frame("{not json", ""), kInvalid, {"not valid JSON"}},
      {"invalid UTF-8", Frame("{\"\xff\":1}", ""), kInvalid, {"not valid JSON"}},
      {"header not an object", Frame("[1,2]", ""), kInvalid, {"array", "expected an object"}},
      {"entry not an object", OneTensor("3", ""), kInvalid, {"tensor 'x'", "expected an object"}},
      {"missing shape",
       OneTensor(R"({"dtype":"F32","data_offsets":[0,0]})", ""),
       kInvalid,
       {"tensor 'x'", "missing field 'shape'"}},
      {"bad dtype",
       OneTensor(R"({"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]})", "a"),
       kInvalid,
       {"tensor 'x'", "dtype", "F8_E4M3", "supported: F64"}},
      {"dtype not a string",
       OneTensor(R"({"dtype":4,"shape":[1],"data_offsets":[0,4]})", "abcd"),
       kInvalid,
       {"tensor 'x'", "dtype: expected string"}},
      {"shape not an array",
       OneTensor(R"({"dtype":"F32","shape":6,"data_offsets":[0,24]})", data24),
       kInvalid,
       {"tensor 'x'", "shape: expected array"}},
      {"negative dim",
       OneTensor(R"({"dtype":"F32","shape":[-2,3],"data_offsets":[0,24]})", data24),
       kInvalid,
       {"tensor 'x'", "shape[0]", "negative integer"}},
      {"fractional dim",
       OneTensor(R"({"dtype":"F32","shape":[2,1.5],"data_offsets":[0,24]})", data24),
       kInvalid,
       {"tensor 'x'", "shape[1]", "non-integer"}},
      {"dim beyond int64",
       OneTensor(R"({"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,1]})", "a"),
       kInvalid,
       {"tensor 'x'", "shape[0]", "too large"}},
      {"element count overflows",
       OneTensor(R"({"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,0]})", ""),
       kInvalid,
       {"tensor 'x'", "overflows"}},
      {"byte count overflows",
       OneTensor(R"({"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]})", ""),
       kInvalid,
       {"tensor 'x'", "overflows"}},
      {"shape/size mismatch",
       OneTensor(R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,20]})", std::string(20, '\0')),
       kInvalid,
       {"tensor 'x'", "needs 24 bytes", "span 20"}},
      {"offsets not a pair",
       OneTensor(R"({"dtype":"U8","shape":[1],"data_offsets":[0,1,2]})", "a"),
       kInvalid,
       {"tensor 'x'", "data_offsets: expected [begin, end]"}},
      {"negative offset",
       OneTensor(R"({"dtype":"U8","shape":[1],"data_offsets":[-1,0]})", "a"),
       kInvalid,
       {"tensor 'x'", "data_offsets[0]"}},
      {"begin after end",
       OneTensor(R"({"dtype":"U8","shape":[0],"data_offsets":[1,0]})", "a"),
       kInvalid,
       {"tensor 'x'", "begin 1 is after end 0"}},
      {"offsets out of range",
       OneTensor(R"({"dtype":"F32","shape":[100],"data_offsets":[0,400]})", std::string(100, '\0')),
       kDataLoss,
       {"tensor 'x'", "data_offsets end 400 beyond data section of 100 bytes"}},
      {"overlapping tensors",
       Frame(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
             R"("y":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
             std::string(16, '\0')),
       kInvalid,
       {"overlap", "'x'", "'y'"}},
      {"hole between tensors",
       Frame(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
             R"("y":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})",
             "abc"),
       kInvalid,
       {"tensor 'y'", "hole"}},
      {"trailing bytes",
       OneTensor(R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})", "ab"),
       kInvalid,
       {"cover 1 bytes", "has 2", "trailing"}},
      {"metadata not strings",
       Frame(R"({"__metadata__":{"a":1}})", ""),
       kInvalid,
       {"__metadata__['a']: expected string"}},
      {"duplicate tensor",
       Frame(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
             R"("x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
             "a"),
       kInvalid,
       {"'x' twice"}},
  };
}

TEST_F(SafetensorsTest, MalformedFilesGiveClearErrors) {
  for (const MalformedCase& c : MalformedCases()) {
    SCOPED_TRACE(c.label);
    auto file = SafetensorsFile::Parse(c.bytes, "bad.safetensors");
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), c.code) << file.status();
    EXPECT_THAT(std::string(file.status().message()), HasSubstr("bad.safetensors: "));
    for (const std::string& part : c.message_parts) {
      EXPECT_THAT(std::string(file.status().message()), HasSubstr(part));
    }
  }
}

TEST_F(SafetensorsTest, TruncatedFileOnDiskIsDataLossNamingThePath) {
  const std::string full = Serialize(SampleTensors());
  const std::string path = Write("model.safetensors", full.substr(0, full.size() - 3));
  auto file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(file.status().message()),
              AllOf(HasSubstr(path), HasSubstr("beyond data section")));
}

TEST_F(SafetensorsTest, OpenMissingFileOrDirectoryFails) {
  auto missing = SafetensorsFile::Open((dir_ / "nope.safetensors").string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("nope.safetensors"));
  auto directory = SafetensorsFile::Open(dir_.string());
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kInvalidArgument);
  auto empty = SafetensorsFile::Open(Write("empty.safetensors", ""));
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kDataLoss);
}

// Seeded mutations of a valid file: parsing must never crash, and whatever it
// accepts must be a consistent set of views inside the buffer.
void CheckMutant(const std::string& bytes, int* accepted, int* rejected) {
  auto file = SafetensorsFile::Parse(bytes, "mutant");
  if (!file.ok()) {
    EXPECT_FALSE(file.status().message().empty());
    ++*rejected;
    return;
  }
  ++*accepted;
  const auto* begin = reinterpret_cast<const uint8_t*>(bytes.data());
  const auto* end = begin + bytes.size();
  size_t total = 0;
  for (const std::string& name : (*file)->names()) {
    const TensorView* view = (*file)->Find(name);
    ASSERT_NE(view, nullptr);
    ASSERT_EQ(view->nbytes, view->numel() * DTypeSize(view->dtype));
    ASSERT_GE(view->data, begin);
    ASSERT_LE(view->data + view->nbytes, end);
    total += view->nbytes;
  }
  ASSERT_LE(total + 8, bytes.size());
}

TEST_F(SafetensorsTest, RandomCorruptionNeverCrashes) {
  const std::string valid = Serialize(SampleTensors(), {{"format", "pt"}});
  uint64_t header_size = 0;
  std::memcpy(&header_size, valid.data(), 8);
  const size_t header_end = 8 + header_size;
  const std::string structural = "{}[]\",:-.e0123456789 ";
  std::mt19937 rng(20240601);
  int accepted = 0;
  int rejected = 0;
  for (int iteration = 0; iteration < 6000; ++iteration) {
    std::string mutant = valid;
    switch (rng() % 4) {
      case 0: {  // truncate anywhere
        mutant.resize(rng() % mutant.size());
        break;
      }
      case 1: {  // flip bits, mostly in the length prefix and header
        const int flips = 1 + rng() % 4;
        for (int i = 0; i < flips; ++i) {
          const size_t pos = rng() % 5 ? rng() % header_end : rng() % mutant.size();
          mutant[pos] = static_cast<char>(mutant[pos] ^ (1 << (rng() % 8)));
        }
        break;
      }
      case 2: {  // replace header bytes with JSON punctuation and digits
        const int edits = 1 + rng() % 3;
        for (int i = 0; i < edits; ++i) {
          mutant[8 + rng() % header_size] = structural[rng() % structural.size()];
        }
        break;
      }
      default: {  // rewrite the length prefix to a random nearby value
        const uint64_t n = header_size + (rng() % 64) - 32;
        for (int i = 0; i < 8; ++i) mutant[i] = static_cast<char>(n >> (8 * i));
        break;
      }
    }
    ASSERT_NO_FATAL_FAILURE(CheckMutant(mutant, &accepted, &rejected)) << "iteration " << iteration;
    if (iteration % 20 == 0) {
      // The mapped path too: same checks over a file.
      const std::string path = Write("mutant.safetensors", mutant);
      auto file = SafetensorsFile::Open(path);
      if (file.ok()) {
        EXPECT_EQ((*file)->names().size(), (*file)->num_tensors());
      }
    }
  }
  // Both outcomes must occur, or the mutations are not exercising anything.
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 1000);
}

TEST_F(SafetensorsTest, CheckpointSingleFile) {
  Write("model.safetensors", Serialize(SampleTensors()));
  auto checkpoint = Checkpoint::Open(dir_.string());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ((*checkpoint)->num_tensors(), SampleTensors().size());
  EXPECT_TRUE((*checkpoint)->Has("f32"));
  EXPECT_FALSE((*checkpoint)->Has("nope"));
  auto view = (*checkpoint)->Get("i32");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_THAT(view->shape, ElementsAre(1, 1, 2));
  auto missing = (*checkpoint)->Get("encoder.layer.99.weight");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              AllOf(HasSubstr("'encoder.layer.99.weight'"), HasSubstr(dir_.string())));
}

class ShardedCheckpointTest : public SafetensorsTest {
 protected:
  // Two shards, the second in a subfolder, as some exporters lay them out.
  void WriteShards() {
    Write("model-00001-of-00002.safetensors",
          Serialize({{"a", "F32", {2}, BytesOf<float>({1, 2})},
                     {"b", "I64", {1}, BytesOf<int64_t>({9})}}));
    Write("shards/model-00002-of-00002.safetensors", Serialize({{"c", "U8", {3}, "xyz"}}));
  }
  json Index() {
    return {{"metadata", {{"total_size", 27}}},
            {"weight_map",
             {{"a", "model-00001-of-00002.safetensors"},
              {"b", "model-00001-of-00002.safetensors"},
              {"c", "shards/model-00002-of-00002.safetensors"}}}};
  }
  void WriteIndex(const json& index) { Write("model.safetensors.index.json", index.dump()); }
  absl::Status OpenError() {
    auto checkpoint = Checkpoint::Open(dir_.string());
    return checkpoint.status();
  }
};

TEST_F(ShardedCheckpointTest, OpensTwoShards) {
  WriteShards();
  WriteIndex(Index());
  auto checkpoint = Checkpoint::Open(dir_.string());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_THAT((*checkpoint)->names(), ElementsAre("a", "b", "c"));
  auto c = (*checkpoint)->Get("c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(c->data), c->nbytes), "xyz");
  auto a = (*checkpoint)->Get("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->dtype, DType::kF32);
}

TEST_F(ShardedCheckpointTest, SingleFileWinsOverIndex) {
  WriteIndex(Index());  // shards absent: would fail if it were used
  Write("model.safetensors", Serialize({{"only", "U8", {1}, "z"}}));
  auto checkpoint = Checkpoint::Open(dir_.string());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_THAT((*checkpoint)->names(), ElementsAre("only"));
}

TEST_F(ShardedCheckpointTest, MissingShard) {
  WriteShards();
  json index = Index();
  index["weight_map"]["c"] = "model-00003-of-00002.safetensors";
  WriteIndex(index);
  const absl::Status status = OpenError();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("model-00003-of-00002.safetensors"), HasSubstr("'c'")));
}

TEST_F(ShardedCheckpointTest, TensorNotInItsShard) {
  WriteShards();
  json index = Index();
  index["weight_map"]["d"] = "model-00001-of-00002.safetensors";
  WriteIndex(index);
  const absl::Status status = OpenError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), AllOf(HasSubstr("'d'"), HasSubstr("not in it")));
}

TEST_F(ShardedCheckpointTest, ShardTensorMissingFromIndex) {
  WriteShards();
  json index = Index();
  index["weight_map"].erase("b");
  WriteIndex(index);
  const absl::Status status = OpenError();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), AllOf(HasSubstr("'b'"), HasSubstr("stale index")));
}

TEST_F(ShardedCheckpointTest, RejectsPathsOutsideTheFolder) {
  WriteShards();
  // A real file outside the folder, so only the path rule can refuse it.
  const std::string outside = (dir_.parent_path() / "outside.safetensors").string();
  std::ofstream(outside, std::ios::binary) << Serialize({{"c", "U8", {3}, "xyz"}});
  for (const std::string& shard :
       {std::string("../outside.safetensors"), outside,
        std::string("shards/../../outside.safetensors"), std::string("")}) {
    SCOPED_TRACE(shard);
    json index = Index();
    index["weight_map"]["c"] = shard;
    WriteIndex(index);
    const absl::Status status = OpenError();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr("weight_map['c']"), HasSubstr("inside the model folder")));
  }
  std::filesystem::remove(outside);
}

TEST_F(ShardedCheckpointTest, MalformedIndex) {
  WriteShards();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "not valid JSON"},
      {R"({"metadata":{}})", "weight_map"},
      {R"({"weight_map":[]})", "weight_map: expected object"},
      {R"({"weight_map":{"a":3}})", "weight_map['a']: expected string"},
  };
  for (const auto& [text, part] : cases) {
    SCOPED_TRACE(text);
    Write("model.safetensors.index.json", text);
    const absl::Status status = OpenError();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr("model.safetensors.index.json"), HasSubstr(part)));
  }
}

TEST_F(ShardedCheckpointTest, CorruptShardNamesTheShard) {
  WriteShards();
  WriteIndex(Index());
  Write("shards/model-00002-of-00002.safetensors", "garbage!garbage");
  const absl::Status status = OpenError();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("model-00002-of-00002.safetensors"));
}

TEST_F(SafetensorsTest, CheckpointWithoutWeights) {
  auto empty = Checkpoint::Open(dir_.string());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(empty.status().message()),
              AllOf(HasSubstr("model.safetensors"), HasSubstr("model.safetensors.index.json")));
  auto no_dir = Checkpoint::Open((dir_ / "absent").string());
  EXPECT_EQ(no_dir.status().code(), absl::StatusCode::kNotFound);
}

// The embedded default model (scripts/setup unpacks it).
TEST(DefaultModelTest, MiniLmCheckpointLoads) {
  const std::string model_dir = std::string(DOCSPARSE_SOURCE_DIR) + "/models/minilm";
  ASSERT_TRUE(std::filesystem::exists(model_dir + "/model.safetensors"))
      << model_dir << " is missing: run scripts/setup to install the default "
      << "model";
  auto checkpoint = Checkpoint::Open(model_dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ((*checkpoint)->num_tensors(), 104u);

  auto words = (*checkpoint)->Get("embeddings.word_embeddings.weight");
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(words->dtype, DType::kF32);
  EXPECT_THAT(words->shape, ElementsAre(30522, 384));
  std::vector<float> row(384);
  std::memcpy(row.data(), words->data, row.size() * sizeof(float));
  for (float v : row) ASSERT_TRUE(std::isfinite(v));

  // position_ids is the buffer arange(512): a value check needing no golden.
  auto positions = (*checkpoint)->Get("embeddings.position_ids");
  ASSERT_TRUE(positions.ok()) << positions.status();
  EXPECT_EQ(positions->dtype, DType::kI64);
  EXPECT_THAT(positions->shape, ElementsAre(1, 512));
  std::vector<int64_t> ids(512);
  std::memcpy(ids.data(), positions->data, positions->nbytes);
  for (int64_t i = 0; i < 512; ++i) ASSERT_EQ(ids[i], i);

  for (int layer = 0; layer < 6; ++layer) {
    EXPECT_TRUE(
        (*checkpoint)
            ->Has("encoder.layer." + std::to_string(layer) + ".attention.self.query.weight"));
  }
  EXPECT_FALSE((*checkpoint)->Has("encoder.layer.6.attention.self.query.weight"));
}

}  // namespace
}  // namespace docsparse
