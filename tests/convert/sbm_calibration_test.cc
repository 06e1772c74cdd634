// SBM calibration on the tiny BERT fixture: it writes a loadable
// sbm.safetensors into a usable model folder, resumes bit-exactly, refuses a
// checkpoint made with other settings, and the student's straight-through
// gradients reach every parameter. Plus the corpus reader and the
// `docsparse-convert sbm` command end to end (with a made-up vocabulary).
#include "convert/sbm_calibration.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "convert/sbm_corpus.h"
#include "convert/sbm_student.h"
#include "kernels/sbm_sampling.h"
#include "model/attention/sbm_parameters.h"
#include "model/checkpoint/hf_config.h"
#include "model/text/wordpiece_tokenizer.h"
#include "tests/convert/convert_test_util.h"

namespace docsparse::convert {
namespace {

namespace fs = std::filesystem;
using ::docsparse::testing::FixturePath;
using ::docsparse::testing::RunCommand;
using ::docsparse::testing::TempDir;

const EncoderShape kTinyShape{2, 4, 8, 32, 37};

std::string TinyBert() { return FixturePath("tiny_encoders/bert"); }

// Deterministic chunks of `length` ids framed like BERT's (2 = [CLS], 3 =
// [SEP] in the made-up vocabulary below; the tiny model has 97 ids).
std::vector<std::vector<int32_t>> Chunks(int count, int length) {
  std::vector<std::vector<int32_t>> chunks;
  CounterRng rng(5);
  for (int c = 0; c < count; ++c) {
    std::vector<int32_t> chunk = {2};
    while (static_cast<int>(chunk.size()) < length - 1) {
      chunk.push_back(5 + static_cast<int32_t>(rng.Next() % 92));
    }
    chunk.push_back(3);
    chunks.push_back(chunk);
  }
  return chunks;
}

SbmCalibrationOptions Options(const std::string& output, int64_t steps) {
  SbmCalibrationOptions options;
  options.input_dir = TinyBert();
  options.output_dir = output;
  options.clusters = 3;
  options.steps = steps;
  options.batch = 2;
  options.checkpoint_every = 2;
  options.train_density_min = 0.05;
  options.train_density_max = 0.5;
  return options;
}

TEST(SbmCalibrationTest, WritesLoadableParametersIntoAModelFolder) {
  TempDir dir;
  const std::string output = dir.Join("tiny-sbm");
  std::vector<SbmCalibrationProgress> seen;
  auto result = CalibrateSbm(Options(output, 4), Chunks(6, 24), {{"corpus", "synthetic"}},
                             [&](const SbmCalibrationProgress& p) { seen.push_back(p); });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps, 4);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen.back().step, 4);
  EXPECT_GT(seen.back().density, 0);
  EXPECT_TRUE(std::isfinite(seen.back().loss));

  auto loaded = SbmParameters::LoadFromModelDir(output, kTinyShape);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->num_clusters(), 3);
  EXPECT_EQ((*loaded)->metadata().at("calibrated"), "true");
  EXPECT_EQ((*loaded)->metadata().at("corpus"), "synthetic");
  EXPECT_EQ((*loaded)->metadata().at("steps"), "4");
  // The output is a model folder: the checkpoint's files are there too.
  EXPECT_TRUE(fs::exists(output + "/config.json"));
  EXPECT_TRUE(fs::exists(output + "/model.safetensors"));
  EXPECT_TRUE(fs::exists(output + "/sbm-calibration.json"));
  // Calibration moved the parameters away from their initialisation.
  const auto initial = SbmParameters::Random(2, 4, 8, 3, 1);
  EXPECT_FALSE(at::equal((*loaded)->layer(0).clusters, initial->layer(0).clusters));
}

TEST(SbmCalibrationTest, ResumedRunEqualsUninterruptedRun) {
  TempDir dir;
  const std::vector<std::vector<int32_t>> chunks = Chunks(6, 24);
  ASSERT_TRUE(CalibrateSbm(Options(dir.Join("straight"), 6), chunks, {}).ok());
  ASSERT_TRUE(CalibrateSbm(Options(dir.Join("resumed"), 2), chunks, {}).ok());
  auto resumed = CalibrateSbm(Options(dir.Join("resumed"), 6), chunks, {});
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->first_step, 2);
  auto a = SbmParameters::LoadFromModelDir(dir.Join("straight"), kTinyShape);
  auto b = SbmParameters::LoadFromModelDir(dir.Join("resumed"), kTinyShape);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int layer = 0; layer < 2; ++layer) {
    EXPECT_TRUE(at::equal((*a)->layer(layer).clusters, (*b)->layer(layer).clusters));
    EXPECT_TRUE(at::equal((*a)->layer(layer).mlp_in_weight, (*b)->layer(layer).mlp_in_weight));
  }
}

TEST(SbmCalibrationTest, RefusesACheckpointMadeWithOtherSettings) {
  TempDir dir;
  const std::vector<std::vector<int32_t>> chunks = Chunks(6, 24);
  ASSERT_TRUE(CalibrateSbm(Options(dir.Join("out"), 2), chunks, {}).ok());
  SbmCalibrationOptions other = Options(dir.Join("out"), 4);
  other.lambda = 0.5;
  auto result = CalibrateSbm(other, chunks, {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(result.status().message().find("lambda"), std::string::npos) << result.status();
  other.resume = false;  // starting over is allowed
  EXPECT_TRUE(CalibrateSbm(other, chunks, {}).ok());
}

TEST(SbmCalibrationTest, BadOptionsNameTheFlag) {
  TempDir dir;
  SbmCalibrationOptions options = Options(dir.Join("out"), 2);
  options.clusters = 0;
  EXPECT_NE(CalibrateSbm(options, Chunks(2, 24), {}).status().message().find("--clusters"),
            std::string::npos);
  options = Options(dir.Join("out"), 2);
  options.train_density_min = 0.5;
  options.train_density_max = 0.1;
  EXPECT_NE(CalibrateSbm(options, Chunks(2, 24), {}).status().message().find("--train-density"),
            std::string::npos);
}

TEST(SbmStudentTest, StraightThroughGradientsReachEveryParameter) {
  const auto initial = SbmParameters::Random(1, 2, 4, 3, 9);
  SbmStudent student(*initial);
  torch::manual_seed(1);
  LayerRecord record{torch::randn({2, 2, 10, 4}),
                     torch::randn({2, 2, 10, 4}),
                     torch::randn({2, 2, 10, 4}),
                     torch::randn({2, 2, 10, 4}),
                     {10, 7}};
  at::Generator generator = at::detail::createCPUGenerator(3);
  for (double target : {0.0, 0.2}) {
    const StudentLoss loss = student.Loss(0, record, 0.01, target, generator);
    EXPECT_GT(loss.density.item<double>(), 0);
    EXPECT_LE(loss.density.item<double>(), 1);
    if (target > 0) {
      EXPECT_GT(loss.beta, -1e6);
    } else {
      EXPECT_EQ(loss.beta, 0);
    }
    for (torch::Tensor p : student.parameters()) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
    (loss.distill + loss.density).backward();
    for (const torch::Tensor& p : student.parameters()) {
      ASSERT_TRUE(p.grad().defined());
      EXPECT_TRUE(p.grad().isfinite().all().item<bool>());
      EXPECT_GT(p.grad().abs().sum().item<double>(), 0);
    }
  }
}

TEST(SbmCorpusTest, ReadsTextSkipsBinaryAndCutsEqualChunks) {
  TempDir dir;
  fs::create_directories(dir.Join("docs/sub"));
  {
    std::ofstream(dir.Join("docs/a.txt")) << "the quick brown fox jumps over the lazy dog. ";
    std::ofstream b(dir.Join("docs/sub/b.txt"));
    for (int i = 0; i < 40; ++i) b << "alpha beta gamma delta ";
    std::ofstream(dir.Join("docs/c.bin"), std::ios::binary) << std::string("\x00\x01\x02", 3);
  }
  auto files = ListCorpusFiles({dir.Join("docs")});
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 3u);
  EXPECT_EQ(ListCorpusFiles({dir.Join("missing")}).status().code(), absl::StatusCode::kNotFound);

  std::ofstream(dir.Join("vocab.txt"))
      << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nquick\nbrown\nfox\njumps\nover\nlazy\ndog\n.\n"
         "alpha\nbeta\ngamma\ndelta\n";
  auto tokenizer = WordPieceTokenizer::FromModelDir(dir.path());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  CorpusOptions options;
  options.paths = {dir.Join("docs")};
  options.chunk_tokens = 16;
  auto chunks = LoadTokenChunks(**tokenizer, options);
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  EXPECT_EQ(chunks->skipped, 1);
  EXPECT_EQ(chunks->files.size(), 2u);
  ASSERT_GE(chunks->chunks.size(), 10u);  // 160 words of b.txt in pieces of 14
  for (const std::vector<int32_t>& chunk : chunks->chunks) {
    ASSERT_EQ(chunk.size(), 16u);
    EXPECT_EQ(chunk.front(), 2);
    EXPECT_EQ(chunk.back(), 3);
  }
  options.chunk_tokens = 4;
  EXPECT_EQ(LoadTokenChunks(**tokenizer, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SbmCommandTest, CalibratesAndMeasuresEndToEnd) {
  TempDir dir;
  const std::string model = dir.Join("tiny");
  fs::create_directories(model);
  for (const char* name : {"config.json", "model.safetensors"}) {
    fs::copy_file(TinyBert() + "/" + name, model + "/" + name);
  }
  {
    // 97 ids, as the tiny model's vocabulary: specials, then letters and words.
    std::ofstream vocab(model + "/vocab.txt");
    vocab << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int i = 5; i < 97; ++i) {
      vocab << (i < 31 ? std::string(1, static_cast<char>('a' + i - 5)) : "w" + std::to_string(i))
            << "\n";
    }
    std::ofstream corpus(dir.Join("corpus.txt"));
    std::ofstream held_out(dir.Join("held_out.txt"));
    for (int i = 0; i < 60; ++i) {
      corpus << "a b c d e f g h i j k l m ";
      held_out << "n o p q r s t u v w x y z ";
    }
  }
  const std::string command = testing::ConvertBinary() + " sbm --input " + model + " --output " +
                              dir.Join("out") + " --corpus " + dir.Join("corpus.txt") +
                              " --clusters 3 --steps 3 --batch 2 --chunk-tokens 24 --threads 1" +
                              " --held-out " + dir.Join("held_out.txt") +
                              " --eval-windows 2 --eval-seeds 1 --eval-densities 0.2,0";
  const testing::CommandResult result = RunCommand(command);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("step 3/3"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("| 20% |"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("corrected: cosine"), std::string::npos) << result.output;
  EXPECT_TRUE(fs::exists(dir.Join("out/sbm.safetensors")));

  const testing::CommandResult no_corpus =
      RunCommand(testing::ConvertBinary() + " sbm --input " + model + " --output " + dir.Join("x"));
  EXPECT_EQ(no_corpus.exit_code, 2);
  EXPECT_NE(no_corpus.output.find("--corpus"), std::string::npos) << no_corpus.output;
}

}  // namespace
}  // namespace docsparse::convert
