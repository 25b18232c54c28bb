// The published harnesses round sizes up to a multiple (of the world, of a
// block) so that every rank gets an equal part: 15, 47, 48, 59, 62, 64, 67,
// 68 and vocab_parallel.h.
#pragma once

#include <cstdint>

namespace pkb::blocks {

inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

}  // namespace pkb::blocks
