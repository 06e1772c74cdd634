// libFuzzer target for the safetensors header parser: any byte string must
// either be rejected with a status or yield views that lie inside the input.
//
// Not part of the CMake build (it needs clang): `scripts/fuzz [SECONDS]` builds
// and runs every target from its seeds in tests/fuzz/*_seeds/. By hand:
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined \
//     -I. tests/fuzz/safetensors_fuzz.cc model/checkpoint/safetensors.cc \
//     $(pkg-config --libs absl_status absl_statusor absl_str_format) \
//     -o /tmp/safetensors_fuzz
//   mkdir -p /tmp/st_corpus && cp tests/fuzz/safetensors_seeds/* /tmp/st_corpus/
//   /tmp/safetensors_fuzz -max_len=4096 -max_total_time=300 /tmp/st_corpus
// Small seeds (a few tensors, as SafetensorsTest's Serialize() writes) beat
// a real checkpoint: the header is what is parsed, and runs stay fast.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model/checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto file = docsparse::SafetensorsFile::Parse(bytes, "fuzz");
  if (!file.ok()) return 0;
  // Accepted: every view must be consistent and inside the input.
  for (const std::string& name : (*file)->names()) {
    const docsparse::TensorView* view = (*file)->Find(name);
    if (view == nullptr ||
        view->nbytes != static_cast<size_t>(view->numel()) * docsparse::DTypeSize(view->dtype) ||
        view->data < data || view->data + view->nbytes > data + size) {
      std::abort();
    }
    // Touch the bytes so ASan sees any out-of-range view.
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < view->nbytes; ++i) sink ^= view->data[i];
    (void)sink;
  }
  return 0;
}
