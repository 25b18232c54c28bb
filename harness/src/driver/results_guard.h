// The results file as only the driver writes it (NOTE [untrusted candidates]
// in containment.h): a copy of what the driver wrote, checked after every
// evaluation, and the marker of the evaluation in flight for --resume.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/results.h"

namespace pkb {

class ResultsGuard {
 public:
  // `path` is open in `writer` (appending); the file's current content is
  // what the driver vouches for.
  ResultsGuard(const std::string& path, JsonlWriter* writer);

  // After the driver appended `record` (one line).
  void appended(const Json& record);
  // True when the file is as the driver left it; otherwise rewrites it from
  // the driver's copy, reopens `writer`'s file and returns false.
  bool check_and_repair(std::unique_ptr<JsonlWriter>& writer);

  // <out>.inflight: the record (base fields) of the evaluation in flight;
  // removed when its record is written. Left behind by a driver that died.
  void begin(const Json& base_record);
  void end();
  static std::string inflight_path(const std::string& out) { return out + ".inflight"; }

 private:
  void remember();  // inode, size, ctime of the file now
  std::string path_;
  std::string content_;
  ino_t ino_ = 0;
  off_t size_ = 0;
  long ctime_s_ = 0, ctime_ns_ = 0;
};

}  // namespace pkb
