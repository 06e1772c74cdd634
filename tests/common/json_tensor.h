// Nested JSON arrays of numbers (as the HF fixture scripts write them) to a
// float32 tensor of the same shape.
#ifndef DOCSPARSE_TESTS_COMMON_JSON_TENSOR_H_
#define DOCSPARSE_TESTS_COMMON_JSON_TENSOR_H_

#include <ATen/ATen.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

namespace docsparse::testing {

inline at::Tensor JsonToTensor(const nlohmann::json& nested) {
  std::vector<float> flat;
  std::vector<int64_t> shape;
  for (const nlohmann::json* level = &nested; level->is_array() && !level->empty();
       level = &(*level)[0]) {
    shape.push_back(static_cast<int64_t>(level->size()));
  }
  std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& node) {
    if (node.is_array()) {
      for (const auto& child : node) walk(child);
    } else {
      flat.push_back(node.get<float>());
    }
  };
  walk(nested);
  return at::tensor(flat).view(shape);
}

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_COMMON_JSON_TENSOR_H_
