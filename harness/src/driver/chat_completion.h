// The OpenAI chat-completions protocol, as `pkb generate` speaks it to any
// compatible endpoint (OpenAI, Together, vLLM, SGLang, llama.cpp's server,
// and Anthropic's and Gemini's compatibility endpoints): the request body,
// the reply's fields, and which failures are retried.
//
// NOTE [generate retries]
// A request is retried after HTTP 429, 408, 409 and 5xx, after a transport
// failure (refused connection, unresolved name, reset) and after its
// per-request timeout; the wait before attempt n+1 is the Retry-After header
// when the server sends one (seconds or an HTTP date, honoured up to
// kMaxRetryAfterS), else backoff_s * 2^(n-1) capped at kMaxBackoffS. Other
// 4xx are not retried: 401, 403 and 404 name a wrong key, URL or model and
// stop the whole run (every request would get the same answer); any other
// 4xx (400: a prompt over the context, an option the model refuses) and a
// 200 whose body is not a chat completion fail that sample alone. An
// endpoint still unreachable after every retry stops the run too.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "common/results.h"
#include "driver/http_client.h"

namespace pkb {

inline constexpr double kMaxBackoffS = 60;
inline constexpr double kMaxRetryAfterS = 600;

struct ChatRequest {
  std::string url;      // .../chat/completions
  std::string model;
  std::string prompt;   // the one user message
  double temperature = -1;  // < 0: not sent (the endpoint's default)
  int max_tokens = 0;       // 0: not sent
  std::string api_key;      // "" : no Authorization header
  double timeout_s = 600;   // per attempt
  int retries = 5;          // attempts = retries + 1
  double backoff_s = 1;
};

struct ChatAttempt {
  long http_status = 0;     // 0: no HTTP response
  std::string error;        // why it failed ("" for the attempt that succeeded)
  double seconds = 0;
  double wait_s = 0;        // slept before the next attempt
  std::string retry_after;  // as the server sent it
};

enum class ChatStatus { kOk, kFailed, kFatal, kCancelled };

struct ChatResult {
  ChatStatus status = ChatStatus::kFailed;
  std::string content, finish_reason, response_model, id;
  Json usage = nullptr;  // the reply's usage object, as sent
  double latency_s = 0;  // the attempt that answered
  double total_s = 0;    // every attempt and wait
  std::vector<ChatAttempt> attempts;
  std::string error;     // kFailed / kFatal: why, for a person
};

// "http://host:8000/v1" -> "http://host:8000/v1/chat/completions"; a URL that
// already ends in /chat/completions is kept.
std::string chat_completions_url(const std::string& endpoint);
std::string chat_request_body(const ChatRequest& req);
// The seconds a Retry-After value asks for (delta-seconds or an HTTP date); < 0 when unreadable.
double parse_retry_after(const std::string& value);
// NOTE [generate retries]: the wait after failed attempt `attempt` (1-based).
double retry_delay_s(int attempt, const std::string& retry_after, double backoff_s);
// A 200 reply's body -> content, finish reason, usage; status kFailed with
// the reason when it is not a chat completion.
ChatResult parse_chat_reply(const std::string& body);

// Sends `req` with retries (NOTE [generate retries]); `note` receives a line
// per retry. A set `cancel` ends it at once with kCancelled.
ChatResult request_chat_completion(HttpClient& http, const ChatRequest& req, const std::atomic<bool>* cancel,
                                   const std::function<void(const std::string&)>& note);

}  // namespace pkb
