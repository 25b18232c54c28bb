// Stands in for http_client_curl.cpp in a build without libcurl.
#include "driver/http_client.h"

#include "pkb/check.h"

namespace pkb {

struct HttpClient::Impl {};

bool have_http_client() { return false; }
void http_global_init() {}

HttpClient::HttpClient() {
  PKB_CHECK(false, "this pkb was built without libcurl (Debian: libcurl4-openssl-dev)");
}
HttpClient::~HttpClient() = default;

HttpResponse HttpClient::post_json(const std::string&, const std::string&, const std::vector<std::string>&, double,
                                   const std::atomic<bool>*) {
  return {};
}

}  // namespace pkb
