// A summarizer's precision on the CPU, as docsparse.json asks: bf16 where the
// CPU has AMX or AVX512-BF16 (an error naming the field elsewhere), int8,
// and fp32 for "auto" and "fp32"; fp16 an error naming the field (a CUDA
// device's only).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "kernels/cpu_features.h"
#include "server/model_registry.h"
#include "tests/common/fixture_paths.h"

namespace docsparse {
namespace {

using ::testing::HasSubstr;

// The tiny BART fixture in a folder of its own with `docsparse_json`.
class SummarizerFolder {
 public:
  explicit SummarizerFolder(const std::string& docsparse_json)
      : dir_(std::filesystem::path(::testing::TempDir()) /
             ("summarizer-precision." + std::to_string(getpid()))) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    for (const auto& entry :
         std::filesystem::directory_iterator(testing::FixturePath("seq2seq/bart"))) {
      std::filesystem::copy_file(entry.path(), dir_ / entry.path().filename());
    }
    std::ofstream(dir_ / "docsparse.json") << docsparse_json;
  }
  ~SummarizerFolder() { std::filesystem::remove_all(dir_); }
  std::string path() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

absl::StatusOr<Precision> ServedPrecision(const std::string& precision) {
  const SummarizerFolder folder(R"({"tasks": ["summarize"], "precision": ")" + precision + R"("})");
  absl::StatusOr<std::unique_ptr<ServedModel>> model = LoadServedModel("bart", folder.path());
  if (!model.ok()) return model.status();
  return (*model)->precision();
}

TEST(SummarizerPrecisionTest, Bf16WhereTheCpuHasItElseAnErrorNamingTheField) {
  const absl::StatusOr<Precision> served = ServedPrecision("bf16");
  if (HasNativeBf16(HostCpuFeatures())) {
    ASSERT_TRUE(served.ok()) << served.status();
    EXPECT_EQ(*served, Precision::kBf16);
  } else {
    ASSERT_FALSE(served.ok());
    EXPECT_EQ(served.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(served.status().message()),
                HasSubstr("docsparse.json: precision: \"bf16\" needs a CPU with AMX"));
  }
}

TEST(SummarizerPrecisionTest, Fp16IsAnErrorNamingTheFieldOnTheCpu) {
  const absl::StatusOr<Precision> served = ServedPrecision("fp16");
  ASSERT_FALSE(served.ok());
  EXPECT_EQ(served.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(served.status().message()),
              HasSubstr("docsparse.json: precision: \"fp16\": a summarizer runs fp16 on a CUDA "
                        "device only"));
}

TEST(SummarizerPrecisionTest, AutoAndFp32AreFp32AndInt8IsInt8) {
  for (const char* precision : {"auto", "fp32"}) {
    const absl::StatusOr<Precision> served = ServedPrecision(precision);
    ASSERT_TRUE(served.ok()) << precision << ": " << served.status();
    EXPECT_EQ(*served, Precision::kFp32) << precision;
  }
  const absl::StatusOr<Precision> int8 = ServedPrecision("int8");
  ASSERT_TRUE(int8.ok()) << int8.status();
  EXPECT_EQ(*int8, Precision::kInt8);
}

}  // namespace
}  // namespace docsparse
