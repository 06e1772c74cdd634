// Pictures of the attention mask density maps a cost report carries
// (RequestOptions.return_mask_map): one panel per layer in a grid, each
// query-block x key-block cell coloured by its density, a title (model,
// attention kind, mean density) and a colour scale.
#ifndef DOCSPARSE_CLIENT_MASK_MAP_IMAGE_H_
#define DOCSPARSE_CLIENT_MASK_MAP_IMAGE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/raster_image.h"
#include "docsparse/v1/docsparse.pb.h"

namespace docsparse {

// Colour of a density, clamped to [0, 1] (NaN is 0): white at 0 through
// yellow, orange and red to dark red at 1 (ColorBrewer YlOrRd). Luma never
// rises with density (and falls visibly every 0.02), so the picture reads in
// grey too.
Rgb DensityColour(double density);

// The SVG document (UTF-8, standalone). FAILED_PRECONDITION when `cost` has
// no mask maps; INVALID_ARGUMENT naming mask_maps[i] when a map's size does
// not match rows x cols or is outside 1..1024 a side. Zero cells show the
// panel's background; other cells are drawn as horizontal runs of equal
// colour, so their rect widths add up to the non-zero cells of the map.
absl::StatusOr<std::string> RenderMaskMapSvg(const std::string& model, const v1::CostReport& cost);
// The same picture as a PNG file (upper-case 3x5 bitmap lettering).
absl::StatusOr<std::string> RenderMaskMapPng(const std::string& model, const v1::CostReport& cost);

// Renders by `path`'s extension (.svg or .png, any case) and writes the file.
// INVALID_ARGUMENT for another extension, the errors above, or an I/O error.
absl::Status WriteMaskMapPicture(const std::string& path, const std::string& model,
                                 const v1::CostReport& cost);

// OK when WriteMaskMapPicture accepts `path`'s extension; lets the CLI fail
// before sending a request.
absl::Status CheckMaskMapPath(const std::string& path);

}  // namespace docsparse

#endif  // DOCSPARSE_CLIENT_MASK_MAP_IMAGE_H_
