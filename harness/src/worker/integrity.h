// The worker's side of NOTE [integrity trials] (pkb/integrity.h): which
// trials run, the input-mutation check and the in-place refresh.
#pragma once

#include <cstdint>

#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "pkb/inputs.h"

namespace pkb {

struct TrialSpec {
  int index = 0;           // 0 .. published + integrity - 1, in the order run
  bool integrity = false;  // false: a published trial (published inputs exactly)
  int integrity_index = 0; // 0-based among the integrity trials
  const char* kind() const { return integrity ? "integrity" : "published"; }
};

std::vector<TrialSpec> plan_trials(int published, int integrity);

// The integrity indices of the timing draws (NOTE [fresh inputs] in
// worker/timing_fresh.h): past every trial's and the refresh's (1000), an
// offset no candidate sees, then one per draw.
inline constexpr int64_t kTimingDrawBase = int64_t{1} << 29;
inline constexpr uint64_t kTimingDrawSpan = uint64_t{1} << 28;

// A tensor's bytes in row-major order, whatever its strides, as a 1-D uint8
// tensor on its device (a view where it is contiguous).
at::Tensor flat_bytes(const at::Tensor& t);

// Bit for bit (NaN payloads and signed zeros count), in chunks (at::equal
// on a GPU would need a bool per element).
inline constexpr int64_t kSameBitsChunkBytes = int64_t{1} << 28;
bool same_bits(const at::Tensor& a, const at::Tensor& b, int64_t chunk_bytes = kSameBitsChunkBytes);

// Three sums over a tensor's bytes as int32 words (bytes where the size is
// not a multiple of 4), laid out as rows of 4096: of every word, of each
// row's sum weighted by the row, of each column's weighted by the column.
// A write changes one of them unless its changes cancel in all three. It
// checks pkb's own references (NOTE [fixed inputs]), not a candidate: those
// are compared bit for bit.
std::vector<int64_t> content_checksum(const at::Tensor& t);

// Where the reference leaves an input bit-for-bit unchanged and the candidate
// changed it: "the candidate changed input 'tensor' (argument 0), which the
// reference leaves unchanged". Empty when there is none. Inputs the reference
// itself mutates are outputs of the problem and are compared as such.
std::string changed_input(const Inputs& original, const Inputs& after_reference, const Inputs& after_candidate);

// Copies `fresh`'s tensor values into `target`'s storage (same shapes and
// dtypes) and checks its other arguments are equal. False, with the reason,
// when the fresh draw does not fit (shapes that vary with the seed).
bool refresh_in_place(Inputs& target, const Inputs& fresh, std::string* why_not);

}  // namespace pkb
