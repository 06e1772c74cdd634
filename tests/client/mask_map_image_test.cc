#include "client/mask_map_image.h"

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/client/png_reader.h"
#include "tests/common/fixture_paths.h"

namespace docsparse {
namespace {

struct Element {
  std::string name;
  std::map<std::string, std::string> attributes;
  int depth = 0;
};

// A strict little XML 1.0 reader for what an SVG writer produces: one root,
// properly nested and closed tags, quoted and unique attributes, only the
// five predefined entities and character references, no stray '<' or '&'.
// Returns the elements in document order, or an error.
bool ParseXml(const std::string& xml, std::vector<Element>* elements, std::string* error) {
  auto fail = [error](const std::string& why, size_t at) {
    *error = why + " at byte " + std::to_string(at);
    return false;
  };
  auto is_name = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' ||
           c == '.';
  };
  auto check_text = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      if (xml[i] == '<') return fail("stray <", i);
      if (xml[i] != '&') continue;
      const size_t semi = xml.find(';', i);
      if (semi == std::string::npos || semi > end) return fail("unterminated entity", i);
      const std::string entity = xml.substr(i + 1, semi - i - 1);
      if (entity != "amp" && entity != "lt" && entity != "gt" && entity != "quot" &&
          entity != "apos" && (entity.empty() || entity[0] != '#')) {
        return fail("unknown entity &" + entity + ";", i);
      }
    }
    return true;
  };
  size_t at = 0;
  if (xml.compare(0, 5, "<?xml") == 0) {
    at = xml.find("?>");
    if (at == std::string::npos) return fail("unterminated declaration", 0);
    at += 2;
  }
  std::vector<std::string> open;
  bool root_seen = false;
  while (at < xml.size()) {
    const size_t lt = xml.find('<', at);
    const size_t text_end = lt == std::string::npos ? xml.size() : lt;
    if (!check_text(at, text_end)) return false;
    if (open.empty() && xml.find_first_not_of(" \t\r\n", at) < text_end) {
      return fail("text outside the root", at);
    }
    if (lt == std::string::npos) break;
    at = lt + 1;
    if (xml[at] == '/') {
      size_t end = at + 1;
      while (end < xml.size() && is_name(xml[end])) ++end;
      const std::string name = xml.substr(at + 1, end - at - 1);
      if (open.empty() || open.back() != name) return fail("mismatched </" + name + ">", lt);
      if (xml[end] != '>') return fail("bad end tag", end);
      open.pop_back();
      at = end + 1;
      continue;
    }
    if (open.empty() && root_seen) return fail("second root element", lt);
    Element element;
    element.depth = static_cast<int>(open.size());
    size_t end = at;
    while (end < xml.size() && is_name(xml[end])) ++end;
    element.name = xml.substr(at, end - at);
    if (element.name.empty()) return fail("empty tag name", at);
    at = end;
    for (;;) {
      while (at < xml.size() && std::isspace(static_cast<unsigned char>(xml[at]))) ++at;
      if (at >= xml.size()) return fail("unterminated tag", lt);
      if (xml[at] == '>' || xml.compare(at, 2, "/>") == 0) break;
      end = at;
      while (end < xml.size() && is_name(xml[end])) ++end;
      const std::string name = xml.substr(at, end - at);
      if (name.empty() || xml[end] != '=' || (xml[end + 1] != '"' && xml[end + 1] != '\'')) {
        return fail("bad attribute", at);
      }
      const size_t close = xml.find(xml[end + 1], end + 2);
      if (close == std::string::npos) return fail("unterminated attribute", at);
      if (!check_text(end + 2, close)) return false;
      if (!element.attributes.emplace(name, xml.substr(end + 2, close - end - 2)).second) {
        return fail("duplicate attribute " + name, at);
      }
      at = close + 1;
    }
    root_seen = true;
    const bool self_closing = xml[at] == '/';
    at += self_closing ? 2 : 1;
    if (!self_closing) open.push_back(element.name);
    elements->push_back(std::move(element));
  }
  if (!open.empty()) return fail("unclosed <" + open.back() + ">", xml.size());
  if (!root_seen) return fail("no root element", 0);
  return true;
}

double Luma(Rgb c) { return 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b; }

// `layers` maps of rows x cols whose cell i has density (i % 5) / 4, so one
// cell in five is zero.
v1::CostReport ExampleCost(int layers, int rows, int cols) {
  v1::CostReport cost;
  cost.set_attention(v1::ATTENTION_KIND_LSG);
  cost.set_mean_density(0.4321);
  cost.set_input_tokens(4096);
  for (int l = 0; l < layers; ++l) {
    v1::MaskMap* map = cost.add_mask_maps();
    map->set_layer(l);
    map->set_rows(rows);
    map->set_cols(cols);
    for (int i = 0; i < rows * cols; ++i) map->add_density(static_cast<float>(i % 5) / 4);
    v1::LayerCost* layer = cost.add_layers();
    layer->set_layer(l);
    layer->add_head_density(0.5);
    layer->add_head_density(0.25);
  }
  return cost;
}

TEST(MaskMapImageTest, ColourDarkensAsDensityRises) {
  EXPECT_EQ(DensityColour(0), (Rgb{255, 255, 255}));
  EXPECT_EQ(DensityColour(-1), DensityColour(0));
  EXPECT_EQ(DensityColour(std::nan("")), DensityColour(0));
  EXPECT_EQ(DensityColour(2), DensityColour(1));
  // Never lighter for a higher density; visibly darker every 0.02 (the
  // colours are 8-bit, so neighbours 0.001 apart may be equal).
  double previous = Luma(DensityColour(0));
  for (int i = 1; i <= 1000; ++i) {
    const double luma = Luma(DensityColour(i / 1000.0));
    EXPECT_LE(luma, previous) << "density " << i / 1000.0;
    previous = luma;
  }
  for (int i = 1; i <= 50; ++i) {
    EXPECT_LT(Luma(DensityColour(i / 50.0)), Luma(DensityColour((i - 1) / 50.0)) - 1)
        << "density " << i / 50.0;
  }
}

TEST(MaskMapImageTest, SvgIsWellFormedWithOnePanelPerLayer) {
  const v1::CostReport cost = ExampleCost(6, 16, 16);
  auto svg = RenderMaskMapSvg("mini<lm>&co", cost);
  ASSERT_TRUE(svg.ok()) << svg.status();
  std::vector<Element> elements;
  std::string error;
  ASSERT_TRUE(ParseXml(*svg, &elements, &error)) << error;
  ASSERT_FALSE(elements.empty());
  EXPECT_EQ(elements[0].name, "svg");
  EXPECT_EQ(elements[0].attributes["xmlns"], "http://www.w3.org/2000/svg");
  // The model name is escaped, the title says the attention and density.
  EXPECT_NE(svg->find("mini&lt;lm&gt;&amp;co: LSG attention, mean density 0.4321"),
            std::string::npos);
  int panels = 0, legends = 0, stops = 0;
  for (const Element& element : elements) {
    if (element.name == "g" && element.attributes.count("class")) {
      panels += element.attributes.at("class") == "layer";
      legends += element.attributes.at("class") == "legend";
    }
    stops += element.name == "stop";
  }
  EXPECT_EQ(panels, 6);
  EXPECT_EQ(legends, 1);
  EXPECT_EQ(stops, 5);
  EXPECT_NE(svg->find("layer 5: density 0.3750"), std::string::npos);
}

TEST(MaskMapImageTest, SvgCellsCoverExactlyTheNonZeroCells) {
  const v1::CostReport cost = ExampleCost(3, 10, 7);
  auto svg = RenderMaskMapSvg("m", cost);
  ASSERT_TRUE(svg.ok()) << svg.status();
  std::vector<Element> elements;
  std::string error;
  ASSERT_TRUE(ParseXml(*svg, &elements, &error)) << error;
  int cell = 0;
  long covered = 0;
  std::map<std::string, double> density_of_colour;
  for (const Element& element : elements) {
    const auto cls = element.attributes.find("class");
    if (cls == element.attributes.end()) continue;
    if (cls->second == "layer") {
      cell = std::stoi(element.attributes.at("data-cell"));
      EXPECT_EQ(element.attributes.at("data-rows"), "10");
      EXPECT_EQ(element.attributes.at("data-cols"), "7");
    } else if (cls->second == "cell") {
      ASSERT_GT(cell, 0);
      const int width = std::stoi(element.attributes.at("width"));
      EXPECT_EQ(width % cell, 0);
      EXPECT_EQ(std::stoi(element.attributes.at("height")), cell);
      covered += width / cell;
      EXPECT_NE(element.attributes.at("fill"), "#ffffff");
    }
  }
  int non_zero = 0;
  for (const v1::MaskMap& map : cost.mask_maps()) {
    for (float d : map.density()) non_zero += d > 0;
  }
  EXPECT_EQ(covered, non_zero);
  EXPECT_EQ(non_zero, 3 * 56);
}

TEST(MaskMapImageTest, UniformRowsBecomeOneRectEach) {
  v1::CostReport cost;
  v1::MaskMap* map = cost.add_mask_maps();
  map->set_rows(64);
  map->set_cols(64);
  for (int i = 0; i < 64 * 64; ++i) map->add_density(1.0f);
  auto svg = RenderMaskMapSvg("dense", cost);
  ASSERT_TRUE(svg.ok());
  size_t cells = 0;
  for (size_t at = svg->find("class=\"cell\""); at != std::string::npos;
       at = svg->find("class=\"cell\"", at + 1)) {
    ++cells;
  }
  EXPECT_EQ(cells, 64u);
}

TEST(MaskMapImageTest, NoMapsIsAFailedPrecondition) {
  v1::CostReport cost;
  EXPECT_EQ(RenderMaskMapSvg("m", cost).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RenderMaskMapPng("m", cost).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(MaskMapImageTest, MisshapenMapIsNamed) {
  v1::CostReport cost = ExampleCost(2, 4, 4);
  cost.mutable_mask_maps(1)->mutable_density()->RemoveLast();
  const absl::Status status = RenderMaskMapSvg("m", cost).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("mask_maps[1]"), std::string::npos) << status;
}

TEST(MaskMapImageTest, PngShowsTheCellColours) {
  const v1::CostReport cost = ExampleCost(2, 8, 8);
  auto png = RenderMaskMapPng("m", cost);
  ASSERT_TRUE(png.ok()) << png.status();
  const testing::DecodedPng decoded = testing::DecodeRgbPng(*png);
  ASSERT_TRUE(decoded.ok) << decoded.error;
  // Every map colour appears in the picture.
  auto has = [&](Rgb c) {
    for (size_t i = 0; i + 2 < decoded.rgb.size(); i += 3) {
      if (decoded.rgb[i] == c.r && decoded.rgb[i + 1] == c.g && decoded.rgb[i + 2] == c.b) {
        return true;
      }
    }
    return false;
  };
  for (double d : {0.25, 0.5, 0.75, 1.0}) EXPECT_TRUE(has(DensityColour(d))) << d;
}

TEST(MaskMapImageTest, WritesByExtension) {
  const std::string dir = ::testing::TempDir();
  const v1::CostReport cost = ExampleCost(1, 4, 4);
  ASSERT_TRUE(WriteMaskMapPicture(dir + "/map.svg", "m", cost).ok());
  ASSERT_TRUE(WriteMaskMapPicture(dir + "/map.PNG", "m", cost).ok());
  EXPECT_EQ(testing::ReadFile(dir + "/map.svg").rfind("<?xml", 0), 0u);
  EXPECT_TRUE(testing::DecodeRgbPng(testing::ReadFile(dir + "/map.PNG")).ok);
  EXPECT_EQ(WriteMaskMapPicture(dir + "/map.jpg", "m", cost).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(WriteMaskMapPicture(dir + "/no/such/dir/map.svg", "m", cost).ok());
  EXPECT_TRUE(CheckMaskMapPath("x.Svg").ok());
  EXPECT_FALSE(CheckMaskMapPath("x.svg.txt").ok());
}

}  // namespace
}  // namespace docsparse
