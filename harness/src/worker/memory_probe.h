// A rank's memory, measured (issue 26 item 1).
//
// NOTE [memory record]
// Each rank's result carries "memory": the peak of this process's resident
// set (VmHWM of /proc/self/status; ru_maxrss where it cannot be read) and, on
// a GPU, the caching allocator's peak (allocated and reserved bytes) and what
// cudaMemGetInfo said at the start (free, total: ranks sharing a GPU see each
// other there). A rank's life is cut into intervals, each charged to one
// side: "harness" (set-up, input draws and clones, comparisons), "candidate"
// (its calls), "reference" (its clones and calls), "timing" (both sides
// alternate; not split, a probe per call would disturb the times). At each
// enter() the peaks since the last one go to the side that was running
// (whatever way it ended, a throw included) and are reset
// (/proc/self/clear_refs "5" resets VmHWM; resetPeakStats the allocator's),
// so a side's peak is the largest footprint of the process while that side
// ran: what the kernel would have had to find, the other side's resident
// memory included. "grow_bytes" is the most the process grew in one of the
// side's intervals (the side's own allocations, roughly). Where VmHWM cannot
// be reset ("peaks_reset": false), every side's peak is the process's peak so
// far. After each candidate interval the probe publishes (publisher, the
// store key pkb/memory/<rank>) how much more the process holds resident than
// before the candidate's first call: what its calls left behind, which the
// driver reads when an OOM kill hits a harness phase later (NOTE [OOM
// kills]). A process records only the sides it ran: once the candidate runs in a
// process of its own, each process writes its sides and the driver merges
// them by side (merge_memory). The record is informative: no verdict reads
// it, and a candidate in the same process can disturb it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>

#include "common/results.h"

namespace pkb {

class MemoryProbe {
 public:
  // Reads cudaMemGetInfo at once on a CUDA device; "harness" runs first.
  explicit MemoryProbe(at::Device device);
  // Ends the running side's interval (its peaks are charged to it and reset)
  // and starts `side`'s.
  void enter(const std::string& side);
  // Receives "<retained bytes>" after each candidate interval.
  void set_publisher(std::function<void(const std::string&)> publish) { publish_ = std::move(publish); }
  // Ends the last interval; the rank result's "memory".
  Json finish() {
    enter("harness");
    return record_;
  }

 private:
  void charge(const std::string& side);
  at::Device device_;
  std::string side_ = "harness";
  Json record_;
  int64_t interval_start_rss_ = 0;
  int64_t before_candidate_rss_ = -1;  // at the start of the candidate's first interval
  std::function<void(const std::string&)> publish_;
  bool reset_ok_ = true;
};

// This process's resident set now and its high-water mark (bytes; -1 when
// unreadable).
int64_t current_rss_bytes();
int64_t peak_rss_bytes();

}  // namespace pkb
