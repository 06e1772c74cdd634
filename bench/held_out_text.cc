#include "bench/held_out_text.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace docsparse::bench {

std::string HeldOutText(std::vector<std::string> files) {
  if (files.empty()) {
    for (const auto& entry : std::filesystem::directory_iterator("/usr/share/common-licenses")) {
      if (entry.is_regular_file()) files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
  }
  std::string text;
  for (const std::string& file : files) {
    std::ifstream in(file);
    std::stringstream buffer;
    buffer << in.rdbuf();
    text += buffer.str() + "\n\n";
  }
  return text;
}

}  // namespace docsparse::bench
