#include <gtest/gtest.h>

#include "driver/chat_completion.h"

namespace pkb {
namespace {

TEST(ChatCompletion, UrlFromBaseOrFull) {
  EXPECT_EQ(chat_completions_url("http://h:8000/v1"), "http://h:8000/v1/chat/completions");
  EXPECT_EQ(chat_completions_url("http://h:8000/v1/"), "http://h:8000/v1/chat/completions");
  EXPECT_EQ(chat_completions_url("https://x/api/v1/chat/completions"), "https://x/api/v1/chat/completions");
}

TEST(ChatCompletion, BodySendsOnlyWhatWasSet) {
  ChatRequest r;
  r.model = "m";
  r.prompt = "hi";
  Json b = Json::parse(chat_request_body(r));
  EXPECT_EQ(b["model"], "m");
  EXPECT_EQ(b["messages"][0]["role"], "user");
  EXPECT_EQ(b["messages"][0]["content"], "hi");
  EXPECT_FALSE(b.contains("temperature"));
  EXPECT_FALSE(b.contains("max_tokens"));
  r.temperature = 0;
  r.max_tokens = 100;
  b = Json::parse(chat_request_body(r));
  EXPECT_EQ(b["temperature"], 0.0);
  EXPECT_EQ(b["max_tokens"], 100);
}

TEST(ChatCompletion, RetryAfterWinsOverBackoff) {
  EXPECT_DOUBLE_EQ(retry_delay_s(1, "", 1), 1);
  EXPECT_DOUBLE_EQ(retry_delay_s(3, "", 1), 4);
  EXPECT_DOUBLE_EQ(retry_delay_s(20, "", 1), kMaxBackoffS);
  EXPECT_DOUBLE_EQ(retry_delay_s(3, "7", 1), 7);
  EXPECT_DOUBLE_EQ(retry_delay_s(1, "100000", 1), kMaxRetryAfterS);
  EXPECT_DOUBLE_EQ(retry_delay_s(1, "Wed, 21 Oct 2015 07:28:00 GMT", 1), 0);  // a date in the past: now
  EXPECT_DOUBLE_EQ(retry_delay_s(2, "soon", 1), 2);  // unreadable: the backoff
}

TEST(ChatCompletion, ParsesAReply) {
  ChatResult r = parse_chat_reply(
      R"({"id":"x","model":"m2","choices":[{"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],)"
      R"("usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}})");
  ASSERT_EQ(r.status, ChatStatus::kOk);
  EXPECT_EQ(r.content, "hello");
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.response_model, "m2");
  EXPECT_EQ(r.usage["completion_tokens"], 1);
  r = parse_chat_reply(R"({"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]})");
  ASSERT_EQ(r.status, ChatStatus::kOk);
  EXPECT_EQ(r.content, "ab");
  r = parse_chat_reply(R"({"choices":[{"message":{"content":null},"finish_reason":"length"}]})");
  ASSERT_EQ(r.status, ChatStatus::kOk);
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.finish_reason, "length");
}

TEST(ChatCompletion, MalformedRepliesAreFailuresNotCrashes) {
  for (const char* body : {"{not json", "[]", "{}", R"({"choices":[]})", R"({"choices":[1]})",
                           R"({"error":{"message":"overloaded"}})", R"({"choices":[{"message":{"content":5}}]})"}) {
    ChatResult r = parse_chat_reply(body);
    EXPECT_EQ(r.status, ChatStatus::kFailed) << body;
    EXPECT_FALSE(r.error.empty()) << body;
  }
  EXPECT_NE(parse_chat_reply(R"({"error":{"message":"overloaded"}})").error.find("overloaded"), std::string::npos);
}

}  // namespace
}  // namespace pkb
