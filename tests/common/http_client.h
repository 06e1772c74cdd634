// An httplib client for a server's HTTP address ("host:port", as
// ServerProcess::http_address gives it).
#ifndef DOCSPARSE_TESTS_COMMON_HTTP_CLIENT_H_
#define DOCSPARSE_TESTS_COMMON_HTTP_CLIENT_H_

#include <httplib.h>

#include <string>

namespace docsparse::testing {

inline httplib::Client HttpClient(const std::string& address) {
  const size_t colon = address.rfind(':');
  return httplib::Client(address.substr(0, colon), std::stoi(address.substr(colon + 1)));
}

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_COMMON_HTTP_CLIENT_H_
