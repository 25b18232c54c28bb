// Result files: versioned JSON records, one per evaluation, in JSONL.
//
// NOTE [result files]
// A record is appended as one write() and flushed to disk as soon as its
// evaluation finishes, so a killed run loses at most the evaluation in flight.
// A results file that exists is never overwritten: a run either resumes it
// (--resume: records already present are skipped) or refuses to start. Whole
// files (scores, tables) are written to a temporary name and renamed.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace pkb {

using Json = nlohmann::ordered_json;

inline constexpr int kResultSchemaVersion = 1;

// The identity of an evaluation within a results file.
std::string record_key(const Json& record);

class JsonlWriter {
 public:
  // Creates `path`, or appends to it when `append` is true. Throws pkb::Error
  // when the file exists and `append` is false.
  JsonlWriter(const std::string& path, bool append);
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;

  void append(const Json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// Every record of a JSONL file; a torn last line (a killed run) is skipped.
std::vector<Json> read_jsonl(const std::string& path);
std::set<std::string> record_keys(const std::string& path);

// Whether a record's times measure the machine's GPU path: one GPU per rank
// (device "cuda", not shared_gpu). CPU runs and ranks sharing a GPU time Gloo
// and host memory, not NVLink (NOTE [ranks sharing a GPU]).
bool speed_is_measured(const Json& record);

// A results file that did not exist: DIR/<name>-<UTC time>.jsonl (name made
// safe for a file name; -2, -3, ... appended when a run of the same second
// took it). Creates DIR.
std::unique_ptr<JsonlWriter> open_new_results_file(const std::string& dir, const std::string& name);

std::string utc_timestamp();

}  // namespace pkb
