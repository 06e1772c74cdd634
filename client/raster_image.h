// RasterImage: an RGB pixel buffer with filled rectangles, a built-in 3x5
// bitmap font, and PNG encoding (zlib), for pictures the CLI writes without
// a graphics library.
#ifndef DOCSPARSE_CLIENT_RASTER_IMAGE_H_
#define DOCSPARSE_CLIENT_RASTER_IMAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace docsparse {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
};

class RasterImage {
 public:
  // width x height pixels of `background`; both clamped to [1, 16384].
  RasterImage(int width, int height, Rgb background);

  int width() const { return width_; }
  int height() const { return height_; }
  Rgb At(int x, int y) const;

  // Parts outside the image are clipped.
  void FillRect(int x, int y, int width, int height, Rgb colour);
  void StrokeRect(int x, int y, int width, int height, Rgb colour);
  // Draws `text` with its top-left corner at (x, y), each font pixel a
  // `scale` x `scale` square. Letters are drawn upper-case; characters the
  // font lacks are drawn as '?'. Returns the width drawn.
  int DrawText(int x, int y, absl::string_view text, int scale, Rgb colour);
  // Width DrawText would use.
  static int TextWidth(absl::string_view text, int scale);
  static constexpr int kGlyphHeight = 5;

  // The image as a PNG file (8-bit RGB, no interlace, zlib level 9).
  std::string EncodePng() const;

 private:
  int width_;
  int height_;
  std::vector<uint8_t> rgb_;  // [height, width, 3]
};

}  // namespace docsparse

#endif  // DOCSPARSE_CLIENT_RASTER_IMAGE_H_
