#include "client/raster_image.h"

#include <gtest/gtest.h>

#include "tests/client/png_reader.h"

namespace docsparse {
namespace {

const Rgb kWhite{255, 255, 255};
const Rgb kRed{200, 10, 20};

TEST(RasterImageTest, FillRectClipsToTheImage) {
  RasterImage image(4, 3, kWhite);
  image.FillRect(2, 1, 10, 10, kRed);
  EXPECT_EQ(image.At(1, 1), kWhite);
  EXPECT_EQ(image.At(2, 1), kRed);
  EXPECT_EQ(image.At(3, 2), kRed);
  EXPECT_EQ(image.At(2, 0), kWhite);
  image.FillRect(-5, -5, 6, 6, kRed);
  EXPECT_EQ(image.At(0, 0), kRed);
}

TEST(RasterImageTest, TextUsesGlyphCellsAndScale) {
  EXPECT_EQ(RasterImage::TextWidth("", 2), 0);
  EXPECT_EQ(RasterImage::TextWidth("ab", 1), 7);
  EXPECT_EQ(RasterImage::TextWidth("ab", 2), 14);
  RasterImage image(20, 10, kWhite);
  // '1' is .#. / ##. / .#. / .#. / ###.
  EXPECT_EQ(image.DrawText(0, 0, "1", 1, kRed), 3);
  EXPECT_EQ(image.At(0, 0), kWhite);
  EXPECT_EQ(image.At(1, 0), kRed);
  EXPECT_EQ(image.At(0, 1), kRed);
  EXPECT_EQ(image.At(2, 4), kRed);
  // Lower case draws as upper case; unknown characters as '?'.
  RasterImage lower(20, 10, kWhite), upper(20, 10, kWhite);
  lower.DrawText(0, 0, "ab", 2, kRed);
  upper.DrawText(0, 0, "AB", 2, kRed);
  EXPECT_EQ(lower.EncodePng(), upper.EncodePng());
  RasterImage unknown(20, 10, kWhite), question(20, 10, kWhite);
  unknown.DrawText(0, 0, "\x01", 1, kRed);
  question.DrawText(0, 0, "?", 1, kRed);
  EXPECT_EQ(unknown.EncodePng(), question.EncodePng());
}

TEST(RasterImageTest, PngRoundTrips) {
  RasterImage image(37, 11, kWhite);
  image.FillRect(3, 2, 5, 4, kRed);
  image.DrawText(10, 3, "0.25", 1, Rgb{0, 0, 0});
  const testing::DecodedPng png = testing::DecodeRgbPng(image.EncodePng());
  ASSERT_TRUE(png.ok) << png.error;
  EXPECT_EQ(png.width, 37);
  EXPECT_EQ(png.height, 11);
  for (int y = 0; y < 11; ++y) {
    for (int x = 0; x < 37; ++x) {
      const size_t i = (static_cast<size_t>(y) * 37 + x) * 3;
      const Rgb pixel{png.rgb[i], png.rgb[i + 1], png.rgb[i + 2]};
      ASSERT_EQ(pixel, image.At(x, y)) << x << "," << y;
    }
  }
}

}  // namespace
}  // namespace docsparse
