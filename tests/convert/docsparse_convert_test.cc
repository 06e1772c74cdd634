// The docsparse-convert binary itself: dispatch, flags, exit codes, and a
// real conversion of a fixture folder.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/common/fixture_paths.h"
#include "tests/convert/convert_test_util.h"

namespace docsparse {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunCommand;

std::string Binary() { return testing::ConvertBinary(); }

TEST(DocsparseConvertTest, DispatchesCommandsAndPrintsUsage) {
  testing::CommandResult r = RunCommand(Binary());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("usage: docsparse-convert COMMAND"));
  EXPECT_THAT(r.output, HasSubstr("lsg"));
  r = RunCommand(Binary() + " --help");
  EXPECT_EQ(r.exit_code, 0);
  r = RunCommand(Binary() + " frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("unknown command \"frobnicate\""));
}

TEST(DocsparseConvertTest, LsgHelpListsEveryKnob) {
  const testing::CommandResult r = RunCommand(Binary() + " lsg --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--input", "--output", "--max-length", "--block-size",
                           "--sparse-block-size", "--sparsity-factor", "--sparsity-type",
                           "--num-global-tokens", "--global-positional-stride"}) {
    EXPECT_THAT(r.output, HasSubstr(flag));
  }
  EXPECT_THAT(r.output, HasSubstr("(default 128)"));
}

TEST(DocsparseConvertTest, BadFlagsExitTwoNamingTheFlag) {
  testing::CommandResult r = RunCommand(Binary() + " lsg --output /tmp/x --max-length 4096");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("--input is required"));
  r = RunCommand(Binary() + " lsg --input a --output b --max-length four");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("--max-length: expected an integer"));
  r = RunCommand(Binary() + " lsg --input a --output b --max-length 4 --sparsity 3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("unknown flag --sparsity"));
}

TEST(DocsparseConvertTest, ConversionErrorsExitOne) {
  testing::TempDir out;
  const testing::CommandResult r =
      RunCommand(Binary() + " lsg --input " + testing::LsgFixture("bert/input") + " --output " +
                 out.Join("m") + " --max-length 4096 --sparsity-factor 3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("--sparsity-factor: 3 does not divide --block-size 128"));
  EXPECT_FALSE(std::filesystem::exists(out.Join("m/model.safetensors")));
}

TEST(DocsparseConvertTest, ConvertsAFixtureFolderLikeTheReference) {
  testing::TempDir out;
  const std::string output = out.Join("roberta-lsg");
  // The reference wrote its output path into _name_or_path.
  const testing::CommandResult r = RunCommand(
      Binary() + " lsg --input " + testing::LsgFixture("roberta/input") + " --output " + output +
      " --max_length=2048 --name_or_path /tmp/lsg_converter_fixtures/roberta/reference");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("writing model.safetensors: 24/24 tensors"));
  EXPECT_THAT(r.output, HasSubstr("(100%)"));
  EXPECT_THAT(r.output, HasSubstr("wrote " + output + " (LSGRobertaModel"));
  for (const char* file : {"model.safetensors", "config.json", "tokenizer_config.json"}) {
    EXPECT_TRUE(testing::ReadFile(output + "/" + file) ==
                testing::ReadFile(testing::LsgFixture(std::string("roberta/reference/") + file)))
        << file;
  }
  for (const char* file : {"vocab.json", "merges.txt", "tokenizer.json"}) {
    EXPECT_TRUE(std::filesystem::exists(output + "/" + file)) << file;
  }
  EXPECT_FALSE(std::filesystem::exists(output + "/model.safetensors.tmp"));
  EXPECT_THAT(r.output, Not(HasSubstr("note:")));
}

}  // namespace
}  // namespace docsparse
