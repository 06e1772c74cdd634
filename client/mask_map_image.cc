#include "client/mask_map_image.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace docsparse {
namespace {

constexpr int kMaxSide = 1024;     // cells per map side
constexpr int kPanelTarget = 256;  // pixels per panel side, about
constexpr int kMargin = 16;
constexpr int kTitleHeight = 48;  // two lines
constexpr int kLabelHeight = 18;  // above each panel
constexpr int kGap = 18;
constexpr int kLegendWidth = 80;
constexpr int kPngTextScale = 2;

const Rgb kWhite{255, 255, 255};
const Rgb kInk{34, 34, 34};
const Rgb kFrame{136, 136, 136};

// ColorBrewer YlOrRd for densities above 0 (the last stop's blue lowered
// from 38 to 28 so that no channel rises: then the 8-bit colours are
// monotone too); exactly 0 is white, so "not computed" stands apart from
// "barely computed".
struct Stop {
  double at;
  Rgb colour;
};
constexpr Stop kStops[] = {{0.00, {255, 255, 204}},
                           {0.25, {254, 217, 118}},
                           {0.50, {253, 141, 60}},
                           {0.75, {227, 26, 28}},
                           {1.00, {128, 0, 28}}};

std::string Hex(Rgb c) { return absl::StrFormat("#%02x%02x%02x", c.r, c.g, c.b); }

std::string EscapeXml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

double Clamp01(double density) { return std::isnan(density) ? 0 : std::clamp(density, 0.0, 1.0); }

// Mean realised density of `layer` from the cost report, else of its map.
double LayerDensity(const v1::CostReport& cost, const v1::MaskMap& map) {
  for (const v1::LayerCost& layer : cost.layers()) {
    if (layer.layer() != map.layer() || layer.head_density_size() == 0) continue;
    double sum = 0;
    for (double d : layer.head_density()) sum += d;
    return sum / layer.head_density_size();
  }
  double sum = 0;
  for (float d : map.density()) sum += Clamp01(d);
  return map.density_size() ? sum / map.density_size() : 0;
}

// Geometry shared by the SVG and the PNG, in pixels.
struct Layout {
  int cell = 1;  // side of one map cell
  int side = 1;  // side of a panel's box
  int columns = 1;
  int width = 0;
  int height = 0;
  int legend_x = 0;
  int legend_y = 0;
  int legend_height = 0;
  std::string title;
  std::string subtitle;

  int PanelX(int i) const { return kMargin + (i % columns) * (side + kGap); }
  int PanelY(int i) const {
    return kMargin + kTitleHeight + kLabelHeight + (i / columns) * (side + kLabelHeight + kGap);
  }
};

absl::StatusOr<Layout> MakeLayout(const std::string& model, const v1::CostReport& cost) {
  if (cost.mask_maps_size() == 0) {
    return absl::FailedPreconditionError(
        "the response carries no mask maps (cost.mask_maps is empty): the server does not "
        "support return_mask_map for this model or attention");
  }
  int largest = 1, rows = 0, cols = 0;
  for (int i = 0; i < cost.mask_maps_size(); ++i) {
    const v1::MaskMap& map = cost.mask_maps(i);
    if (map.rows() < 1 || map.cols() < 1 || map.rows() > kMaxSide || map.cols() > kMaxSide ||
        map.density_size() != map.rows() * map.cols()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("mask_maps[%d]: %d x %d cells with %d densities (sides 1..%d)", i,
                          map.rows(), map.cols(), map.density_size(), kMaxSide));
    }
    largest = std::max({largest, map.rows(), map.cols()});
    rows = map.rows();
    cols = map.cols();
  }
  Layout layout;
  layout.cell = std::max(1, kPanelTarget / largest);
  layout.side = layout.cell * largest;
  const int panels = cost.mask_maps_size();
  layout.columns = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(panels))));
  const std::string attention = v1::AttentionKind_Name(cost.attention());
  layout.title =
      absl::StrFormat("%s: %s attention, mean density %.4f", model.empty() ? "docsparse" : model,
                      attention.substr(attention.rfind('_') + 1), cost.mean_density());
  layout.subtitle = absl::StrFormat(
      "%d layer(s), %d x %d cells (rows: query blocks, columns: key blocks), %d tokens", panels,
      rows, cols, cost.input_tokens());
  layout.legend_x = kMargin + layout.columns * (layout.side + kGap);
  layout.legend_y = kMargin + kTitleHeight + kLabelHeight;
  layout.legend_height = std::max(layout.side, 128);
  const int text_width = RasterImage::TextWidth(
      layout.subtitle.size() > layout.title.size() ? layout.subtitle : layout.title, kPngTextScale);
  layout.width = std::max(layout.legend_x + kLegendWidth, text_width + kMargin) + kMargin;
  layout.height =
      std::max(layout.PanelY(panels - 1) + layout.side, layout.legend_y + layout.legend_height) +
      kMargin;
  return layout;
}

std::string Tick(double value) { return absl::StrFormat("%g", value); }

}  // namespace

Rgb DensityColour(double density) {
  const double d = Clamp01(density);
  if (d <= 0) return kWhite;
  for (size_t i = 1; i < std::size(kStops); ++i) {
    if (d > kStops[i].at) continue;
    const Stop& lo = kStops[i - 1];
    const Stop& hi = kStops[i];
    const double t = (d - lo.at) / (hi.at - lo.at);
    auto mix = [t](uint8_t a, uint8_t b) {
      return static_cast<uint8_t>(std::lround(a + t * (static_cast<double>(b) - a)));
    };
    return Rgb{mix(lo.colour.r, hi.colour.r), mix(lo.colour.g, hi.colour.g),
               mix(lo.colour.b, hi.colour.b)};
  }
  return kStops[std::size(kStops) - 1].colour;
}

absl::StatusOr<std::string> RenderMaskMapSvg(const std::string& model, const v1::CostReport& cost) {
  absl::StatusOr<Layout> made = MakeLayout(model, cost);
  if (!made.ok()) return made.status();
  const Layout& l = *made;
  std::string svg = absl::StrFormat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" fill=\"%s\">\n"
      "<title>%s</title>\n"
      "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n"
      "<text x=\"%d\" y=\"%d\" font-size=\"16\" font-weight=\"bold\">%s</text>\n"
      "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s</text>\n",
      l.width, l.height, l.width, l.height, Hex(kInk), EscapeXml(l.title), l.width, l.height,
      kMargin, kMargin + 14, EscapeXml(l.title), kMargin, kMargin + 34, EscapeXml(l.subtitle));
  for (int i = 0; i < cost.mask_maps_size(); ++i) {
    const v1::MaskMap& map = cost.mask_maps(i);
    absl::StrAppendFormat(&svg,
                          "<g class=\"layer\" data-layer=\"%d\" data-rows=\"%d\" data-cols=\"%d\" "
                          "data-cell=\"%d\" transform=\"translate(%d,%d)\">\n"
                          "<text x=\"0\" y=\"-5\" font-size=\"12\">layer %d: density %.4f</text>\n"
                          "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n"
                          "<g shape-rendering=\"crispEdges\">\n",
                          map.layer(), map.rows(), map.cols(), l.cell, l.PanelX(i), l.PanelY(i),
                          map.layer(), LayerDensity(cost, map), map.cols() * l.cell,
                          map.rows() * l.cell);
    for (int row = 0; row < map.rows(); ++row) {
      for (int col = 0; col < map.cols();) {
        const double density = Clamp01(map.density(row * map.cols() + col));
        const Rgb colour = DensityColour(density);
        int run = 1;
        while (col + run < map.cols() &&
               DensityColour(map.density(row * map.cols() + col + run)) == colour) {
          ++run;
        }
        if (density > 0) {
          absl::StrAppendFormat(&svg,
                                "<rect class=\"cell\" x=\"%d\" y=\"%d\" width=\"%d\" "
                                "height=\"%d\" fill=\"%s\"/>\n",
                                col * l.cell, row * l.cell, run * l.cell, l.cell, Hex(colour));
        }
        col += run;
      }
    }
    absl::StrAppendFormat(&svg,
                          "</g>\n<rect width=\"%d\" height=\"%d\" fill=\"none\" "
                          "stroke=\"%s\"/>\n</g>\n",
                          map.cols() * l.cell, map.rows() * l.cell, Hex(kFrame));
  }
  // Colour scale: the gradient interpolates in sRGB between the same stops as
  // DensityColour, bottom (0) to top (1).
  absl::StrAppend(&svg,
                  "<defs><linearGradient id=\"density-scale\" x1=\"0\" y1=\"1\" x2=\"0\" "
                  "y2=\"0\">\n");
  for (const Stop& stop : kStops) {
    absl::StrAppendFormat(&svg, "<stop offset=\"%g\" stop-color=\"%s\"/>\n", stop.at,
                          Hex(stop.colour));
  }
  absl::StrAppendFormat(&svg,
                        "</linearGradient></defs>\n<g class=\"legend\" "
                        "transform=\"translate(%d,%d)\">\n"
                        "<text x=\"0\" y=\"-5\" font-size=\"12\">density</text>\n"
                        "<rect width=\"16\" height=\"%d\" fill=\"url(#density-scale)\" "
                        "stroke=\"%s\"/>\n",
                        l.legend_x, l.legend_y, l.legend_height, Hex(kFrame));
  for (double tick : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    const int y = static_cast<int>(std::lround(l.legend_height * (1 - tick)));
    absl::StrAppendFormat(&svg,
                          "<line x1=\"16\" y1=\"%d\" x2=\"21\" y2=\"%d\" stroke=\"%s\"/>"
                          "<text x=\"24\" y=\"%d\" font-size=\"11\">%s</text>\n",
                          y, y, Hex(kFrame), y + 4, Tick(tick));
  }
  absl::StrAppendFormat(&svg,
                        "<text x=\"0\" y=\"%d\" font-size=\"11\">white: 0</text>\n</g>\n</svg>\n",
                        l.legend_height + 16);
  return svg;
}

absl::StatusOr<std::string> RenderMaskMapPng(const std::string& model, const v1::CostReport& cost) {
  absl::StatusOr<Layout> made = MakeLayout(model, cost);
  if (!made.ok()) return made.status();
  const Layout& l = *made;
  RasterImage image(l.width, l.height, kWhite);
  image.DrawText(kMargin, kMargin, l.title, kPngTextScale, kInk);
  image.DrawText(kMargin, kMargin + 22, l.subtitle, kPngTextScale, kInk);
  const int label_offset = RasterImage::kGlyphHeight * kPngTextScale + 4;
  for (int i = 0; i < cost.mask_maps_size(); ++i) {
    const v1::MaskMap& map = cost.mask_maps(i);
    const int x = l.PanelX(i), y = l.PanelY(i);
    image.DrawText(x, y - label_offset,
                   absl::StrFormat("layer %d: %.4f", map.layer(), LayerDensity(cost, map)),
                   kPngTextScale, kInk);
    for (int row = 0; row < map.rows(); ++row) {
      for (int col = 0; col < map.cols(); ++col) {
        image.FillRect(x + col * l.cell, y + row * l.cell, l.cell, l.cell,
                       DensityColour(map.density(row * map.cols() + col)));
      }
    }
    image.StrokeRect(x - 1, y - 1, map.cols() * l.cell + 2, map.rows() * l.cell + 2, kFrame);
  }
  // Colour scale, one pixel row per step from 1 (top) to 0 (bottom).
  image.DrawText(l.legend_x, l.legend_y - label_offset, "density", kPngTextScale, kInk);
  for (int y = 0; y < l.legend_height; ++y) {
    const double density = 1.0 - static_cast<double>(y) / (l.legend_height - 1);
    image.FillRect(l.legend_x, l.legend_y + y, 16, 1,
                   density > 0 ? DensityColour(density) : kStops[0].colour);
  }
  image.StrokeRect(l.legend_x - 1, l.legend_y - 1, 18, l.legend_height + 2, kFrame);
  for (double tick : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    const int y = l.legend_y + static_cast<int>(std::lround((l.legend_height - 1) * (1 - tick)));
    image.FillRect(l.legend_x + 16, y, 5, 1, kFrame);
    image.DrawText(l.legend_x + 24, y - RasterImage::kGlyphHeight * kPngTextScale / 2, Tick(tick),
                   kPngTextScale, kInk);
  }
  image.DrawText(l.legend_x, l.legend_y + l.legend_height + 8, "white: 0", kPngTextScale, kInk);
  return image.EncodePng();
}

absl::Status CheckMaskMapPath(const std::string& path) {
  const std::string lower = absl::AsciiStrToLower(path);
  if (absl::EndsWith(lower, ".svg") || absl::EndsWith(lower, ".png")) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("mask map: '", path, "' must end in .svg or .png"));
}

absl::Status WriteMaskMapPicture(const std::string& path, const std::string& model,
                                 const v1::CostReport& cost) {
  if (absl::Status status = CheckMaskMapPath(path); !status.ok()) return status;
  const bool png = absl::EndsWith(absl::AsciiStrToLower(path), ".png");
  absl::StatusOr<std::string> picture =
      png ? RenderMaskMapPng(model, cost) : RenderMaskMapSvg(model, cost);
  if (!picture.ok()) return picture.status();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(picture->data(), static_cast<std::streamsize>(picture->size()));
  out.close();
  if (!out) return absl::InvalidArgumentError(absl::StrCat("mask map: cannot write ", path));
  return absl::OkStatus();
}

}  // namespace docsparse
