#include "driver/chat_completion.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <thread>

namespace pkb {

namespace {

// The message a server put in its error body ({"error": {"message": ...}}),
// else the body's start.
std::string error_text(const std::string& body) {
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded() && j.is_object() && j.contains("error")) {
    const Json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
    if (e.is_string()) return e.get<std::string>();
  }
  std::string s = body.substr(0, 300);
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s.empty() ? "(empty body)" : s;
}

bool retried_status(long s) { return s == 408 || s == 409 || s == 429 || s >= 500; }
bool fatal_status(long s) { return s == 401 || s == 403 || s == 404; }

// Sleeps `s` seconds unless `cancel` is set first.
void wait_unless_cancelled(double s, const std::atomic<bool>* cancel) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(s);
  while (std::chrono::steady_clock::now() < end && !(cancel && cancel->load()))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

std::string fmt_s(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", s);
  return buf;
}

}  // namespace

std::string chat_completions_url(const std::string& endpoint) {
  std::string u = endpoint;
  while (!u.empty() && u.back() == '/') u.pop_back();
  const std::string tail = "/chat/completions";
  if (u.size() >= tail.size() && u.compare(u.size() - tail.size(), tail.size(), tail) == 0) return u;
  return u + tail;
}

std::string chat_request_body(const ChatRequest& req) {
  Json b;
  b["model"] = req.model;
  b["messages"] = Json::array({{{"role", "user"}, {"content", req.prompt}}});
  if (req.temperature >= 0) b["temperature"] = req.temperature;
  if (req.max_tokens > 0) b["max_tokens"] = req.max_tokens;
  b["stream"] = false;
  return b.dump();
}

double parse_retry_after(const std::string& v) {
  if (v.empty()) return -1;
  if (std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c) || c == '.'; })) {
    char* end = nullptr;
    double s = std::strtod(v.c_str(), &end);
    return end && *end == '\0' ? s : -1;
  }
  // An HTTP date: "Wed, 21 Oct 2015 07:28:00 GMT".
  std::tm tm{};
  const char* end = strptime(v.c_str(), "%a, %d %b %Y %H:%M:%S", &tm);
  if (!end) return -1;
  const double at = static_cast<double>(timegm(&tm));
  return std::max(0.0, at - static_cast<double>(std::time(nullptr)));
}

double retry_delay_s(int attempt, const std::string& retry_after, double backoff_s) {
  const double ra = parse_retry_after(retry_after);
  if (ra >= 0) return std::min(ra, kMaxRetryAfterS);
  return std::min(kMaxBackoffS, backoff_s * std::pow(2.0, std::max(0, attempt - 1)));
}

ChatResult parse_chat_reply(const std::string& body) {
  ChatResult r;
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    r.error = "the endpoint's reply is not JSON (HTTP 200): " + error_text(body);
    return r;
  }
  if (j.contains("error") && !j["error"].is_null()) {
    r.error = "the endpoint answered HTTP 200 with an error: " + error_text(body);
    return r;
  }
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty() || !j["choices"][0].is_object()) {
    r.error = "the endpoint's reply has no choices[0] (not a chat completion): " + error_text(body);
    return r;
  }
  const Json& c = j["choices"][0];
  if (c.contains("finish_reason") && c["finish_reason"].is_string()) r.finish_reason = c["finish_reason"];
  const Json msg = c.contains("message") && c["message"].is_object() ? c["message"] : Json::object();
  const Json content = msg.contains("content") ? msg["content"] : Json(nullptr);
  if (content.is_string()) {
    r.content = content.get<std::string>();
  } else if (content.is_array()) {  // content parts: [{"type": "text", "text": ...}, ...]
    for (const Json& part : content)
      if (part.is_object() && part.contains("text") && part["text"].is_string()) r.content += part["text"].get<std::string>();
  } else if (!content.is_null()) {
    r.error = "choices[0].message.content is neither text nor a list of parts";
    return r;
  }
  if (j.contains("usage") && j["usage"].is_object()) r.usage = j["usage"];
  if (j.contains("model") && j["model"].is_string()) r.response_model = j["model"];
  if (j.contains("id") && j["id"].is_string()) r.id = j["id"];
  r.status = ChatStatus::kOk;
  return r;
}

ChatResult request_chat_completion(HttpClient& http, const ChatRequest& req, const std::atomic<bool>* cancel,
                                   const std::function<void(const std::string&)>& note) {
  const std::string body = chat_request_body(req);
  std::vector<std::string> headers;
  if (!req.api_key.empty()) headers.push_back("Authorization: Bearer " + req.api_key);
  const int max_attempts = req.retries + 1;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<ChatAttempt> attempts;
  auto finish = [&](ChatResult r) {
    r.attempts = attempts;
    r.total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  auto failed = [&](ChatStatus st, const std::string& why) {
    ChatResult r;
    r.status = st;
    r.error = why;
    return finish(r);
  };
  for (int n = 1;; ++n) {
    HttpResponse h = http.post_json(req.url, body, headers, req.timeout_s, cancel);
    ChatAttempt a;
    a.http_status = h.status;
    a.seconds = h.seconds;
    a.retry_after = h.retry_after;
    if (h.cancelled || (cancel && cancel->load())) {
      a.error = "cancelled";
      attempts.push_back(a);
      return failed(ChatStatus::kCancelled, "cancelled");
    }
    bool retry = false;
    if (h.status == 0) {
      a.error = h.timed_out ? "no complete reply within the per-request timeout (" + fmt_s(req.timeout_s) + ")"
                            : h.unreachable ? "endpoint unreachable: " + h.error : "transport error: " + h.error;
      retry = true;
    } else if (h.status == 200) {
      ChatResult r = parse_chat_reply(h.body);
      a.error = r.error;
      attempts.push_back(a);
      if (r.status != ChatStatus::kOk) return failed(ChatStatus::kFailed, r.error);
      r.latency_s = h.seconds;
      return finish(r);
    } else {
      a.error = "HTTP " + std::to_string(h.status) + ": " + error_text(h.body);
      retry = retried_status(h.status);
      if (fatal_status(h.status)) {
        attempts.push_back(a);
        return failed(ChatStatus::kFatal, a.error + " (from " + req.url + ")");
      }
    }
    if (!retry || n >= max_attempts) {
      attempts.push_back(a);
      const std::string why = a.error + (retry ? " (after " + std::to_string(n) + " attempt(s))" : "");
      return failed(h.unreachable ? ChatStatus::kFatal : ChatStatus::kFailed, why);
    }
    a.wait_s = retry_delay_s(n, h.retry_after, req.backoff_s);
    attempts.push_back(a);
    note(a.error + "; attempt " + std::to_string(n) + "/" + std::to_string(max_attempts) + ", retrying in " +
         fmt_s(a.wait_s) + (h.retry_after.empty() ? "" : " (Retry-After: " + h.retry_after + ")"));
    wait_unless_cancelled(a.wait_s, cancel);
  }
}

}  // namespace pkb
