// model/checkpoint/safetensors_writer.h: round trips through the reader, the layout the
// reference writer uses, and byte equality with files Python wrote.
#include "model/checkpoint/safetensors_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "model/checkpoint/safetensors.h"
#include "tests/common/fixture_paths.h"
#include "tests/convert/convert_test_util.h"

namespace docsparse {
namespace {

using ::testing::HasSubstr;

template <typename T>
TensorBytes Bytes(const std::string& name, DType dtype, std::vector<int64_t> shape,
                  const std::vector<T>& values) {
  return {name, dtype, std::move(shape), reinterpret_cast<const uint8_t*>(values.data()),
          values.size() * sizeof(T)};
}

TEST(SafetensorsWriterTest, RoundTripsEveryDtypeThroughTheReader) {
  const std::vector<float> f32 = {1.5f, -2.25f, 3.0f, 4.0f, 5.0f, 6.0f};
  const std::vector<double> f64 = {3.141592653589793};
  const std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x7bff};  // 1, -2, 65504
  const std::vector<uint16_t> bf16 = {0x3f80, 0x4000};
  const std::vector<int64_t> i64 = {-1, 0, 1LL << 40};
  const std::vector<int32_t> i32 = {7, -7};
  const std::vector<int8_t> i8 = {-128, 127, 0};
  const std::vector<uint8_t> u8 = {255};
  const std::vector<uint8_t> boolean = {1, 0, 1};
  const std::vector<float> empty;
  const std::vector<TensorBytes> tensors = {
      Bytes("weight", DType::kF32, {2, 3}, f32),    Bytes("pi", DType::kF64, {}, f64),
      Bytes("half", DType::kF16, {3}, f16),         Bytes("brain", DType::kBF16, {2, 1}, bf16),
      Bytes("ids", DType::kI64, {3}, i64),          Bytes("small", DType::kI32, {2}, i32),
      Bytes("bytes", DType::kI8, {3}, i8),          Bytes("u", DType::kU8, {1}, u8),
      Bytes("mask", DType::kBool, {1, 3}, boolean), Bytes("nothing", DType::kF32, {0, 4}, empty),
  };
  absl::StatusOr<std::string> file = SerializeSafetensors(tensors, {{"format", "pt"}});
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> parsed = SafetensorsFile::Parse(*file, "mem");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ((*parsed)->metadata().at("format"), "pt");
  ASSERT_EQ((*parsed)->num_tensors(), tensors.size());
  for (const TensorBytes& expected : tensors) {
    const TensorView* view = (*parsed)->Find(expected.name);
    ASSERT_NE(view, nullptr) << expected.name;
    EXPECT_EQ(view->dtype, expected.dtype) << expected.name;
    EXPECT_EQ(view->shape, expected.shape) << expected.name;
    ASSERT_EQ(view->nbytes, expected.nbytes) << expected.name;
    // An empty tensor's data may be null; memcmp on null is undefined even
    // for 0 bytes (UBSan).
    if (expected.nbytes > 0) {
      EXPECT_EQ(std::memcmp(view->data, expected.data, expected.nbytes), 0) << expected.name;
    }
  }
}

TEST(SafetensorsWriterTest, AlignsHeaderAndEveryTensorToItsElementSize) {
  // Names chosen so that alphabetical order alone would misalign the F64.
  const std::vector<uint8_t> a = {1, 2, 3};
  const std::vector<uint16_t> b = {1};
  const std::vector<double> c = {2.0, 3.0};
  const std::vector<float> d = {4.0f};
  absl::StatusOr<SafetensorsLayout> layout =
      LayoutSafetensors({Bytes("a", DType::kU8, {3}, a), Bytes("b", DType::kF16, {1}, b),
                         Bytes("c", DType::kF64, {2}, c), Bytes("d", DType::kF32, {1}, d)},
                        {});
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->header.size() % 8, 0u);
  // Descending dtype (F64, F32, F16, U8), as the Rust crate sorts.
  EXPECT_EQ(layout->order, (std::vector<size_t>{2, 3, 1, 0}));
  EXPECT_THAT(layout->header,
              HasSubstr(R"("c":{"dtype":"F64","shape":[2],"data_offsets":[0,16]})"));
  EXPECT_THAT(layout->header,
              HasSubstr(R"("a":{"dtype":"U8","shape":[3],"data_offsets":[22,25]})"));
  EXPECT_EQ(layout->data_bytes, 25u);
}

TEST(SafetensorsWriterTest, RejectsMalformedTensorLists) {
  const std::vector<float> two = {1, 2};
  EXPECT_THAT(
      std::string(SerializeSafetensors(
                      {Bytes("x", DType::kF32, {2}, two), Bytes("x", DType::kF32, {2}, two)}, {})
                      .status()
                      .message()),
      HasSubstr("'x' is given twice"));
  EXPECT_THAT(
      std::string(SerializeSafetensors({Bytes("x", DType::kF32, {3}, two)}, {}).status().message()),
      HasSubstr("tensor 'x': 8 bytes given"));
  EXPECT_FALSE(SerializeSafetensors({Bytes("__metadata__", DType::kF32, {2}, two)}, {}).ok());
  EXPECT_FALSE(SerializeSafetensors({Bytes("", DType::kF32, {2}, two)}, {}).ok());
  EXPECT_FALSE(SerializeSafetensors({Bytes("x", DType::kF32, {-2}, two)}, {}).ok());
}

// The reference converter's output was written by Python's safetensors:
// rewriting its tensors must give the same bytes.
TEST(SafetensorsWriterTest, ReproducesPythonWrittenFilesByteForByte) {
  for (const char* name : {"bert/reference", "bart/reference", "roberta/input"}) {
    const std::string path = testing::LsgFixture(std::string(name) + "/model.safetensors");
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    std::vector<TensorBytes> tensors;
    for (const std::string& tensor : (*file)->names()) {
      tensors.push_back(TensorBytes::FromView(*(*file)->Find(tensor)));
    }
    absl::StatusOr<std::string> bytes = SerializeSafetensors(tensors, (*file)->metadata());
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_TRUE(*bytes == testing::ReadFile(path)) << name;
  }
}

TEST(SafetensorsWriterTest, WritesFilesAtomicallyAndReportsProgress) {
  testing::TempDir dir;
  std::vector<float> big((kProgressChunkBytes / sizeof(float)) * 2 + 5, 0.5f);
  const std::vector<int64_t> ids = {1, 2, 3};
  std::vector<WriteProgress> reports;
  const std::string path = dir.Join("model.safetensors");
  ASSERT_TRUE(WriteSafetensorsFile(
                  path,
                  {Bytes("big", DType::kF32, {static_cast<int64_t>(big.size())}, big),
                   Bytes("ids", DType::kI64, {3}, ids)},
                  {{"format", "pt"}}, [&](const WriteProgress& p) { reports.push_back(p); })
                  .ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  ASSERT_GE(reports.size(), 4u);  // header, two chunks inside "big", each tensor's end
  for (size_t i = 1; i < reports.size(); ++i) {
    EXPECT_GE(reports[i].bytes_done, reports[i - 1].bytes_done);
  }
  EXPECT_EQ(reports.back().tensors_done, 2u);
  EXPECT_EQ(reports.back().bytes_done, reports.back().bytes_total);
  EXPECT_EQ(reports.back().bytes_total, big.size() * 4 + 24);

  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->Find("big")->nbytes, big.size() * 4);

  const absl::Status missing =
      WriteSafetensorsFile(dir.Join("no/such/folder/x.safetensors"), {}, {});
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.message()), HasSubstr("no/such/folder/x.safetensors.tmp"));
}

}  // namespace
}  // namespace docsparse
