// An HTTP client for `pkb generate`: one connection-reusing handle per
// thread, POST with a JSON body, a whole-request deadline and cancellation.
// Built on libcurl (http_client_curl.cpp) when CMake finds it; otherwise
// http_client_none.cpp stands in and pkb generate says it is compiled out.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace pkb {

struct HttpResponse {
  long status = 0;          // 0: no HTTP response (see `error`)
  std::string body;
  std::string retry_after;  // the Retry-After header, as sent ("" when absent)
  double seconds = 0;       // request sent to last byte (or failure)
  // Transport failures (no status): a message, and which kind it was.
  std::string error;
  bool timed_out = false;    // the deadline passed
  bool unreachable = false;  // name not resolved or connection refused
  bool cancelled = false;    // `cancel` was set while the request ran
};

// Whether this build has an HTTP client; without one, HttpClient throws.
bool have_http_client();
// Call once before any thread makes an HttpClient.
void http_global_init();

class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // POST `body` (application/json) with extra `headers` ("Name: value"); the
  // whole request may take at most `timeout_s`. A set `cancel` aborts it.
  HttpResponse post_json(const std::string& url, const std::string& body, const std::vector<std::string>& headers,
                         double timeout_s, const std::atomic<bool>* cancel);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pkb
