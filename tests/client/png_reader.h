// Test helper: reads back the 8-bit RGB PNG files RasterImage writes,
// checking the signature, every chunk's CRC and the scanline filters.
#ifndef DOCSPARSE_TESTS_CLIENT_PNG_READER_H_
#define DOCSPARSE_TESTS_CLIENT_PNG_READER_H_

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

namespace docsparse::testing {

struct DecodedPng {
  bool ok = false;
  std::string error;
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3]
};

inline uint32_t ReadBigEndian(const std::string& data, size_t at) {
  return (uint32_t{static_cast<uint8_t>(data[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(data[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(data[at + 2])} << 8) |
         uint32_t{static_cast<uint8_t>(data[at + 3])};
}

inline DecodedPng DecodeRgbPng(const std::string& png) {
  DecodedPng out;
  if (png.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) != 0) {
    out.error = "bad signature";
    return out;
  }
  std::string idat;
  bool ended = false;
  for (size_t at = 8; at + 12 <= png.size() && !ended;) {
    const uint32_t length = ReadBigEndian(png, at);
    if (at + 12 + length > png.size()) {
      out.error = "chunk past the end";
      return out;
    }
    const std::string type = png.substr(at + 4, 4);
    const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(png.data() + at + 4), length + 4);
    if (crc != ReadBigEndian(png, at + 8 + length)) {
      out.error = "bad CRC in " + type;
      return out;
    }
    const std::string data = png.substr(at + 8, length);
    if (type == "IHDR") {
      out.width = static_cast<int>(ReadBigEndian(data, 0));
      out.height = static_cast<int>(ReadBigEndian(data, 4));
      if (data.substr(8, 5) != std::string("\x08\x02\x00\x00\x00", 5)) {
        out.error = "not 8-bit RGB";
        return out;
      }
    } else if (type == "IDAT") {
      idat += data;
    } else if (type == "IEND") {
      ended = true;
    }
    at += 12 + length;
  }
  if (!ended) {
    out.error = "no IEND";
    return out;
  }
  const size_t stride = static_cast<size_t>(out.width) * 3 + 1;
  std::vector<uint8_t> raw(stride * out.height);
  uLongf raw_size = raw.size();
  if (uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      raw_size != raw.size()) {
    out.error = "IDAT does not inflate to height x (1 + 3 width) bytes";
    return out;
  }
  for (int row = 0; row < out.height; ++row) {
    if (raw[row * stride] != 0) {
      out.error = "unexpected filter";
      return out;
    }
    out.rgb.insert(out.rgb.end(), raw.begin() + row * stride + 1, raw.begin() + (row + 1) * stride);
  }
  out.ok = true;
  return out;
}

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_CLIENT_PNG_READER_H_
