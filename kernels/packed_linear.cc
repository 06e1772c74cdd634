#include "kernels/packed_linear.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <dnnl.hpp>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/aligned_vector.h"
#include "kernels/bias_gelu.h"
#include "kernels/cpu_features.h"
#include "kernels/int8_gemm_avx2.h"
#include "kernels/int8_rows.h"

namespace docsparse {

namespace {

using dnnl::memory;

// Caps oneDNN's instruction sets at ours where kMaxCpuIsaVariable caps
// ours (cpu_features.h), before its first primitive: products and
// attention then measure the same kind of machine.
void CapOneDnnIsa() {
  if (HostMaxCpuIsa().empty()) return;
  const CpuFeatures& cpu = HostCpuFeatures();
  const std::string_view isa = IsaName(cpu);
  if (isa == "amx") return;
  // "avx512" keeps VNNI where the CPU has it: the int8 weights' range
  // (WeightLevels) assumes oneDNN uses it then.
  const dnnl::cpu_isa avx512 =
      cpu.int8_dot ? dnnl::cpu_isa::avx512_core_vnni : dnnl::cpu_isa::avx512_core;
  const dnnl::cpu_isa onednn_isa = isa == "avx512_bf16" ? dnnl::cpu_isa::avx512_core_bf16
                                   : isa == "avx512"    ? avx512
                                   : isa == "avx2"      ? dnnl::cpu_isa::avx2
                                                        : dnnl::cpu_isa::sse41;
  try {
    dnnl::set_max_cpu_isa(onednn_isa);
  } catch (const dnnl::error&) {
    // Another library (LibTorch shares this oneDNN) used it first.
    std::fprintf(stderr,
                 "%s=%.*s: oneDNN was already in use and keeps its own instruction sets; set "
                 "ONEDNN_MAX_CPU_ISA as well\n",
                 kMaxCpuIsaVariable, static_cast<int>(HostMaxCpuIsa().size()),
                 HostMaxCpuIsa().data());
  }
}

// Whether the CPU multiplies int8 into int32 sums (VNNI, AMX-INT8).
bool Int32DotProducts(const CpuFeatures& cpu) { return cpu.int8_dot || cpu.amx_int8; }

// The int8 weights' largest magnitude. Without int32 dot products (VNNI,
// AMX) oneDNN multiplies u8 activations (s8 shifted by 128) by s8 weights
// with VPMADDUBSW, which adds each pair of products in int16: 255 · 127 · 2
// saturates, 255 · 63 · 2 = 32,130 does not. Seven-bit weights there, as
// ONNX Runtime's reduce_range and FBGEMM do on such CPUs.
float WeightLevels(const CpuFeatures& cpu) { return Int32DotProducts(cpu) ? 127.0f : 63.0f; }

const dnnl::engine& CpuEngine() {
  static const dnnl::engine* engine = [] {
    CapOneDnnIsa();
    return new dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return *engine;
}

// oneDNN's eltwise algorithm for an activation (kNone has none).
dnnl::algorithm EltwiseAlgorithm(LinearActivation activation) {
  switch (activation) {
    case LinearActivation::kGeluErf:
      return dnnl::algorithm::eltwise_gelu_erf;
    case LinearActivation::kGeluTanh:
      return dnnl::algorithm::eltwise_gelu_tanh;
    case LinearActivation::kRelu:
      return dnnl::algorithm::eltwise_relu;
    case LinearActivation::kNone:
      break;
  }
  return dnnl::algorithm::undef;
}

memory::data_type DataType(LinearElement element) {
  return element == LinearElement::kBf16 ? memory::data_type::bf16 : memory::data_type::f32;
}

// Runs rows [begin, end) of a row kernel on the OpenMP team, in chunks.
template <typename RowKernel>
void ForRows(int64_t rows, RowKernel kernel) {
  constexpr int64_t kChunk = 16;
#pragma omp parallel for schedule(static) if (rows > kChunk)
  for (int64_t begin = 0; begin < rows; begin += kChunk) {
    kernel(begin, std::min(rows, begin + kChunk));
  }
}

// Products with int8 weights and fp32 activations run on Int8GemmAvx2 on
// CPUs with AVX2 but no int32 dot products, however many rows: oneDNN 2.6's
// gemm:jit reorders the weights at every call there and gains nothing over
// fp32, and one kernel for every row count keeps a row's result independent
// of what it is batched with (the few-row fp32-widening kernel this
// replaced gave a text alone, below 17 rows, other values than in a batch).
bool Int8GemmAvx2Serves(const CpuFeatures& cpu, LinearElement element) {
  return !Int32DotProducts(cpu) && cpu.avx2_fma && element == LinearElement::kFp32;
}

// The row count whose primitive chooses the packed layout; every other row
// count then runs on that layout (brgemm's layout depends on the weights'
// shape and type, not on the rows).
constexpr int64_t kLayoutRows = 512;

// A primitive is compiled per row count, and a server sees as many row counts
// as its requests have lengths: one primitive each grew the heap for as long
// as new lengths came (the soak's heap grew 9% in 5 minutes). So a product
// runs as chunks of a few row counts only: kChunkRows rows at a time, then at
// most one chunk of each power of two from kChunkRows / 2 down to kExactRows,
// then an exact remainder below kExactRows. A layer compiles at most
// kExactRows - 1 + log2(kChunkRows / kExactRows) + 1 primitives (69),
// whatever the lengths. Measured against one product of all the rows
// (MiniLM's shapes, 2 threads, bf16 and fp32): equal within the noise (±3%)
// at 512, 4,097 and 16,385 rows, 0-7% slower at 1,000 (five chunks).
constexpr int64_t kChunkRows = 2048;
constexpr int64_t kExactRows = 64;
// int8 products stop at 512-row chunks, each quantized, multiplied and
// scaled back before the next: a whole 4,096-row product's int32 sums (25
// MB at 1,536 outputs) left the cache between the product and the scaling,
// and [4,096 x 384] x [384 x 1,536] ran at ~1,000 GFLOP/s against ~1,470
// in chunks (AVX-512 VNNI, 2 threads).
constexpr int64_t kInt8ChunkRows = 512;

// The next chunk of a product with `remaining` rows left, as above: the
// largest of `largest` (kChunkRows, or kInt8ChunkRows) and its halvings
// down to kExactRows that fits, else all that remains.
int64_t NextChunkRows(int64_t remaining, int64_t largest) {
  for (int64_t size = largest; size >= kExactRows; size /= 2) {
    if (remaining >= size) return size;
  }
  return remaining;
}

}  // namespace

struct PackedLinear::State {
  int64_t in_features = 0;
  int64_t out_features = 0;
  LinearElement element = LinearElement::kFp32;
  LinearWeights weight_type = LinearWeights::kElementType;
  LinearActivation activation = LinearActivation::kNone;
  memory::desc weights_desc;
  memory weights;
  // fp32, empty without a bias. Added by the product (`bias` wraps it), or
  // with int8 weights when the int32 sums are scaled back.
  std::vector<float> bias_values;
  memory bias;  // empty without a bias and with int8 weights
  std::string implementation;
  // int8 weights: per output channel, max |w| / WeightLevels().
  std::vector<float> channel_scales;
  // int8 weights where Int8GemmAvx2Serves: the quantized weights in its
  // panels; the product then never reaches oneDNN (which gets no copy of
  // the weights). Empty elsewhere.
  Int8GemmWeights gemm_weights;

  bool int8_gemm_avx2() const { return !gemm_weights.packed.empty(); }
  bool gelu() const {
    return activation == LinearActivation::kGeluErf || activation == LinearActivation::kGeluTanh;
  }
  void RunInt8GemmAvx2(const void* x, int64_t rows, void* y) const;

  bool int8() const { return weight_type == LinearWeights::kInt8; }

  struct Compiled {
    dnnl::matmul primitive;
    size_t scratchpad_bytes = 0;
  };
  mutable std::mutex mutex;
  mutable std::unordered_map<int64_t, std::shared_ptr<const Compiled>> by_rows;

  dnnl::matmul::primitive_desc Describe(int64_t rows, const memory::desc& weights_layout) const {
    // int8: s8 x s8 -> s32, scaled back by DequantizeRowsInt8.
    const memory::data_type in_type = int8() ? memory::data_type::s8 : DataType(element);
    const memory::data_type out_type = int8() ? memory::data_type::s32 : DataType(element);
    const memory::desc src({rows, in_features}, in_type, memory::format_tag::ab);
    const memory::desc dst({rows, out_features}, out_type, memory::format_tag::ab);
    // The user provides the scratchpad, so one primitive can run on several
    // threads at once (a library-owned scratchpad would be shared).
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (activation != LinearActivation::kNone) {
      dnnl::post_ops post_ops;
      post_ops.append_eltwise(1.0f, EltwiseAlgorithm(activation), 0.0f, 0.0f);
      attr.set_post_ops(post_ops);
    }
    if (bias) {
      return dnnl::matmul::primitive_desc(
          dnnl::matmul::desc(src, weights_layout, bias.get_desc(), dst), attr, CpuEngine());
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights_layout, dst), attr,
                                        CpuEngine());
  }

  // `rows` is one of NextChunkRows' sizes, so the map stays small.
  std::shared_ptr<const Compiled> CompiledFor(int64_t rows) const {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = by_rows.find(rows);
    if (found != by_rows.end()) return found->second;
    const dnnl::matmul::primitive_desc described = Describe(rows, weights_desc);
    auto compiled = std::make_shared<const Compiled>(
        Compiled{dnnl::matmul(described), described.scratchpad_desc().get_size()});
    by_rows.emplace(rows, compiled);
    return compiled;
  }
};

bool PackedLinear::TakesActivation(LinearElement element, LinearWeights weights) {
  return weights == LinearWeights::kElementType || Int8GemmAvx2Serves(HostCpuFeatures(), element);
}

PackedLinear::PackedLinear(std::unique_ptr<State> state) : state_(std::move(state)) {}
PackedLinear::~PackedLinear() = default;

std::unique_ptr<PackedLinear> PackedLinear::Create(const float* weight, const float* bias,
                                                   int64_t out_features, int64_t in_features,
                                                   LinearElement element, LinearWeights weights,
                                                   LinearActivation activation) {
  if (activation != LinearActivation::kNone && !TakesActivation(element, weights)) return nullptr;
  auto state = std::make_unique<State>();
  state->in_features = in_features;
  state->out_features = out_features;
  state->element = element;
  state->weight_type = weights;
  state->activation = activation;
  // int8: each output channel (a row of W) quantized symmetrically.
  std::vector<int8_t> quantized;
  if (state->int8()) {
    const float levels = WeightLevels(HostCpuFeatures());
    quantized.resize(static_cast<size_t>(out_features * in_features));
    state->channel_scales.resize(out_features);
    for (int64_t n = 0; n < out_features; ++n) {
      const float* row = weight + n * in_features;
      float max_abs = 0;
      for (int64_t k = 0; k < in_features; ++k) max_abs = std::max(max_abs, std::fabs(row[k]));
      state->channel_scales[n] = max_abs / levels;
      const float inverse = max_abs > 0 ? levels / max_abs : 0.0f;
      for (int64_t k = 0; k < in_features; ++k) {
        quantized[n * in_features + k] = static_cast<int8_t>(std::nearbyint(row[k] * inverse));
      }
    }
  }
  if (bias != nullptr) state->bias_values.assign(bias, bias + out_features);
  if (state->int8() && Int8GemmAvx2Serves(HostCpuFeatures(), element)) {
    state->gemm_weights = PackInt8GemmWeights(quantized.data(), out_features, in_features);
    if (state->gelu() && state->bias_values.empty()) state->bias_values.assign(out_features, 0.0f);
    state->implementation = "docsparse:int8_gemm_avx2";
    return std::unique_ptr<PackedLinear>(new PackedLinear(std::move(state)));
  }
  try {
    const dnnl::engine& engine = CpuEngine();
    dnnl::stream stream(engine);
    if (!state->bias_values.empty() && !state->int8()) {
      // fp32 bias for either element type: the sum is fp32 until the output.
      state->bias = memory({{1, out_features}, memory::data_type::f32, memory::format_tag::ab},
                           engine, state->bias_values.data());
    }
    const memory::data_type weight_type = state->int8() ? memory::data_type::s8 : DataType(element);
    const memory::desc any({in_features, out_features}, weight_type, memory::format_tag::any);
    const dnnl::matmul::primitive_desc reference = state->Describe(kLayoutRows, any);
    state->implementation = "onednn:" + std::string(reference.impl_info_str());
    state->weights_desc = reference.weights_desc();
    state->weights = memory(state->weights_desc, engine);
    // W [out, in] row-major is the [in, out] matrix in "ba" order.
    const memory::desc plain({in_features, out_features},
                             state->int8() ? memory::data_type::s8 : memory::data_type::f32,
                             memory::format_tag::ba);
    memory source(
        plain, engine,
        state->int8() ? static_cast<void*>(quantized.data()) : const_cast<float*>(weight));
    dnnl::reorder(source, state->weights).execute(stream, source, state->weights);
    stream.wait();
  } catch (const dnnl::error&) {
    return nullptr;
  }
  return std::unique_ptr<PackedLinear>(new PackedLinear(std::move(state)));
}

void PackedLinear::State::RunInt8GemmAvx2(const void* x, int64_t rows, void* y) const {
  thread_local std::vector<uint8_t> quantized;
  thread_local std::vector<float> row_scales;
  // The kernel reads the last row's final group of four inputs whole.
  quantized.resize(static_cast<size_t>(rows * in_features + 3));
  row_scales.resize(rows);
  QuantizeRowsParams quantize{x, false, reinterpret_cast<int8_t*>(quantized.data()),
                              row_scales.data(), in_features};
  quantize.plus_128 = true;
  ForRows(rows, [&](int64_t begin, int64_t end) { QuantizeRowsInt8(quantize, begin, end); });
  // With GELU the bias is added by the activation's pass (bias_gelu.h).
  const float* bias = bias_values.empty() || gelu() ? nullptr : bias_values.data();
  const Int8GemmParams params{&gemm_weights,
                              quantized.data(),
                              row_scales.data(),
                              channel_scales.data(),
                              bias,
                              static_cast<float*>(y),
                              rows};
  // Each thread takes a contiguous range of panels and every row: the rows
  // are read by all, each panel's weights by one.
  const int64_t panels = gemm_weights.panels();
  // One thread for a small product (fork and join cost more than it).
  const bool parallel = rows * in_features * out_features >= (int64_t{1} << 18);
  const int slices =
      parallel ? static_cast<int>(std::min<int64_t>(omp_get_max_threads(), panels)) : 1;
#pragma omp parallel for schedule(static) num_threads(slices) if (slices > 1)
  for (int slice = 0; slice < slices; ++slice) {
    Int8GemmAvx2(params, panels * slice / slices, panels * (slice + 1) / slices);
  }
  if (gelu()) {
    const BiasGeluFp32Params activate{static_cast<float*>(y), bias_values.data(), out_features,
                                      activation == LinearActivation::kGeluTanh};
    ForRows(rows, [&](int64_t begin, int64_t end) { BiasGeluFp32Rows(activate, begin, end); });
  } else if (activation == LinearActivation::kRelu) {
    float* out = static_cast<float*>(y);
    ForRows(rows, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin * out_features; i < end * out_features; ++i) {
        out[i] = std::max(out[i], 0.0f);
      }
    });
  }
}

void PackedLinear::Run(const void* x, int64_t rows, void* y) const {
  if (rows <= 0) return;
  const State& s = *state_;
  if (s.int8_gemm_avx2()) {
    s.RunInt8GemmAvx2(x, rows, y);
    return;
  }
  const dnnl::engine& engine = CpuEngine();
  thread_local dnnl::stream stream(CpuEngine());
  thread_local std::vector<uint8_t> scratchpad;
  const bool bf16 = s.element == LinearElement::kBf16;

  // int8: each chunk's rows quantized into `quantized`, multiplied into
  // `sums` and scaled back into y before the next chunk (kInt8ChunkRows).
  thread_local std::vector<int8_t> quantized;
  thread_local std::vector<float> row_scales;
  thread_local std::vector<int32_t> sums;
  const memory::data_type in_type = s.int8() ? memory::data_type::s8 : DataType(s.element);
  const memory::data_type out_type = s.int8() ? memory::data_type::s32 : DataType(s.element);
  const auto* x_bytes = static_cast<const uint8_t*>(x);
  auto* y_bytes = static_cast<uint8_t*>(y);
  for (int64_t first = 0; first < rows;) {
    const int64_t chunk = NextChunkRows(rows - first, s.int8() ? kInt8ChunkRows : kChunkRows);
    const std::shared_ptr<const State::Compiled> compiled = s.CompiledFor(chunk);
    if (scratchpad.size() < compiled->scratchpad_bytes) {
      stream.wait();  // the chunks before may still read the old scratchpad
      scratchpad.resize(compiled->scratchpad_bytes);
    }
    void* src_data = const_cast<uint8_t*>(x_bytes) + first * in_row_bytes();
    void* dst_data = y_bytes + first * out_row_bytes();
    if (s.int8()) {
      quantized.resize(static_cast<size_t>(chunk * s.in_features));
      row_scales.resize(chunk);
      sums.resize(static_cast<size_t>(chunk * s.out_features));
      const QuantizeRowsParams quantize{src_data, bf16, quantized.data(), row_scales.data(),
                                        s.in_features};
      ForRows(chunk, [&](int64_t begin, int64_t end) { QuantizeRowsInt8(quantize, begin, end); });
      src_data = quantized.data();
      dst_data = sums.data();
    }
    memory src({{chunk, s.in_features}, in_type, memory::format_tag::ab}, engine, src_data);
    memory dst({{chunk, s.out_features}, out_type, memory::format_tag::ab}, engine, dst_data);
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
    if (s.int8()) {
      stream.wait();  // the sums are read next, and reused by the next chunk
      const DequantizeRowsParams dequantize{sums.data(),
                                            row_scales.data(),
                                            s.channel_scales.data(),
                                            s.bias_values.empty() ? nullptr : s.bias_values.data(),
                                            y_bytes + first * out_row_bytes(),
                                            bf16,
                                            s.out_features};
      ForRows(chunk,
              [&](int64_t begin, int64_t end) { DequantizeRowsInt8(dequantize, begin, end); });
    }
    first += chunk;
  }
  stream.wait();
}

const std::string& PackedLinear::implementation() const { return state_->implementation; }

int64_t PackedLinear::in_row_bytes() const {
  return state_->in_features * (state_->element == LinearElement::kBf16 ? 2 : 4);
}

int64_t PackedLinear::out_row_bytes() const {
  return state_->out_features * (state_->element == LinearElement::kBf16 ? 2 : 4);
}

void* PackedLinear::StagingBuffer() const {
  thread_local CacheLineVector<uint8_t> staging;
  staging.resize(static_cast<size_t>(kStagingRows * out_row_bytes()));
  return staging.data();
}

size_t PackedLinear::compiled_row_counts() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->by_rows.size();
}

}  // namespace docsparse
