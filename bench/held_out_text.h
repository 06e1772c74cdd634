// The real text the model benchmarks read: files no calibration saw.
#ifndef DOCSPARSE_BENCH_HELD_OUT_TEXT_H_
#define DOCSPARSE_BENCH_HELD_OUT_TEXT_H_

#include <string>
#include <vector>

namespace docsparse::bench {

// `files` concatenated, each followed by a blank line; empty: every file in
// /usr/share/common-licenses (which every Debian machine has), sorted by
// name. SBM's calibration corpus is /usr/share/doc, so that text is held out.
std::string HeldOutText(std::vector<std::string> files = {});

}  // namespace docsparse::bench

#endif  // DOCSPARSE_BENCH_HELD_OUT_TEXT_H_
