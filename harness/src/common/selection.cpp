#include "common/selection.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "pkb/check.h"

namespace pkb {

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

std::vector<int> parse_selection(const std::string& text, const std::vector<ProblemName>& known) {
  std::set<int> ids;
  std::set<int> known_ids;
  for (const auto& k : known) known_ids.insert(k.id);
  std::stringstream ss(text);
  std::string token;
  bool any = false;
  while (std::getline(ss, token, ',')) {
    token = trim(token);
    if (token.empty()) continue;
    any = true;
    if (token == "all") {
      ids.insert(known_ids.begin(), known_ids.end());
      continue;
    }
    size_t dash = token.find('-');
    if (dash != std::string::npos && all_digits(token.substr(0, dash)) &&
        all_digits(token.substr(dash + 1))) {
      int lo = std::stoi(token.substr(0, dash)), hi = std::stoi(token.substr(dash + 1));
      PKB_CHECK(lo <= hi, "empty problem range '", token, "'");
      bool hit = false;
      for (int id = lo; id <= hi; ++id) {
        if (known_ids.count(id)) {
          ids.insert(id);
          hit = true;
        }
      }
      PKB_CHECK(hit, "problem range '", token, "' matches no problem");
      continue;
    }
    if (all_digits(token)) {
      int id = std::stoi(token);
      PKB_CHECK(known_ids.count(id), "no problem with id ", id);
      ids.insert(id);
      continue;
    }
    auto it = std::find_if(known.begin(), known.end(), [&](const ProblemName& k) {
      return token == k.slug || token == std::to_string(k.id) + "_" + k.slug ||
             (k.id < 10 && token == "0" + std::to_string(k.id) + "_" + k.slug);
    });
    PKB_CHECK(it != known.end(), "no problem named '", token, "'");
    ids.insert(it->id);
  }
  PKB_CHECK(any, "empty problem selection");
  return {ids.begin(), ids.end()};
}

std::pair<long, long> parse_shape(const std::string& text) {
  size_t x = text.find_first_of("xX");
  PKB_CHECK(x != std::string::npos && all_digits(text.substr(0, x)) && all_digits(text.substr(x + 1)),
            "base shape must look like 1024x1024, got '", text, "'");
  long m = std::stol(text.substr(0, x)), n = std::stol(text.substr(x + 1));
  PKB_CHECK(m > 0 && n > 0, "base shape must be positive, got '", text, "'");
  return {m, n};
}

std::pair<int, int> parse_shard(const std::string& text) {
  size_t s = text.find('/');
  PKB_CHECK(s != std::string::npos && all_digits(text.substr(0, s)) && all_digits(text.substr(s + 1)),
            "shard must look like i/N, got '", text, "'");
  int i = std::stoi(text.substr(0, s)), n = std::stoi(text.substr(s + 1));
  PKB_CHECK(n >= 1 && i >= 0 && i < n, "shard index must satisfy 0 <= i < N, got '", text, "'");
  return {i, n};
}

}  // namespace pkb
