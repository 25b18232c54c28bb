#include "worker/proxy_store.h"

#include "common/hex.h"
#include "pkb/check.h"

namespace pkb {

namespace {

constexpr const char* kContestantPrefix = "c/";

std::vector<std::string> keys_of(const Json& j) {
  std::vector<std::string> k;
  for (const auto& x : j.at("keys")) k.push_back(kContestantPrefix + x.get<std::string>());
  return k;
}

}  // namespace

Json ProxyStore::call(Json req) {
  std::lock_guard<std::mutex> lock(mu_);
  channel_.send(req);
  Json reply;
  channel_.recv(&reply, nullptr);
  PKB_CHECK(reply.contains("store_reply"), "the referee answered a store request with something else");
  if (reply.contains("error")) PKB_CHECK(false, "store: ", reply["error"].get<std::string>());
  return reply;
}

c10::intrusive_ptr<c10d::Store> ProxyStore::clone() {
  PKB_CHECK(false, "the contestant's store cannot be cloned");
}
void ProxyStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  call({{"store", "set"}, {"key", key}, {"value", to_hex(value)}});
}
std::vector<uint8_t> ProxyStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                            const std::vector<uint8_t>& desired) {
  return from_hex(call({{"store", "compare_set"}, {"key", key}, {"expected", to_hex(expected)}, {"value", to_hex(desired)}})
                   .at("value")
                   .get<std::string>());
}
std::vector<uint8_t> ProxyStore::get(const std::string& key) {
  return from_hex(call({{"store", "get"}, {"key", key}}).at("value").get<std::string>());
}
int64_t ProxyStore::add(const std::string& key, int64_t value) {
  return call({{"store", "add"}, {"key", key}, {"delta", value}}).at("result").get<int64_t>();
}
bool ProxyStore::deleteKey(const std::string& key) {
  return call({{"store", "delete"}, {"key", key}}).at("result").get<bool>();
}
bool ProxyStore::check(const std::vector<std::string>& keys) {
  return call({{"store", "check"}, {"keys", keys}}).at("result").get<bool>();
}
int64_t ProxyStore::getNumKeys() { return call({{"store", "num_keys"}}).at("result").get<int64_t>(); }
void ProxyStore::wait(const std::vector<std::string>& keys) { call({{"store", "wait"}, {"keys", keys}}); }
void ProxyStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  call({{"store", "wait"}, {"keys", keys}, {"timeout_ms", timeout.count()}});
}

Json serve_store_request(const Json& req, c10d::Store& store) {
  Json reply = {{"store_reply", true}};
  try {
    const std::string op = req.at("store").get<std::string>();
    auto key = [&] { return kContestantPrefix + req.at("key").get<std::string>(); };
    if (op == "set") {
      store.set(key(), from_hex(req.at("value").get<std::string>()));
    } else if (op == "get") {
      reply["value"] = to_hex(store.get(key()));
    } else if (op == "compare_set") {
      reply["value"] = to_hex(store.compareSet(key(), from_hex(req.at("expected").get<std::string>()),
                                            from_hex(req.at("value").get<std::string>())));
    } else if (op == "add") {
      reply["result"] = store.add(key(), req.at("delta").get<int64_t>());
    } else if (op == "delete") {
      reply["result"] = store.deleteKey(key());
    } else if (op == "check") {
      reply["result"] = store.check(keys_of(req));
    } else if (op == "num_keys") {
      reply["result"] = store.getNumKeys();
    } else if (op == "wait") {
      if (req.contains("timeout_ms"))
        store.wait(keys_of(req), std::chrono::milliseconds(req["timeout_ms"].get<int64_t>()));
      else
        store.wait(keys_of(req));
    } else {
      reply["error"] = "unknown store operation '" + op + "'";
    }
  } catch (const std::exception& e) {
    reply["error"] = e.what();
  }
  return reply;
}

}  // namespace pkb
