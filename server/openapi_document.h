// The OpenAPI 3 document of the HTTP API (server/openapi.json, compiled in
// by server/CMakeLists.txt), served at GET /openapi.json.
#ifndef DOCSPARSE_SERVER_OPENAPI_DOCUMENT_H_
#define DOCSPARSE_SERVER_OPENAPI_DOCUMENT_H_

#include <string_view>

namespace docsparse {

std::string_view OpenApiDocument();

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_OPENAPI_DOCUMENT_H_
