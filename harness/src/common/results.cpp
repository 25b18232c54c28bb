#include "common/results.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>

#include "common/files.h"
#include "pkb/check.h"

namespace pkb {

std::string record_key(const Json& r) {
  return r.value("solutions", std::string("?")) + "|" + std::to_string(r.value("problem_id", 0)) + "|" +
         std::to_string(r.value("sample", 0)) + "|" + std::to_string(r.value("world_size", 0)) + "|" +
         r.value("device", std::string("?")) +
         // pkb agent: one record per step of a trajectory.
         (r.contains("step") ? "|step" + std::to_string(r.value("step", 0)) : std::string());
}

JsonlWriter::JsonlWriter(const std::string& path, bool append) : path_(path) {
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
  if (!append) flags |= O_EXCL;
  fd_ = open(path.c_str(), flags, 0644);
  PKB_CHECK(fd_ >= 0, "cannot open results file '", path, "': ", strerror(errno),
            errno == EEXIST ? " (pass --resume to continue it, or choose another --out)" : "");
}

JsonlWriter::~JsonlWriter() {
  if (fd_ >= 0) close(fd_);
}

void JsonlWriter::append(const Json& record) {
  std::string line = record.dump() + "\n";
  ssize_t n = write(fd_, line.data(), line.size());
  PKB_CHECK(n == static_cast<ssize_t>(line.size()), "short write to '", path_, "': ", strerror(errno));
  fsync(fd_);
}

std::vector<Json> read_jsonl(const std::string& path) {
  std::ifstream f(path);
  PKB_CHECK(f.good(), "cannot read '", path, "'");
  std::vector<Json> out;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) continue;
    out.push_back(std::move(j));
  }
  return out;
}

std::set<std::string> record_keys(const std::string& path) {
  std::set<std::string> keys;
  if (!file_exists(path)) return keys;
  for (const auto& r : read_jsonl(path)) keys.insert(record_key(r));
  return keys;
}

bool speed_is_measured(const Json& record) {
  return record.value("device", std::string()) == "cuda" && !record.value("shared_gpu", false);
}

std::unique_ptr<JsonlWriter> open_new_results_file(const std::string& dir, const std::string& name) {
  mkdir(dir.c_str(), 0755);
  std::string safe;
  for (char c : name) safe += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ? c : '_';
  if (safe.empty() || safe[0] == '.') safe = "run" + safe;
  std::string stamp = utc_timestamp();  // 2026-12-01T08:30:00Z -> 20261201T083000Z
  stamp.erase(std::remove_if(stamp.begin(), stamp.end(), [](char c) { return c == '-' || c == ':'; }), stamp.end());
  const std::string stem = dir + "/" + safe + "-" + stamp;
  for (int k = 1;; ++k) {
    std::string path = stem + (k == 1 ? "" : "-" + std::to_string(k)) + ".jsonl";
    if (file_exists(path)) continue;
    try {
      return std::make_unique<JsonlWriter>(path, /*append=*/false);  // O_EXCL: a racing run gets the next name
    } catch (const Error&) {
      if (!file_exists(path) || k > 1000) throw;
    }
  }
}

std::string utc_timestamp() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace pkb
