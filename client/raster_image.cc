#include "client/raster_image.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>

namespace docsparse {
namespace {

constexpr int kMaxSide = 16384;

// 3x5 glyphs: five rows of three pixels, '#' set.
struct Glyph {
  char c;
  const char* rows;  // 15 characters, row-major
};

constexpr Glyph kFont[] = {
    {'0', "####.##.##.####"}, {'1', ".#.##..#..#.###"}, {'2', "###..#####..###"},
    {'3', "###..####..####"}, {'4', "#.##.####..#..#"}, {'5', "####..###..####"},
    {'6', "####..####.####"}, {'7', "###..#..#.#..#."}, {'8', "####.#####.####"},
    {'9', "####.####..####"}, {'A', ".#.#.#####.##.#"}, {'B', "##.#.###.#.###."},
    {'C', ".###..#..#...##"}, {'D', "##.#.##.##.###."}, {'E', "####..##.#..###"},
    {'F', "####..##.#..#.."}, {'G', ".###..#.##.#.##"}, {'H', "#.##.#####.##.#"},
    {'I', "###.#..#..#.###"}, {'J', "..#..#..##.#.#."}, {'K', "#.##.###.#.##.#"},
    {'L', "#..#..#..#..###"}, {'M', "#.########.##.#"}, {'N', "##.#.##.##.##.#"},
    {'O', ".#.#.##.##.#.#."}, {'P', "##.#.###.#..#.."}, {'Q', ".#.#.##.###..##"},
    {'R', "##.#.###.#.##.#"}, {'S', ".###...#...###."}, {'T', "###.#..#..#..#."},
    {'U', "#.##.##.##.####"}, {'V', "#.##.##.##.#.#."}, {'W', "#.##.########.#"},
    {'X', "#.##.#.#.#.##.#"}, {'Y', "#.##.#.#..#..#."}, {'Z', "###..#.#.#..###"},
    {'.', ".............#."}, {',', "..........#.#.."}, {':', "....#.....#...."},
    {'-', "......###......"}, {'(', "..#.#..#..#...#"}, {')', "#...#..#..#.#.."},
    {'/', "..#..#.#.#..#.."}, {'_', "............###"}, {'=', "...###...###..."},
    {'+', "....#.###.#...."}, {'%', "#.#..#.#.#..#.#"}, {'?', "###..#.#.....#."},
    {' ', "..............."},
};

const char* GlyphRows(char c) {
  const char upper = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const Glyph& glyph : kFont) {
    if (glyph.c == upper) return glyph.rows;
  }
  return GlyphRows('?');
}

void AppendBigEndian(uint32_t value, std::string* out) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(value >> shift));
}

void AppendChunk(const char* type, const std::string& data, std::string* out) {
  AppendBigEndian(static_cast<uint32_t>(data.size()), out);
  const size_t start = out->size();
  out->append(type, 4);
  out->append(data);
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(out->data() + start),
                          static_cast<uInt>(out->size() - start));
  AppendBigEndian(static_cast<uint32_t>(crc), out);
}

}  // namespace

RasterImage::RasterImage(int width, int height, Rgb background)
    : width_(std::clamp(width, 1, kMaxSide)), height_(std::clamp(height, 1, kMaxSide)) {
  rgb_.resize(static_cast<size_t>(width_) * height_ * 3);
  for (size_t i = 0; i < rgb_.size(); i += 3) {
    rgb_[i] = background.r;
    rgb_[i + 1] = background.g;
    rgb_[i + 2] = background.b;
  }
}

Rgb RasterImage::At(int x, int y) const {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return Rgb{};
  const size_t i = (static_cast<size_t>(y) * width_ + x) * 3;
  return Rgb{rgb_[i], rgb_[i + 1], rgb_[i + 2]};
}

void RasterImage::FillRect(int x, int y, int width, int height, Rgb colour) {
  const int x0 = std::max(0, x), y0 = std::max(0, y);
  const int x1 = std::min(width_, x + width), y1 = std::min(height_, y + height);
  for (int row = y0; row < y1; ++row) {
    for (int col = x0; col < x1; ++col) {
      const size_t i = (static_cast<size_t>(row) * width_ + col) * 3;
      rgb_[i] = colour.r;
      rgb_[i + 1] = colour.g;
      rgb_[i + 2] = colour.b;
    }
  }
}

void RasterImage::StrokeRect(int x, int y, int width, int height, Rgb colour) {
  FillRect(x, y, width, 1, colour);
  FillRect(x, y + height - 1, width, 1, colour);
  FillRect(x, y, 1, height, colour);
  FillRect(x + width - 1, y, 1, height, colour);
}

int RasterImage::TextWidth(absl::string_view text, int scale) {
  // 3 pixels a glyph and 1 between glyphs.
  return text.empty() ? 0 : static_cast<int>(text.size() * 4 - 1) * scale;
}

int RasterImage::DrawText(int x, int y, absl::string_view text, int scale, Rgb colour) {
  int pen = x;
  for (char c : text) {
    const char* rows = GlyphRows(c);
    for (int row = 0; row < kGlyphHeight; ++row) {
      for (int col = 0; col < 3; ++col) {
        if (rows[row * 3 + col] == '#') {
          FillRect(pen + col * scale, y + row * scale, scale, scale, colour);
        }
      }
    }
    pen += 4 * scale;
  }
  return TextWidth(text, scale);
}

std::string RasterImage::EncodePng() const {
  // Each scanline starts with filter type 0 (none).
  std::string raw;
  raw.reserve(static_cast<size_t>(height_) * (1 + width_ * 3));
  for (int row = 0; row < height_; ++row) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(rgb_.data()) + static_cast<size_t>(row) * width_ * 3,
               static_cast<size_t>(width_) * 3);
  }
  uLongf compressed_size = compressBound(static_cast<uLong>(raw.size()));
  std::string compressed(compressed_size, '\0');
  compress2(reinterpret_cast<Bytef*>(compressed.data()), &compressed_size,
            reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()), 9);
  compressed.resize(compressed_size);

  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string header;
  AppendBigEndian(static_cast<uint32_t>(width_), &header);
  AppendBigEndian(static_cast<uint32_t>(height_), &header);
  header += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit, RGB, deflate, filter 0, no interlace
  AppendChunk("IHDR", header, &png);
  AppendChunk("IDAT", compressed, &png);
  AppendChunk("IEND", "", &png);
  return png;
}

}  // namespace docsparse
