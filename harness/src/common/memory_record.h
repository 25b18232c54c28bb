// The "memory" of a result record: each rank's measured peaks (NOTE [memory
// record], worker/memory_probe.h) and the evaluation's cgroup (NOTE [OOM
// kills], driver/memory_cgroup.h), merged for the record and read back by
// the summary, `pkb list --memory` and the admission (driver/memory_admission.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/results.h"

namespace pkb {

// "4.02 GiB", "512 MiB", "12 KiB".
std::string format_bytes(int64_t bytes);

// The record's "memory": per side, the largest over ranks (a side two
// processes of one rank both report, once the candidate has a process of its
// own, also takes the larger); the largest rank peak; each rank's own
// record; and `eval` (cgroup peak, limit, OOM kills) merged in.
Json memory_summary(const std::vector<Json>& rank_results, const Json& eval);

// The largest resident peak of one rank in a record (-1: none recorded).
int64_t record_host_peak_bytes(const Json& record);
// The largest device (caching allocator, reserved) peak of one rank (-1: none).
int64_t record_device_peak_bytes(const Json& record);

}  // namespace pkb
