// What a person reads: one progress line per finished evaluation on stderr,
// and a Markdown summary table on stdout at the end.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/results.h"

namespace pkb {

class Progress {
 public:
  explicit Progress(int total) : total_(total), t0_(std::chrono::steady_clock::now()) {}
  // "[12/87] 12_allgather_gemm  correct  1.84x  0.41 roof  ETA 3:12"
  void finished(const Json& record);
  void note(const std::string& line);

 private:
  int total_, done_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

std::string summary_markdown(const std::vector<Json>& records, const std::vector<std::string>& skipped);
std::string format_us(double us);

}  // namespace pkb
