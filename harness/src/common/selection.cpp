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

namespace {

// The ids one token names: "all", "lo-hi", "12", or a slug.
std::set<int> ids_of(const std::string& token, const std::vector<ProblemName>& known,
                     const std::set<int>& known_ids) {
  if (token == "all") return known_ids;
  size_t dash = token.find('-');
  if (dash != std::string::npos && all_digits(token.substr(0, dash)) && all_digits(token.substr(dash + 1))) {
    int lo = std::stoi(token.substr(0, dash)), hi = std::stoi(token.substr(dash + 1));
    PKB_CHECK(lo <= hi, "empty problem range '", token, "'");
    std::set<int> ids;
    for (int id = lo; id <= hi; ++id)
      if (known_ids.count(id)) ids.insert(id);
    PKB_CHECK(!ids.empty(), "problem range '", token, "' matches no problem");
    return ids;
  }
  if (all_digits(token)) {
    int id = std::stoi(token);
    PKB_CHECK(known_ids.count(id), "no problem with id ", id);
    return {id};
  }
  auto it = std::find_if(known.begin(), known.end(), [&](const ProblemName& k) {
    return token == k.slug || token == std::to_string(k.id) + "_" + k.slug ||
           (k.id < 10 && token == "0" + std::to_string(k.id) + "_" + k.slug);
  });
  PKB_CHECK(it != known.end(), "no problem named '", token, "'");
  return {it->id};
}

}  // namespace

std::vector<int> parse_selection(const std::string& text, const std::vector<ProblemName>& known) {
  std::set<int> ids, excluded;
  std::set<int> known_ids;
  for (const auto& k : known) known_ids.insert(k.id);
  std::stringstream ss(text);
  std::string token;
  bool any_included = false;
  while (std::getline(ss, token, ',')) {
    token = trim(token);
    if (token.empty()) continue;
    if (token[0] == '!') {
      std::set<int> x = ids_of(trim(token.substr(1)), known, known_ids);
      excluded.insert(x.begin(), x.end());
      continue;
    }
    any_included = true;
    std::set<int> x = ids_of(token, known, known_ids);
    ids.insert(x.begin(), x.end());
  }
  PKB_CHECK(any_included, "empty problem selection (exclusions like '!15' need something to exclude from)");
  std::vector<int> out;
  for (int id : ids)
    if (!excluded.count(id)) out.push_back(id);
  PKB_CHECK(!out.empty(), "problem selection '", text, "' excludes every problem it names");
  return out;
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
