#include "driver/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include "pkb/check.h"

namespace pkb {

namespace {

size_t on_body(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  std::string line(data, size * n);
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    if (name == "retry-after") {
      std::string v = line.substr(colon + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      v.erase(v.find_last_not_of(" \t\r\n") + 1);
      *static_cast<std::string*>(user) = v;
    }
  }
  return size * n;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* cancel = static_cast<const std::atomic<bool>*>(user);
  return cancel && cancel->load() ? 1 : 0;  // non-zero aborts the transfer
}

}  // namespace

struct HttpClient::Impl {
  CURL* easy = nullptr;
};

bool have_http_client() { return true; }

void http_global_init() {
  static const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
  PKB_CHECK(rc == CURLE_OK, "curl_global_init: ", curl_easy_strerror(rc));
}

HttpClient::HttpClient() : impl_(std::make_unique<Impl>()) {
  impl_->easy = curl_easy_init();
  PKB_CHECK(impl_->easy != nullptr, "curl_easy_init failed");
}

HttpClient::~HttpClient() {
  if (impl_ && impl_->easy) curl_easy_cleanup(impl_->easy);
}

HttpResponse HttpClient::post_json(const std::string& url, const std::string& body,
                                   const std::vector<std::string>& headers, double timeout_s,
                                   const std::atomic<bool>* cancel) {
  CURL* c = impl_->easy;
  curl_easy_reset(c);  // keeps the connection cache: the next request may reuse the connection
  HttpResponse r;
  curl_slist* hl = curl_slist_append(nullptr, "Content-Type: application/json");
  for (const auto& h : headers) hl = curl_slist_append(hl, h.c_str());
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.retry_after);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(cancel));
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::min(timeout_s, 30.0) * 1000));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for name-resolution timeouts
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");  // whatever this libcurl decodes
  curl_easy_setopt(c, CURLOPT_USERAGENT, "pkb-generate");
  const auto t0 = std::chrono::steady_clock::now();
  CURLcode rc = curl_easy_perform(c);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  curl_slist_free_all(hl);
  if (rc != CURLE_OK) {
    r.error = std::string(curl_easy_strerror(rc)) + (errbuf[0] ? std::string(": ") + errbuf : std::string());
    r.timed_out = rc == CURLE_OPERATION_TIMEDOUT;
    r.unreachable = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY;
    r.cancelled = rc == CURLE_ABORTED_BY_CALLBACK;
    r.body.clear();
    return r;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  return r;
}

}  // namespace pkb
