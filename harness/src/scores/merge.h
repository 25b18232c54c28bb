// Joins the results files of shards (pkb run --shard i/N) into one.
//
// An evaluation recorded twice (the same record_key) means overlapping shards
// or a file passed twice; scoring it would count it twice, so merging refuses
// rather than picking one.
#pragma once

#include <string>
#include <vector>

#include "common/results.h"

namespace pkb {

// Every record of `files`, in order. Throws pkb::Error on a duplicate
// evaluation (naming both files) or a record of another schema version.
std::vector<Json> merge_results(const std::vector<std::string>& files);

// The records as JSONL text.
std::string to_jsonl(const std::vector<Json>& records);

}  // namespace pkb
