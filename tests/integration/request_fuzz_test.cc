// Fuzzing the real docsparse-server on loopback: bad input must get a clear
// error and nothing else may break.
//   - Raw bytes: seeded mutations of valid requests (byte edits, odd but
//     well-typed field values, pure noise) as the payload of every
//     DocumentService method, through grpc::GenericStub.
//   - Typed: structurally valid but adversarial requests through the C++
//     client (unicode soup, invalid UTF-8, NUL bytes, label lists, NaN and
//     infinite budgets, out-of-range enums and token ids, huge words).
// Every call must end before a short deadline with OK (and a sane response)
// or an error naming the offending field. Bytes that are not a request message
// at all may get INTERNAL, or INVALID_ARGUMENT saying so; UNIMPLEMENTED with
// no message (what gRPC's callback API answers by itself) is not a clear
// error, since the method exists. Afterwards the server must still answer
// health SERVING and a normal Embed correctly, and exit 0 on SIGTERM.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/docsparse_client.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/server_process.h"

namespace docsparse {
namespace {

using grpc::health::v1::HealthCheckResponse;

constexpr int64_t kMaxDocumentBytes = 100000;
constexpr int64_t kMaxDocumentTokens = 5000;
constexpr int kVocabSize = 30522;  // minilm
constexpr int kHiddenSize = 384;
constexpr uint64_t kSeed = 0x66757a7aULL;  // "fuzz"
constexpr int kRawCasesPerMethod = 250;
// Longer than any legitimate request here takes (the largest is 5000 tokens
// on two threads); a call still running then counts as hung.
constexpr auto kCallDeadline = std::chrono::seconds(20);

const char kService[] = "/docsparse.v1.DocumentService/";
constexpr const char* kMethods[] = {"Embed", "Classify", "Summarize", "SummarizeStream",
                                    "ListModels"};

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  size_t Below(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(engine_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(engine_); }
  template <typename T>
  const T& Pick(const std::vector<T>& items) {
    return items[Below(items.size())];
  }
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

std::string Utf8(char32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

std::string Repeat(const std::string& piece, size_t times) {
  std::string out;
  out.reserve(piece.size() * times);
  for (size_t i = 0; i < times; ++i) out += piece;
  return out;
}

// Valid UTF-8 from scripts, controls, combining marks, invisible and
// bidirectional marks, private use, noncharacters, emoji and planes 2 and 14.
std::string UnicodeSoup(Rng& rng, size_t chars) {
  static const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x20, 0x7E},       {0x00, 0x1F},        {0x7F, 0x9F},       {0xA0, 0xFF},
      {0x300, 0x36F},     {0x370, 0x4FF},      {0x590, 0x6FF},     {0x900, 0x97F},
      {0xE00, 0xE7F},     {0x1100, 0x11FF},    {0x2000, 0x206F},   {0x3000, 0x303F},
      {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3},    {0xE000, 0xF8FF},   {0xFE00, 0xFE0F},
      {0xFFF0, 0xFFFF},   {0x1F1E6, 0x1F1FF},  {0x1F300, 0x1FAFF}, {0x20000, 0x2A6DF},
      {0xE0000, 0xE007F}, {0x10FFF0, 0x10FFFF}};
  std::string out;
  for (size_t i = 0; i < chars; ++i) {
    const auto& [low, high] = rng.Pick(ranges);
    out += Utf8(low + static_cast<char32_t>(rng.Below(high - low + 1)));
  }
  return out;
}

std::string Printable(std::string_view text, size_t limit = 160) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < limit; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else {
      out += absl::StrCat("\\x", absl::Hex(c, absl::kZeroPad2));
    }
  }
  if (text.size() > limit) absl::StrAppend(&out, "...(", text.size(), " bytes)");
  return out;
}

bool ValidUtf8(const std::string& text) {
  // Round trip through a proto3 string field, which the runtime validates.
  v1::LabelScore probe;
  probe.set_label(text);
  v1::LabelScore back;
  return back.ParseFromString(probe.SerializeAsString());
}

// ------------------------------------------------------- response checks --

std::string CheckCost(const v1::CostReport& cost, const v1::SparsityBudget& budget) {
  std::ostringstream bad;
  for (double value : {cost.mean_density(), cost.attention_flops(), cost.total_flops(),
                       cost.dense_equivalent_flops(), cost.timings().total_ms()}) {
    if (!std::isfinite(value) || value < 0) bad << "cost has " << value << "; ";
  }
  if (cost.windows() < 1) bad << "windows " << cost.windows() << "; ";
  if (cost.input_tokens() < 1) bad << "input_tokens " << cost.input_tokens() << "; ";
  if (cost.budget().SerializeAsString() != budget.SerializeAsString()) {
    bad << "budget echoed as {" << cost.budget().ShortDebugString() << "}; ";
  }
  return bad.str();
}

std::string CheckEmbed(const v1::EmbedRequest& request, const v1::EmbedResponse& response) {
  std::ostringstream bad;
  if (response.embedding_size() != kHiddenSize) bad << response.embedding_size() << " dims; ";
  double norm = 0;
  for (float x : response.embedding()) {
    if (!std::isfinite(x)) {
      bad << "embedding has " << x << "; ";
      break;
    }
    norm += static_cast<double>(x) * x;
  }
  const bool normalize = !request.has_normalize() || request.normalize();
  if (normalize && std::abs(std::sqrt(norm) - 1) > 1e-3) bad << "norm " << std::sqrt(norm) << "; ";
  return bad.str() + CheckCost(response.cost(), request.budget());
}

std::string CheckClassify(const v1::ClassifyRequest& request,
                          const v1::ClassifyResponse& response) {
  std::ostringstream bad;
  if (request.labels_size() > 0) {
    std::multiset<std::string> want(request.labels().begin(), request.labels().end());
    std::multiset<std::string> got;
    for (const auto& score : response.scores()) got.insert(score.label());
    if (want != got) bad << "labels differ from the request's; ";
  } else if (response.scores_size() == 0) {
    bad << "no scores; ";
  }
  double total = 0;
  for (int i = 0; i < response.scores_size(); ++i) {
    const v1::LabelScore& s = response.scores(i);
    if (!std::isfinite(s.score()) || s.score() < 0 || s.score() > 1 ||
        !std::isfinite(s.similarity()) || std::abs(s.similarity()) > 1.01f) {
      bad << "label '" << Printable(s.label(), 40) << "' has score " << s.score() << " similarity "
          << s.similarity() << "; ";
      break;
    }
    if (i > 0 && s.score() > response.scores(i - 1).score()) bad << "not sorted; ";
    total += s.score();
  }
  if (response.scores_size() > 0 && std::abs(total - 1) > 1e-3) bad << "scores sum to " << total;
  return bad.str() + CheckCost(response.cost(), request.budget());
}

std::string CheckSummary(const v1::SummarizeRequest& request,
                         const v1::SummarizeResponse& response) {
  std::ostringstream bad;
  const std::string& text =
      request.document().has_text() ? request.document().text() : request.document().utf8_bytes();
  const int limit =
      request.extractive().max_sentences() > 0 ? request.extractive().max_sentences() : 5;
  if (response.sentences_size() > limit) bad << response.sentences_size() << " sentences; ";
  for (const auto& sentence : response.sentences()) {
    if (sentence.begin_byte() < 0 || sentence.begin_byte() >= sentence.end_byte() ||
        sentence.end_byte() > static_cast<int64_t>(text.size()) ||
        !std::isfinite(sentence.score())) {
      bad << "sentence " << sentence.index() << " [" << sentence.begin_byte() << ", "
          << sentence.end_byte() << ") score " << sentence.score() << "; ";
      break;
    }
  }
  if (!ValidUtf8(response.summary())) bad << "summary is not UTF-8; ";
  return bad.str() + CheckCost(response.cost(), request.budget());
}

// ----------------------------------------------------------- the fixture --

// One typed call: its status and, for OK, what is wrong with the response.
struct CallResult {
  absl::Status status;
  std::string insane;
};

class RequestFuzzTest : public ::testing::Test {
 protected:
  // A server per test, so that each test ends by stopping its own with
  // SIGTERM after the fuzzing.
  void SetUp() override {
    ASSERT_TRUE(testing::MiniLmPresent());
    server_ = std::make_unique<testing::ServerProcess>();
    ASSERT_TRUE(server_->Start(
        testing::ServerBinary(),
        testing::LoopbackFlags(testing::MiniLmOnlyRepository(),
                               // fp32: after the fuzzing, answers are checked against HF's at 1e-4.
                               {"--threads=2", "--precision=fp32",
                                "--max_document_bytes=" + std::to_string(kMaxDocumentBytes),
                                "--max_document_tokens=" + std::to_string(kMaxDocumentTokens)})))
        << ServerOutput();
    auto client = DocsparseClient::Connect(server_->grpc_address());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  // What the server printed: stdout, then the end of stderr.
  // Everything the server printed; ServerProcess keeps draining the pipe
  // (libprotobuf logs a line per request with invalid UTF-8).
  std::string ServerOutput() const {
    const std::string output = server_->output();
    return output.substr(output.size() > 4000 ? output.size() - 4000 : 0);
  }

  CallResult Embed(const v1::EmbedRequest& request) {
    auto response = client_->Embed(request, absl::FromChrono(kCallDeadline));
    if (!response.ok()) return {response.status(), ""};
    return {absl::OkStatus(), CheckEmbed(request, *response)};
  }
  CallResult Classify(const v1::ClassifyRequest& request) {
    auto response = client_->Classify(request, absl::FromChrono(kCallDeadline));
    if (!response.ok()) return {response.status(), ""};
    return {absl::OkStatus(), CheckClassify(request, *response)};
  }
  CallResult Summarize(const v1::SummarizeRequest& request) {
    auto response = client_->Summarize(request, absl::FromChrono(kCallDeadline));
    if (!response.ok()) return {response.status(), ""};
    return {absl::OkStatus(), CheckSummary(request, *response)};
  }

  // OK with a sane response, or an error with one of `codes` whose message
  // names one of `fields`.
  void ExpectOkOrNamedError(const std::string& name, const CallResult& result,
                            const std::vector<std::string>& fields,
                            const std::set<absl::StatusCode>& codes = {
                                absl::StatusCode::kInvalidArgument,
                                absl::StatusCode::kResourceExhausted}) {
    Record(name, result);
    if (result.status.ok()) {
      EXPECT_EQ(result.insane, "") << name << ": OK with a broken response";
      return;
    }
    EXPECT_TRUE(codes.count(result.status.code()) > 0) << name << ": " << result.status;
    ExpectNamesAField(name, result.status, fields);
  }

  // An error with `code` whose message names one of `fields`.
  void ExpectError(const std::string& name, const CallResult& result, absl::StatusCode code,
                   const std::vector<std::string>& fields) {
    Record(name, result);
    EXPECT_EQ(result.status.code(), code)
        << name << ": " << result.status
        << (result.status.ok() ? " (accepted; response: " + result.insane + ")" : "");
    if (!result.status.ok()) ExpectNamesAField(name, result.status, fields);
  }

  void ExpectNamesAField(const std::string& name, const absl::Status& status,
                         const std::vector<std::string>& fields) {
    for (const std::string& field : fields) {
      if (status.message().find(field) != std::string::npos) return;
    }
    ADD_FAILURE() << name << ": the message names none of {" << absl::StrJoin(fields, ", ")
                  << "}: " << status;
  }

  void Record(const std::string& name, const CallResult& result) {
    ++codes_[absl::StatusCodeToString(result.status.code())];
    if (verbose_) {
      std::cout << "[ fuzz ] " << name << " -> " << absl::StatusCodeToString(result.status.code())
                << " " << Printable(std::string(result.status.message()), 140) << "\n";
    }
  }

  void PrintCodes(const std::string& what) {
    std::cout << "[ fuzz ] " << what << ":";
    for (const auto& [code, count] : codes_) std::cout << " " << code << "=" << count;
    std::cout << "\n";
  }

  // Part (c): the server still serves health and a correct Embed, and stops
  // with exit code 0 on SIGTERM.
  void ExpectServesAndStopsCleanly() {
    auto overall = client_->Health("");
    ASSERT_TRUE(overall.ok()) << overall.status() << "\n" << ServerOutput();
    EXPECT_EQ(*overall, HealthCheckResponse::SERVING);
    auto service = client_->Health("docsparse.v1.DocumentService");
    ASSERT_TRUE(service.ok()) << service.status();
    EXPECT_EQ(*service, HealthCheckResponse::SERVING);

    std::istringstream lines(testing::ReadFile(testing::FixturePath("minilm/embeddings.jsonl")));
    std::string line;
    ASSERT_TRUE(std::getline(lines, line));
    const nlohmann::json reference = nlohmann::json::parse(line);
    v1::EmbedRequest request;
    request.set_model("minilm");  // the dense model the fixture comes from
    request.mutable_document()->set_text(reference["text"].get<std::string>());
    auto response = client_->Embed(request, absl::FromChrono(kCallDeadline));
    ASSERT_TRUE(response.ok()) << response.status();
    const auto want = reference["mean_normalized"].get<std::vector<float>>();
    ASSERT_EQ(response->embedding_size(), static_cast<int>(want.size()));
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(response->embedding(static_cast<int>(i)), want[i], 1e-4) << "dim " << i;
    }

    client_.reset();
    const std::optional<int> code = server_->Stop(SIGTERM, std::chrono::seconds(30));
    ASSERT_TRUE(code.has_value()) << "no exit within 30 s of SIGTERM\n" << ServerOutput();
    EXPECT_EQ(*code, 0) << ServerOutput();
    EXPECT_NE(server_->output().find("docsparse-server: stopped"), std::string::npos)
        << ServerOutput();
  }

  std::unique_ptr<testing::ServerProcess> server_;
  std::unique_ptr<DocsparseClient> client_;
  std::map<std::string, int> codes_;
  bool verbose_ = std::getenv("DOCSPARSE_FUZZ_VERBOSE") != nullptr;
};

// ------------------------------------------------------------- raw bytes --

struct RawResult {
  grpc::Status status;
  std::vector<std::string> responses;
};

// Calls `path` ("/package.Service/Method") with `payload` as the one request
// message, as a stream so the same code serves unary and server-streaming
// methods.
RawResult CallRawPath(grpc::GenericStub& stub, const std::string& path,
                      const std::string& payload) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
  grpc::CompletionQueue queue;
  RawResult result;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, path, &queue);
  const auto wait = [&queue]() {
    void* tag = nullptr;
    bool ok = false;
    queue.Next(&tag, &ok);
    return ok;
  };
  call->StartCall(nullptr);
  if (wait()) {
    grpc::Slice slice(payload);
    grpc::ByteBuffer request(&slice, 1);
    call->Write(request, nullptr);
    if (wait()) {
      call->WritesDone(nullptr);
      wait();
    }
    grpc::ByteBuffer response;
    while (true) {
      call->Read(&response, nullptr);
      if (!wait()) break;
      std::vector<grpc::Slice> slices;
      (void)response.Dump(&slices);
      std::string bytes;
      for (const grpc::Slice& s : slices) bytes.append(s.begin(), s.end());
      result.responses.push_back(std::move(bytes));
    }
  }
  call->Finish(&result.status, nullptr);
  wait();
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {
  }
  return result;
}

// Calls DocumentService's `method`.
RawResult CallRaw(grpc::GenericStub& stub, const std::string& method, const std::string& payload) {
  return CallRawPath(stub, kService + method, payload);
}

// Valid requests of each method, serialised: the material the mutations
// start from.
std::map<std::string, std::vector<std::string>> SeedPayloads() {
  std::map<std::string, std::vector<std::string>> seeds;
  {
    v1::EmbedRequest a;
    a.mutable_document()->set_text("A short document about cats and dogs.");
    v1::EmbedRequest b;
    b.set_model("minilm");
    b.mutable_document()->set_utf8_bytes("Bytes \xC3\xA9t\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC.");
    b.mutable_budget()->set_max_density(0.5);
    b.mutable_budget()->set_seed(7);
    b.mutable_options()->set_overflow(v1::OVERFLOW_TRUNCATE);
    b.mutable_options()->set_request_id("fuzz-seed");
    b.set_pooling(v1::POOLING_CLS);
    b.set_normalize(false);
    v1::EmbedRequest c;
    for (int id : {2023, 2003, 1037, 3231, 1012})
      c.mutable_document()->mutable_token_ids()->add_ids(id);
    c.mutable_budget()->set_max_attention_gflops(1);
    seeds["Embed"] = {a.SerializeAsString(), b.SerializeAsString(), c.SerializeAsString()};
  }
  {
    v1::ClassifyRequest a;
    a.mutable_document()->set_text("The recipe needs flour, eggs and sugar.");
    a.add_labels("recipe");
    a.add_labels("software license");
    a.set_temperature(0.1f);
    v1::ClassifyRequest b;
    b.mutable_document()->set_text("Quarterly revenue grew by ten percent.");
    seeds["Classify"] = {a.SerializeAsString(), b.SerializeAsString()};
  }
  {
    v1::SummarizeRequest a;
    a.mutable_document()->set_text(
        "The first sentence is about cats. The second sentence is about dogs. "
        "A third sentence talks about birds and trees. The last one is short.");
    a.mutable_extractive()->set_max_sentences(2);
    a.mutable_extractive()->set_diversity(0.5f);
    v1::SummarizeRequest b;
    b.mutable_document()->set_text("Only one sentence here.");
    b.mutable_budget()->set_strict(true);
    seeds["Summarize"] = {a.SerializeAsString(), b.SerializeAsString()};
    seeds["SummarizeStream"] = seeds["Summarize"];
  }
  seeds["ListModels"] = {std::string(), std::string("\x08\x01", 2),
                         std::string("\x12\x03"
                                     "abc",
                                     5)};
  return seeds;
}

// Sets one field of `message` (or of a message inside it) to an odd but
// well-typed value: NaN and infinite numbers, extreme integers, enum numbers
// outside the enum, unicode soup strings, random bytes. The result still
// parses, so it reaches docsparse's own validation.
void MutateField(Rng& rng, google::protobuf::Message* message, int depth = 0) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Descriptor* type = message->GetDescriptor();
  if (type->field_count() == 0) return;
  const FieldDescriptor* field = type->field(static_cast<int>(rng.Below(type->field_count())));
  const google::protobuf::Reflection* r = message->GetReflection();
  static const std::vector<double> doubles = {NAN,    INFINITY, -INFINITY, 4.9e-324, 0.0, -0.0,
                                              1e-300, 1e300,    -1.0,      0.5,      1.0, 2.0};
  static const std::vector<int64_t> ints = {
      0,          1,         -1,        2,         511,      512, 1000, 1001, kVocabSize - 1,
      kVocabSize, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
  const auto text = [&rng]() {
    return rng.Chance(0.2) ? std::string()
                           : UnicodeSoup(rng, 1 + rng.Below(rng.Chance(0.1) ? 3000 : 30));
  };
  const bool repeated = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_MESSAGE:
      if (depth < 3 && !repeated) {
        MutateField(rng, r->MutableMessage(message, field), depth + 1);
      } else if (!repeated) {
        r->ClearField(message, field);
      }
      return;
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      const double value = rng.Pick(doubles);
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {
        repeated ? r->AddFloat(message, field, static_cast<float>(value))
                 : r->SetFloat(message, field, static_cast<float>(value));
      } else {
        repeated ? r->AddDouble(message, field, value) : r->SetDouble(message, field, value);
      }
      return;
    }
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: {
      const int64_t value = rng.Pick(ints);
      for (size_t n = repeated ? 1 + rng.Below(4) : 1; n > 0; --n) {
        switch (field->cpp_type()) {
          case FieldDescriptor::CPPTYPE_INT32:
            repeated ? r->AddInt32(message, field, static_cast<int32_t>(value))
                     : r->SetInt32(message, field, static_cast<int32_t>(value));
            break;
          case FieldDescriptor::CPPTYPE_INT64:
            repeated ? r->AddInt64(message, field, value) : r->SetInt64(message, field, value);
            break;
          case FieldDescriptor::CPPTYPE_UINT32:
            r->SetUInt32(message, field, static_cast<uint32_t>(value));
            break;
          default:
            r->SetUInt64(message, field, static_cast<uint64_t>(value));
            break;
        }
      }
      return;
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      if (!repeated) r->SetBool(message, field, !r->GetBool(*message, field));
      return;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int value =
          rng.Chance(0.5) ? static_cast<int>(rng.Below(12)) - 1 : static_cast<int>(rng.Pick(ints));
      repeated ? r->AddEnumValue(message, field, value) : r->SetEnumValue(message, field, value);
      return;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string value;
      if (field->type() == FieldDescriptor::TYPE_BYTES && rng.Chance(0.5)) {
        value.resize(rng.Below(40));
        for (char& c : value) c = static_cast<char>(rng.Below(256));
      } else {
        value = text();
      }
      repeated ? r->AddString(message, field, value) : r->SetString(message, field, value);
      return;
    }
  }
}

std::unique_ptr<google::protobuf::Message> NewRequest(const std::string& method) {
  if (method == "Embed") return std::make_unique<v1::EmbedRequest>();
  if (method == "Classify") return std::make_unique<v1::ClassifyRequest>();
  if (method == "ListModels") return std::make_unique<v1::ListModelsRequest>();
  return std::make_unique<v1::SummarizeRequest>();
}

void MutatePayload(Rng& rng, const std::vector<std::string>& seeds, std::string* p) {
  const size_t pos = rng.Below(p->size() + 1);
  switch (rng.Below(8)) {
    case 0:
      if (!p->empty()) (*p)[rng.Below(p->size())] ^= static_cast<char>(1 << rng.Below(8));
      break;
    case 1:
      if (!p->empty()) (*p)[rng.Below(p->size())] = static_cast<char>(rng.Below(256));
      break;
    case 2:
      p->resize(pos);
      break;
    case 3:
      p->erase(pos, 1 + rng.Below(8));
      break;
    case 4: {  // random bytes
      std::string noise(1 + rng.Below(12), '\0');
      for (char& c : noise) c = static_cast<char>(rng.Below(256));
      p->insert(pos, noise);
      break;
    }
    case 5: {  // a copy of a range
      const size_t begin = rng.Below(p->size() + 1);
      p->insert(pos, p->substr(begin, 1 + rng.Below(32)));
      break;
    }
    case 6:  // another request appended: protobuf merges the two
      *p += rng.Pick(seeds);
      break;
    default: {  // a field with a random number, wire type and value
      static const std::vector<std::string> tails = {
          std::string("\x01", 1), std::string("\xFF\xFF\xFF\xFF\x0F", 5),
          std::string("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 10), std::string("\x7F") + "abc",
          std::string("\x00", 1)};
      std::string field(1, static_cast<char>(rng.Below(256)));
      if (rng.Chance(0.3)) field.push_back(static_cast<char>(rng.Below(128)));
      p->insert(pos, field + rng.Pick(tails));
      break;
    }
  }
}

template <typename Request>
bool Parses(const std::string& bytes) {
  Request request;
  return request.ParseFromString(bytes);
}

bool RequestParses(const std::string& method, const std::string& bytes) {
  if (method == "Embed") return Parses<v1::EmbedRequest>(bytes);
  if (method == "Classify") return Parses<v1::ClassifyRequest>(bytes);
  if (method == "ListModels") return Parses<v1::ListModelsRequest>(bytes);
  return Parses<v1::SummarizeRequest>(bytes);
}

bool ResponseParses(const std::string& method, const std::string& bytes) {
  if (method == "Embed") return Parses<v1::EmbedResponse>(bytes);
  if (method == "Classify") return Parses<v1::ClassifyResponse>(bytes);
  if (method == "Summarize") return Parses<v1::SummarizeResponse>(bytes);
  if (method == "ListModels") return Parses<v1::ListModelsResponse>(bytes);
  return Parses<v1::SummarizeChunk>(bytes);
}

// What is wrong with the server's answer to `payload`; empty when fine.
std::string JudgeRaw(const std::string& method, const std::string& payload,
                     const RawResult& result) {
  const grpc::StatusCode code = result.status.error_code();
  const bool parses = RequestParses(method, payload);
  switch (code) {
    case grpc::StatusCode::OK: {
      if (!parses) return "OK for bytes that are not a request message";
      const bool streaming = method == "SummarizeStream";
      if (result.responses.empty() || (!streaming && result.responses.size() != 1)) {
        return absl::StrCat("OK with ", result.responses.size(), " responses");
      }
      for (const std::string& bytes : result.responses) {
        if (!ResponseParses(method, bytes)) return "OK with a response that does not parse";
      }
      return "";
    }
    case grpc::StatusCode::INTERNAL:
      return parses ? "INTERNAL for a valid request message: " + result.status.error_message() : "";
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::RESOURCE_EXHAUSTED: {
      if (!parses) {
        // The methods parse their own bytes (server/parsed_unary_call.h):
        // bytes that are not the message are INVALID_ARGUMENT saying so.
        return code == grpc::StatusCode::INVALID_ARGUMENT &&
                       absl::StartsWith(result.status.error_message(),
                                        "request: the bytes are not a")
                   ? ""
                   : "bytes that are not a request message answered " +
                         result.status.error_message();
      }
      for (const char* field : {"document", "budget", "labels", "temperature", "extractive",
                                "generation", "options", "model", "pooling", "queue"}) {
        if (result.status.error_message().find(field) != std::string::npos) return "";
      }
      return "the message names no field: " + result.status.error_message();
    }
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "no answer within the deadline (hung)";
    default:
      return absl::StrCat("code ", code, " (request parses: ", parses,
                          "): ", result.status.error_message());
  }
}

TEST_F(RequestFuzzTest, BytesThatAreNotTheRequestGetInvalidArgumentOnEveryMethod) {
  grpc::GenericStub stub(
      grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
  // method path -> its request message
  const std::vector<std::pair<std::string, std::string>> methods = {
      {"/docsparse.v1.DocumentService/Embed", "docsparse.v1.EmbedRequest"},
      {"/docsparse.v1.DocumentService/Classify", "docsparse.v1.ClassifyRequest"},
      {"/docsparse.v1.DocumentService/Summarize", "docsparse.v1.SummarizeRequest"},
      {"/docsparse.v1.DocumentService/SummarizeStream", "docsparse.v1.SummarizeRequest"},
      {"/docsparse.v1.DocumentService/ListModels", "docsparse.v1.ListModelsRequest"},
      {"/inference.GRPCInferenceService/ServerLive", "inference.ServerLiveRequest"},
      {"/inference.GRPCInferenceService/ServerReady", "inference.ServerReadyRequest"},
      {"/inference.GRPCInferenceService/ModelReady", "inference.ModelReadyRequest"},
      {"/inference.GRPCInferenceService/ServerMetadata", "inference.ServerMetadataRequest"},
      {"/inference.GRPCInferenceService/ModelMetadata", "inference.ModelMetadataRequest"},
      {"/inference.GRPCInferenceService/ModelInfer", "inference.ModelInferRequest"},
  };
  // A field 1 of wire type 7 (none), a length past the end, a varint that
  // never ends, an end-group tag with no group.
  const std::vector<std::string> garbage = {std::string("\x0f\x01\x02", 3),
                                            std::string("\x0a\x7f"
                                                        "abc",
                                                        5),
                                            std::string(12, '\xff'), std::string("\x0c", 1)};
  for (const auto& [path, message] : methods) {
    for (const std::string& payload : garbage) {
      const RawResult result = CallRawPath(stub, path, payload);
      EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << path << " " << Printable(payload, 12) << ": " << result.status.error_message();
      EXPECT_EQ(result.status.error_message().rfind("request: the bytes are not a " + message, 0),
                0u)
          << path << ": " << result.status.error_message();
    }
  }
  // The server still answers.
  v1::EmbedRequest request;
  request.mutable_document()->set_text("A short document after the garbage.");
  EXPECT_TRUE(Embed(request).status.ok());
}

TEST_F(RequestFuzzTest, MutatedBytesToEveryMethodEndWithAStatus) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  grpc::GenericStub stub(
      grpc::CreateCustomChannel(server_->grpc_address(), grpc::InsecureChannelCredentials(), args));
  const auto seeds = SeedPayloads();
  std::map<std::string, std::map<std::string, int>> codes;  // method -> code -> count
  std::map<std::string, int> messages;
  // Violations by kind: count, and the first case of each.
  std::map<std::string, std::pair<int, std::string>> violations;
  const auto start = std::chrono::steady_clock::now();
  const int calls = kRawCasesPerMethod * static_cast<int>(std::size(kMethods));
  for (int i = 0; i < calls; ++i) {
    const std::string method = kMethods[static_cast<size_t>(i) % std::size(kMethods)];
    Rng rng(kSeed * 31 + static_cast<uint64_t>(i));
    const std::vector<std::string>& method_seeds = seeds.at(method);
    std::string payload;
    const double kind = std::uniform_real_distribution<double>(0, 1)(rng.engine());
    if (kind < 0.15) {  // pure noise
      payload.resize(rng.Below(96));
      for (char& c : payload) c = static_cast<char>(rng.Below(256));
    } else if (kind < 0.45) {  // well-typed but odd field values
      std::unique_ptr<google::protobuf::Message> request = NewRequest(method);
      request->ParseFromString(rng.Pick(method_seeds));
      for (size_t n = 1 + rng.Below(3); n > 0; --n) MutateField(rng, request.get());
      payload = request->SerializeAsString();
    } else {
      payload = rng.Pick(method_seeds);
      for (size_t n = 1 + rng.Below(4); n > 0; --n) MutatePayload(rng, method_seeds, &payload);
    }
    const RawResult result = CallRaw(stub, method, payload);
    ++codes[method]
           [absl::StatusCodeToString(static_cast<absl::StatusCode>(result.status.error_code()))];
    if (!result.status.ok()) {
      // The message up to what it quotes from the request, at most 60 bytes.
      const std::string& message = result.status.error_message();
      std::string shape = message.substr(0, std::min<size_t>(60, message.find('\'')));
      for (char& c : shape) {
        if (std::isdigit(static_cast<unsigned char>(c))) c = '#';
      }
      ++messages[absl::StatusCodeToString(
                     static_cast<absl::StatusCode>(result.status.error_code())) +
                 " \"" + shape + "\""];
    }
    const std::string wrong = JudgeRaw(method, payload, result);
    if (!wrong.empty()) {
      auto& [count, first] = violations[wrong.substr(0, 80)];
      if (count++ == 0) {
        first = absl::StrCat(method, " case ", i, ": ", wrong, "\n  payload (", payload.size(),
                             " bytes): ", Printable(payload, 300));
      }
    }
    if (result.status.error_code() == grpc::StatusCode::UNAVAILABLE ||
        result.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      auto health = client_->Health("", absl::Seconds(5));
      FAIL() << method << " case " << i << " got " << result.status.error_code() << " \""
             << result.status.error_message() << "\"; health afterwards: "
             << (health.ok() ? HealthCheckResponse::ServingStatus_Name(*health)
                             : health.status().ToString())
             << "\n  payload (" << payload.size() << " bytes): " << Printable(payload, 400)
             << "\n  server output:\n"
             << ServerOutput();
    }
  }
  for (const auto& [kind, found] : violations) {
    ADD_FAILURE() << found.first << " call(s) like this; the first: " << found.second;
  }
  std::cout << "[ fuzz ] " << calls << " raw calls (seed " << kSeed << ") in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s\n";
  for (const auto& [method, counts] : codes) {
    std::cout << "[ fuzz ]   " << method << ":";
    for (const auto& [code, count] : counts) std::cout << " " << code << "=" << count;
    std::cout << "\n";
  }
  for (const auto& [message, count] : messages) {
    std::cout << "[ fuzz ]   " << count << " x " << Printable(message, 90) << "\n";
  }
  ExpectServesAndStopsCleanly();
}

// ------------------------------------------------------------------ typed --

v1::EmbedRequest EmbedText(const std::string& text) {
  v1::EmbedRequest request;
  request.mutable_document()->set_text(text);
  return request;
}

v1::EmbedRequest EmbedBytes(const std::string& bytes) {
  v1::EmbedRequest request;
  request.mutable_document()->set_utf8_bytes(bytes);
  return request;
}

v1::EmbedRequest EmbedIds(const std::vector<int32_t>& ids) {
  v1::EmbedRequest request;
  request.mutable_document()->mutable_token_ids();  // set, even when empty
  for (int32_t id : ids) request.mutable_document()->mutable_token_ids()->add_ids(id);
  return request;
}

v1::ClassifyRequest ClassifyText(const std::string& text, const std::vector<std::string>& labels) {
  v1::ClassifyRequest request;
  request.mutable_document()->set_text(text);
  for (const std::string& label : labels) request.add_labels(label);
  return request;
}

v1::SummarizeRequest SummarizeText(const std::string& text) {
  v1::SummarizeRequest request;
  request.mutable_document()->set_text(text);
  return request;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const std::string kShort = "A short document about the weather.";

TEST_F(RequestFuzzTest, AdversarialTextGetsOkOrANamedError) {
  const auto invalid = absl::StatusCode::kInvalidArgument;
  const auto exhausted = absl::StatusCode::kResourceExhausted;
  Rng rng(kSeed);
  for (int i = 0; i < 12; ++i) {
    const std::string soup = UnicodeSoup(rng, 20 + rng.Below(400));
    const std::string name = absl::StrCat("unicode soup ", i);
    ExpectOkOrNamedError(name + " as text", Embed(EmbedText(soup)), {"document.text"});
    ExpectOkOrNamedError(name + " as utf8_bytes", Embed(EmbedBytes(soup)), {"document.utf8_bytes"});
    if (i % 3 == 0) {
      ExpectOkOrNamedError(name + " classified with soup labels",
                           Classify(ClassifyText(soup, {UnicodeSoup(rng, 5), UnicodeSoup(rng, 9)})),
                           {"document.text", "labels["});
      ExpectOkOrNamedError(name + " summarized", Summarize(SummarizeText(soup)), {"document.text"});
    }
  }

  // Not UTF-8: lone surrogates, overlong forms, beyond U+10FFFF, stray and
  // truncated sequences. Named, with the offset.
  for (const std::string bad :
       {"\xED\xA0\x80", "\xED\xBF\xBF", "\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF", "\xF0\x80\x80\xAF",
        "\xF4\x90\x80\x80", "\xF8\x88\x80\x80\x80", "\xFF", "\xFE", "\x80", "\xE2\x82", "\xC2",
        "\xE2\x28\xA1"}) {
    ExpectError("utf8_bytes with " + Printable(bad), Embed(EmbedBytes("ok " + bad + " tail")),
                invalid, {"document.utf8_bytes"});
  }
  v1::SummarizeRequest surrogate_summary;
  surrogate_summary.mutable_document()->set_utf8_bytes("Fine. \xED\xA0\x80 Not fine.");
  ExpectError("summarize utf8_bytes with a lone surrogate", Summarize(surrogate_summary), invalid,
              {"document.utf8_bytes"});
  v1::ClassifyRequest overlong_classify;
  overlong_classify.mutable_document()->set_utf8_bytes("\xC0\xAF");
  overlong_classify.add_labels("x");
  ExpectError("classify utf8_bytes overlong", Classify(overlong_classify), invalid,
              {"document.utf8_bytes"});

  // NUL bytes and text that tokenizes to nothing.
  ExpectOkOrNamedError("NUL inside text", Embed(EmbedText(std::string("hello\0world", 11))),
                       {"document.text"});
  for (const std::string& empty :
       {std::string(3, '\0'), std::string("\x01\x02\x7F"),
        std::string("\xE3\x80\x80\xC2\xA0\xE2\x80\x83"), std::string("\xE2\x80\x8B\xE2\x80\x8B")}) {
    ExpectError("text without tokens " + Printable(empty), Embed(EmbedText(empty)), invalid,
                {"document.text"});
    ExpectError("utf8_bytes without tokens " + Printable(empty), Embed(EmbedBytes(empty)), invalid,
                {"document.utf8_bytes"});
  }

  // Very long single words, and documents of only punctuation, emoji or CJK.
  const std::string emoji = "\xF0\x9F\x98\x80";
  const std::string cjk = "\xE6\x97\xA5";
  const CallResult long_word = Embed(EmbedText(std::string(kMaxDocumentBytes - 1, 'a')));
  ExpectOkOrNamedError("one word of 99999 letters", long_word, {"document.text"});
  ExpectOkOrNamedError("one word of 50000 e-acute", Embed(EmbedText(Repeat("\xC3\xA9", 50000))),
                       {"document.text"});
  ExpectOkOrNamedError("one word of 25000 emoji", Embed(EmbedText(Repeat(emoji, 25000))),
                       {"document.text"});
  ExpectError("one byte over the limit", Embed(EmbedText(std::string(kMaxDocumentBytes + 1, 'a'))),
              exhausted, {"100000 bytes"});
  ExpectError("33333 CJK characters", Embed(EmbedText(Repeat(cjk, 33333))), exhausted,
              {"5000 tokens"});
  ExpectError("5001 full stops", Embed(EmbedText(std::string(5001, '.'))), exhausted,
              {"5000 tokens"});
  ExpectOkOrNamedError("4000 exclamation marks", Embed(EmbedText(std::string(4000, '!'))),
                       {"document.text"});
  ExpectOkOrNamedError("2000 spaced emoji", Embed(EmbedText(Repeat(emoji + " ", 2000))),
                       {"document.text"});
  ExpectOkOrNamedError("3000 CJK characters", Embed(EmbedText(Repeat(cjk, 3000))),
                       {"document.text"});
  ExpectOkOrNamedError("summarize punctuation", Summarize(SummarizeText(Repeat("?!. ", 1000))),
                       {"document.text"});
  ExpectOkOrNamedError("summarize CJK", Summarize(SummarizeText(Repeat(cjk, 2000))),
                       {"document.text"});
  ExpectOkOrNamedError("summarize emoji", Summarize(SummarizeText(Repeat(emoji + " ", 1500))),
                       {"document.text"});
  ExpectOkOrNamedError("summarize 1000 tiny sentences",
                       Summarize(SummarizeText(Repeat("A b c. ", 1000))), {"document.text"});
  PrintCodes("adversarial text");
  ExpectServesAndStopsCleanly();
}

TEST_F(RequestFuzzTest, AdversarialFieldsGetOkOrANamedError) {
  const auto invalid = absl::StatusCode::kInvalidArgument;
  const auto exhausted = absl::StatusCode::kResourceExhausted;

  // Budgets: NaN, infinities, signs and zero.
  for (double density : {kNaN, -kNaN, -1.0, 0.0, -0.0, 1.5, kInf, -kInf}) {
    v1::EmbedRequest request = EmbedText(kShort);
    request.mutable_budget()->set_max_density(density);
    ExpectError(absl::StrCat("max_density ", density), Embed(request), invalid,
                {"budget.max_density"});
  }
  {
    v1::EmbedRequest request = EmbedText(kShort);
    request.mutable_budget()->set_max_density(1e-300);
    ExpectOkOrNamedError("max_density 1e-300", Embed(request), {"budget.max_density"});
    request.mutable_budget()->set_strict(true);
    ExpectError("strict max_density 1e-300", Embed(request), invalid, {"budget.max_density"});
  }
  for (double gflops : {kNaN, -1.0, 0.0, -0.0, -kInf}) {
    v1::EmbedRequest request = EmbedText(kShort);
    request.mutable_budget()->set_max_attention_gflops(gflops);
    ExpectError(absl::StrCat("max_attention_gflops ", gflops), Embed(request), invalid,
                {"budget.max_attention_gflops"});
  }
  for (double gflops : {kInf, 1e300, 1e-300}) {
    v1::EmbedRequest request = EmbedText(kShort);
    request.mutable_budget()->set_max_attention_gflops(gflops);
    ExpectOkOrNamedError(absl::StrCat("max_attention_gflops ", gflops), Embed(request),
                         {"budget.max_attention_gflops"});
    request.mutable_budget()->set_strict(true);
    ExpectOkOrNamedError(absl::StrCat("strict max_attention_gflops ", gflops), Embed(request),
                         {"budget.max_attention_gflops"});
  }
  for (double beta : {kNaN, -1.0, kInf, 0.0}) {
    v1::EmbedRequest request = EmbedText(kShort);
    request.mutable_budget()->set_edge_regularization(beta);
    ExpectError(absl::StrCat("edge_regularization ", beta), Embed(request), invalid,
                {"budget.edge_regularization"});
  }
  {
    v1::EmbedRequest request = EmbedText(kShort);
    request.mutable_budget()->set_seed(std::numeric_limits<uint64_t>::max());
    request.mutable_budget()->set_strict(true);
    ExpectOkOrNamedError("strict budget without a cap, seed 2^64-1", Embed(request), {"budget"});
  }

  // Enum values outside the defined range, set through reflection.
  const auto set_enum = [](google::protobuf::Message* message, const char* field, int value) {
    const auto* descriptor = message->GetDescriptor()->FindFieldByName(field);
    message->GetReflection()->SetEnumValue(message, descriptor, value);
  };
  // The first value past each enum's last (AttentionKind's grows with planners).
  for (int value : {v1::AttentionKind_MAX + 1, 42, -1, std::numeric_limits<int32_t>::max(),
                    std::numeric_limits<int32_t>::min()}) {
    v1::EmbedRequest request = EmbedText(kShort);
    set_enum(request.mutable_budget(), "attention", value);
    const CallResult attention = Embed(request);
    ExpectError(absl::StrCat("budget.attention = ", value), attention, invalid,
                {"budget.attention"});
    // A value outside the enum has no name: the message must show the number.
    EXPECT_NE(attention.status.message().find(absl::StrCat(value)), absl::string_view::npos)
        << "budget.attention = " << value << ": " << attention.status;
    request = EmbedText(testing::ReadFile("/usr/share/common-licenses/GPL-3").substr(0, 6000));
    set_enum(request.mutable_options(), "overflow", value);
    ExpectOkOrNamedError(absl::StrCat("options.overflow = ", value), Embed(request),
                         {"options.overflow"});
    request = EmbedText(kShort);
    set_enum(&request, "pooling", value);
    ExpectOkOrNamedError(absl::StrCat("pooling = ", value), Embed(request), {"pooling"});
  }
  for (int resolution : {-1, 0, 1, std::numeric_limits<int32_t>::max()}) {
    v1::EmbedRequest request = EmbedText(kShort);
    request.mutable_options()->set_return_mask_map(true);
    request.mutable_options()->set_mask_map_resolution(resolution);
    ExpectOkOrNamedError(absl::StrCat("mask_map_resolution ", resolution), Embed(request),
                         {"options.mask_map_resolution"});
  }
  {
    v1::EmbedRequest request = EmbedText(kShort);
    request.mutable_options()->set_request_id(
        Repeat("\xE2\x80\xAE"
               "id",
               10000));
    ExpectOkOrNamedError("30000-byte request_id", Embed(request), {"options.request_id"});
  }

  // Token ids: negative, huge, just outside and inside the vocabulary.
  for (int32_t id :
       {-1, std::numeric_limits<int32_t>::min(), kVocabSize, std::numeric_limits<int32_t>::max()}) {
    ExpectError(absl::StrCat("token id ", id), Embed(EmbedIds({2023, id})), invalid,
                {"document.token_ids.ids[1]"});
  }
  ExpectOkOrNamedError("token ids at the vocabulary's ends and specials",
                       Embed(EmbedIds({0, kVocabSize - 1, 100, 101, 102, 103})),
                       {"document.token_ids"});
  ExpectError("no token ids", Embed(EmbedIds({})), invalid, {"document.token_ids"});
  ExpectError("5001 token ids", Embed(EmbedIds(std::vector<int32_t>(5001, 2023))), exhausted,
              {"5000 tokens"});
  ExpectOkOrNamedError("5000 token ids", Embed(EmbedIds(std::vector<int32_t>(5000, 2023))),
                       {"document.token_ids"});
  {
    v1::EmbedRequest request = EmbedIds(std::vector<int32_t>(600, 2023));
    request.set_model("minilm");  // 512 positions (minilm-lsg has 16384)
    request.mutable_options()->set_overflow(v1::OVERFLOW_REJECT);
    ExpectError("600 token ids with REJECT", Embed(request), exhausted, {"512"});
  }
  {
    v1::ClassifyRequest request;
    for (int32_t id : {2023, 2003, -5})
      request.mutable_document()->mutable_token_ids()->add_ids(id);
    request.add_labels("x");
    ExpectError("classify with a negative token id", Classify(request), invalid,
                {"document.token_ids.ids[2]"});
    v1::SummarizeRequest summarize;
    summarize.mutable_document()->mutable_token_ids()->add_ids(2023);
    ExpectError("summarize token ids", Summarize(summarize), invalid, {"document.token_ids"});
  }

  // Models: a name no folder has is NOT_FOUND; one no folder can have (a
  // path, a control character, over 255 bytes) INVALID_ARGUMENT.
  {
    v1::EmbedRequest request = EmbedText(kShort);
    request.set_model("MINILM");
    ExpectError("model MINILM", Embed(request), absl::StatusCode::kNotFound, {"model"});
  }
  for (const std::string& model :
       {std::string("minilm\0", 7), std::string("../minilm"), std::string("/etc/passwd"),
        std::string(".."), std::string("minilm\\..\\x"), std::string(300, 'm'),
        std::string(20000, 'm')}) {
    v1::EmbedRequest request = EmbedText(kShort);
    request.set_model(model);
    ExpectError("model " + Printable(model, 20), Embed(request), invalid,
                {"model", "is not a model name"});
  }
  for (const char* task : {"classify", "summarize"}) {
    v1::ClassifyRequest classify;
    v1::SummarizeRequest summarize;
    const CallResult result =
        std::string(task) == "classify" ? Classify(classify) : Summarize(summarize);
    ExpectError(absl::StrCat(task, " without a document"), result, invalid, {"document"});
  }

  // Summaries: sentence counts, diversity, generation parameters.
  const std::string sentences =
      "Cats sleep a lot during the day. Dogs like to play outside in the park. "
      "Birds sing early in the morning. Fish swim in the cold river water.";
  for (int count :
       {-1, 1001, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()}) {
    v1::SummarizeRequest request = SummarizeText(sentences);
    request.mutable_extractive()->set_max_sentences(count);
    ExpectError(absl::StrCat("max_sentences ", count), Summarize(request), invalid,
                {"extractive.max_sentences"});
  }
  {
    v1::SummarizeRequest request = SummarizeText(sentences);
    request.mutable_extractive()->set_max_sentences(1000);
    ExpectOkOrNamedError("max_sentences 1000", Summarize(request), {"extractive.max_sentences"});
  }
  for (float diversity : {std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(), -0.1f, 1.0001f}) {
    v1::SummarizeRequest request = SummarizeText(sentences);
    request.mutable_extractive()->set_diversity(diversity);
    ExpectError(absl::StrCat("diversity ", diversity), Summarize(request), invalid,
                {"extractive.diversity"});
  }
  {
    v1::SummarizeRequest request = SummarizeText(sentences);
    request.mutable_generation()->set_num_beams(-3);
    ExpectError("generation.num_beams -3", Summarize(request), invalid, {"generation"});
  }
  PrintCodes("adversarial fields");
  ExpectServesAndStopsCleanly();
}

TEST_F(RequestFuzzTest, AdversarialLabelsGetOkOrANamedError) {
  const auto invalid = absl::StatusCode::kInvalidArgument;
  ExpectError("empty label", Classify(ClassifyText(kShort, {"x", ""})), invalid, {"labels[1]"});
  ExpectError("duplicate label", Classify(ClassifyText(kShort, {"x", "y", "x"})), invalid,
              {"labels[2]"});
  ExpectError("1025-byte label", Classify(ClassifyText(kShort, {std::string(1025, 'l')})), invalid,
              {"labels[0]"});
  ExpectOkOrNamedError("1024-byte label", Classify(ClassifyText(kShort, {std::string(1024, 'l')})),
                       {"labels[0]"});
  ExpectOkOrNamedError(
      "labels with NUL, spaces, emoji",
      Classify(ClassifyText(kShort, {std::string("a\0b", 3), std::string(1, '\0'), " ", "\t\n",
                                     "\xF0\x9F\x98\x80", "{}", "This text is about {}."})),
      {"labels["});
  ExpectOkOrNamedError("labels differing only by case",
                       Classify(ClassifyText(kShort, {"Cat", "cat", "CAT"})), {"labels["});
  {
    std::vector<std::string> many;
    for (int i = 0; i < 500; ++i) many.push_back(absl::StrCat("label number ", i));
    ExpectOkOrNamedError("500 labels", Classify(ClassifyText(kShort, many)), {"labels"});
  }

  // Temperatures: NaN, signs, zero, infinity and a subnormal float.
  for (float temperature : {std::numeric_limits<float>::quiet_NaN(), -1.0f, 0.0f, -0.0f,
                            -std::numeric_limits<float>::infinity()}) {
    v1::ClassifyRequest request = ClassifyText(kShort, {"weather", "sport"});
    request.set_temperature(temperature);
    ExpectError(absl::StrCat("temperature ", temperature), Classify(request), invalid,
                {"temperature"});
  }
  for (float temperature : {std::numeric_limits<float>::infinity(), 1e30f, 1e-30f,
                            std::numeric_limits<float>::denorm_min(), 1e-40f}) {
    v1::ClassifyRequest request = ClassifyText(kShort, {"weather", "sport", "cooking"});
    request.set_temperature(temperature);
    ExpectOkOrNamedError(absl::StrCat("temperature ", temperature), Classify(request),
                         {"temperature"});
  }
  PrintCodes("adversarial labels");
  ExpectServesAndStopsCleanly();
}

// 20000 distinct labels: a 370 KB request whose labels alone hold some
// 120000 tokens, 24 times the server's document limit, each label a forward
// pass and an entry in a cache that is never trimmed. It must be refused
// naming the labels (or answered as quickly as a document at the limit would
// be), not occupy the inference worker for a minute.
TEST_F(RequestFuzzTest, AHugeLabelListIsRefusedOrAnsweredPromptly) {
  v1::ClassifyRequest request = ClassifyText(kShort, {});
  for (int i = 0; i < 20000; ++i) request.add_labels(absl::StrCat("label number ", i));
  const auto start = std::chrono::steady_clock::now();
  auto response = client_->Classify(request, absl::Seconds(5));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ fuzz ] 20000 labels -> " << response.status() << " in " << seconds << " s\n";
  if (response.status().code() == absl::StatusCode::kDeadlineExceeded) {
    // The server keeps embedding labels after the client gives up; the
    // fixture kills it rather than wait.
    ADD_FAILURE() << "20000 labels (" << request.ByteSizeLong()
                  << " bytes) were accepted and still not answered after 5 s: there is no "
                     "limit on the number of labels";
    return;
  }
  ExpectOkOrNamedError("20000 labels", {response.status(), ""}, {"labels"});
  ExpectServesAndStopsCleanly();
}

}  // namespace
}  // namespace docsparse
