#include "kernels/packed_linear.h"

#include <dnnl.hpp>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace docsparse {

namespace {

using dnnl::memory;

const dnnl::engine& CpuEngine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

memory::data_type DataType(LinearElement element) {
  return element == LinearElement::kBf16 ? memory::data_type::bf16 : memory::data_type::f32;
}

// The row count whose primitive chooses the packed layout; every other row
// count then runs on that layout (brgemm's layout depends on the weights'
// shape and type, not on the rows).
constexpr int64_t kLayoutRows = 512;
// Row counts seen per layer before the primitives are dropped and compiled
// again: a server sees as many as its requests have lengths.
constexpr size_t kMaxCachedRowCounts = 256;

}  // namespace

struct PackedLinear::State {
  int64_t in_features = 0;
  int64_t out_features = 0;
  LinearElement element = LinearElement::kFp32;
  memory::desc weights_desc;
  memory weights;
  memory bias;  // empty without a bias
  std::string implementation;

  struct Compiled {
    dnnl::matmul primitive;
    size_t scratchpad_bytes = 0;
  };
  mutable std::mutex mutex;
  mutable std::unordered_map<int64_t, std::shared_ptr<const Compiled>> by_rows;

  dnnl::matmul::primitive_desc Describe(int64_t rows, const memory::desc& weights_layout) const {
    const memory::data_type type = DataType(element);
    const memory::desc src({rows, in_features}, type, memory::format_tag::ab);
    const memory::desc dst({rows, out_features}, type, memory::format_tag::ab);
    // The user provides the scratchpad, so one primitive can run on several
    // threads at once (a library-owned scratchpad would be shared).
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (bias) {
      return dnnl::matmul::primitive_desc(
          dnnl::matmul::desc(src, weights_layout, bias.get_desc(), dst), attr, CpuEngine());
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights_layout, dst), attr,
                                        CpuEngine());
  }

  std::shared_ptr<const Compiled> ForRows(int64_t rows) const {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = by_rows.find(rows);
    if (found != by_rows.end()) return found->second;
    if (by_rows.size() >= kMaxCachedRowCounts) by_rows.clear();
    const dnnl::matmul::primitive_desc described = Describe(rows, weights_desc);
    auto compiled = std::make_shared<const Compiled>(
        Compiled{dnnl::matmul(described), described.scratchpad_desc().get_size()});
    by_rows.emplace(rows, compiled);
    return compiled;
  }
};

PackedLinear::PackedLinear(std::unique_ptr<State> state) : state_(std::move(state)) {}
PackedLinear::~PackedLinear() = default;

std::unique_ptr<PackedLinear> PackedLinear::Create(const float* weight, const float* bias,
                                                   int64_t out_features, int64_t in_features,
                                                   LinearElement element) {
  auto state = std::make_unique<State>();
  state->in_features = in_features;
  state->out_features = out_features;
  state->element = element;
  try {
    const dnnl::engine& engine = CpuEngine();
    dnnl::stream stream(engine);
    if (bias != nullptr) {
      // fp32 bias for either element type: the sum is fp32 until the output.
      const memory::desc bias_desc({1, out_features}, memory::data_type::f32,
                                   memory::format_tag::ab);
      state->bias = memory(bias_desc, engine);
      std::copy(bias, bias + out_features, static_cast<float*>(state->bias.get_data_handle()));
    }
    const memory::desc any({in_features, out_features}, DataType(element), memory::format_tag::any);
    const dnnl::matmul::primitive_desc reference = state->Describe(kLayoutRows, any);
    state->implementation = reference.impl_info_str();
    state->weights_desc = reference.weights_desc();
    state->weights = memory(state->weights_desc, engine);
    // W [out, in] row-major is the [in, out] matrix in "ba" order.
    const memory::desc plain({in_features, out_features}, memory::data_type::f32,
                             memory::format_tag::ba);
    memory source(plain, engine, const_cast<float*>(weight));
    dnnl::reorder(source, state->weights).execute(stream, source, state->weights);
    stream.wait();
  } catch (const dnnl::error&) {
    return nullptr;
  }
  return std::unique_ptr<PackedLinear>(new PackedLinear(std::move(state)));
}

void PackedLinear::Run(const void* x, int64_t rows, void* y) const {
  if (rows <= 0) return;
  const State& s = *state_;
  const std::shared_ptr<const State::Compiled> compiled = s.ForRows(rows);
  const memory::data_type type = DataType(s.element);
  const dnnl::engine& engine = CpuEngine();
  thread_local dnnl::stream stream(CpuEngine());
  thread_local std::vector<uint8_t> scratchpad;
  if (scratchpad.size() < compiled->scratchpad_bytes) scratchpad.resize(compiled->scratchpad_bytes);

  memory src({{rows, s.in_features}, type, memory::format_tag::ab}, engine, const_cast<void*>(x));
  memory dst({{rows, s.out_features}, type, memory::format_tag::ab}, engine, y);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, s.weights}, {DNNL_ARG_DST, dst}};
  if (s.bias) args.emplace(DNNL_ARG_BIAS, s.bias);
  if (compiled->scratchpad_bytes > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD, memory({{static_cast<int64_t>(compiled->scratchpad_bytes)},
                                              memory::data_type::u8,
                                              memory::format_tag::a},
                                             engine, scratchpad.data()));
  }
  compiled->primitive.execute(stream, args);
  stream.wait();
}

int64_t PackedLinear::in_features() const { return state_->in_features; }
int64_t PackedLinear::out_features() const { return state_->out_features; }
LinearElement PackedLinear::element() const { return state_->element; }
const std::string& PackedLinear::implementation() const { return state_->implementation; }

}  // namespace docsparse
