// convert/flag_parser.h.
#include "convert/flag_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace docsparse::convert {
namespace {

using ::testing::HasSubstr;

class FlagParserTest : public ::testing::Test {
 protected:
  FlagParserTest() : parser_("tool --name S [flags]") {
    parser_.AddString("name", &name_, "a name", /*required=*/true);
    parser_.AddInt("max-length", &length_, "a length");
    parser_.AddBool("fast", &fast_, "go fast");
  }

  absl::Status Parse(std::vector<std::string> args) {
    args.insert(args.begin(), "tool");
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    return parser_.Parse(static_cast<int>(argv.size()), argv.data());
  }

  FlagParser parser_;
  std::string name_;
  int64_t length_ = 7;
  bool fast_ = false;
};

TEST_F(FlagParserTest, AcceptsBothSpellingsAndBothValueForms) {
  ASSERT_TRUE(Parse({"--name", "x", "--max_length=4096", "--fast"}).ok());
  EXPECT_EQ(name_, "x");
  EXPECT_EQ(length_, 4096);
  EXPECT_TRUE(fast_);
  EXPECT_TRUE(parser_.WasSet("max_length"));
  ASSERT_TRUE(Parse({"-name=y", "--max-length", "12", "--fast=false"}).ok());
  EXPECT_EQ(name_, "y");
  EXPECT_EQ(length_, 12);
  EXPECT_FALSE(fast_);
}

TEST_F(FlagParserTest, ErrorsNameTheFlag) {
  EXPECT_THAT(std::string(Parse({"--max-length", "4096"}).message()),
              HasSubstr("--name is required"));
  EXPECT_THAT(std::string(Parse({"--name", "x", "--max-length", "big"}).message()),
              HasSubstr("--max-length: expected an integer, got \"big\""));
  EXPECT_THAT(std::string(Parse({"--name", "x", "--max-lenght=3"}).message()),
              HasSubstr("unknown flag --max-lenght"));
  EXPECT_THAT(std::string(Parse({"--name"}).message()), HasSubstr("--name needs a value"));
  EXPECT_THAT(std::string(Parse({"--name", "x", "--fast=maybe"}).message()),
              HasSubstr("--fast: expected true or false"));
  EXPECT_THAT(std::string(Parse({"--name", "x", "stray"}).message()),
              HasSubstr("unexpected argument \"stray\""));
}

TEST_F(FlagParserTest, HelpListsFlagsWithDefaults) {
  ASSERT_TRUE(Parse({"--help"}).ok());  // no "required" error with --help
  EXPECT_TRUE(parser_.help_requested());
  const std::string help = parser_.Help();
  EXPECT_THAT(help, HasSubstr("usage: tool --name S [flags]"));
  EXPECT_THAT(help, HasSubstr("--max-length N"));
  EXPECT_THAT(help, HasSubstr("(default 7)"));
  EXPECT_THAT(help, HasSubstr("a name (required)"));
}

}  // namespace
}  // namespace docsparse::convert
