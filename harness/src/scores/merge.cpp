#include "scores/merge.h"

#include <map>

#include "common/files.h"
#include "pkb/check.h"

namespace pkb {

std::vector<Json> merge_results(const std::vector<std::string>& files) {
  PKB_CHECK(!files.empty(), "nothing to merge");
  std::vector<Json> merged;
  std::map<std::string, std::string> seen;  // record key -> the file it came from
  for (const std::string& file : files) {
    PKB_CHECK(file_exists(file), "no such results file '", file, "'");
    for (Json& r : read_jsonl(file)) {
      PKB_CHECK(r.value("schema_version", 0) == kResultSchemaVersion, "'", file, "' has a record of schema_version ",
                r.value("schema_version", 0), ", this pkb writes ", kResultSchemaVersion);
      // Golden replays and evaluations never describe the same thing.
      const std::string key = r.value("kind", std::string("evaluation")) + "|" + record_key(r);
      auto [it, fresh] = seen.emplace(key, file);
      PKB_CHECK(fresh, "duplicate evaluation ", record_key(r), " in '", it->second, "' and '", file,
                "' (overlapping shards?)");
      merged.push_back(std::move(r));
    }
  }
  return merged;
}

std::string to_jsonl(const std::vector<Json>& records) {
  std::string text;
  for (const Json& r : records) text += r.dump() + "\n";
  return text;
}

}  // namespace pkb
