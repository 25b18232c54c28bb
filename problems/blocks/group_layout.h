// The process groups of a parallel layout (TP x CP, CP x PP, CP x DP,
// EP x EP-FSDP: 22, 55-57, 74), created once per facade in the published
// order and found again from the group arguments (pkb::GroupRanks).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pkb/check.h"
#include "pkb/collectives.h"
#include "pkb/inputs.h"

namespace pkb::blocks {

// start, start + step, ..., count values: the ranks of one group of a layout.
inline std::vector<int64_t> iota(int64_t start, int64_t step, int64_t count) {
  std::vector<int64_t> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = start + i * step;
  return v;
}

// The groups of a grid of ranks, rank = row·cols + col: every row (`cols`
// consecutive ranks), then every column (`rows` ranks `cols` apart), the
// order the published harnesses create them in; columns_then_rows where a
// harness creates the columns first.
inline std::vector<std::vector<int64_t>> rows_then_columns(int64_t rows, int64_t cols) {
  std::vector<std::vector<int64_t>> groups;
  for (int64_t r = 0; r < rows; ++r) groups.push_back(iota(r * cols, 1, cols));
  for (int64_t c = 0; c < cols; ++c) groups.push_back(iota(c, cols, rows));
  return groups;
}

inline std::vector<std::vector<int64_t>> columns_then_rows(int64_t rows, int64_t cols) {
  std::vector<std::vector<int64_t>> groups;
  for (int64_t c = 0; c < cols; ++c) groups.push_back(iota(c, cols, rows));
  for (int64_t r = 0; r < rows; ++r) groups.push_back(iota(r * cols, 1, cols));
  return groups;
}

class GroupLayout {
 public:
  // `name` says which layout a stray group argument is not part of;
  // `world_is_kworld`: a group of every rank is the world itself (as the
  // published code passes dist.group.WORLD), not a group of the layout.
  GroupLayout(std::string name, bool world_is_kworld) : name_(std::move(name)), world_is_kworld_(world_is_kworld) {}

  // Every rank creates every group of `layout`, in order; once per facade
  // (the published harnesses build them while making the inputs, outside the
  // timed call).
  void build(Collectives& comm, const std::vector<std::vector<int64_t>>& layout) const {
    for (const auto& ranks : layout) {
      auto key = std::make_pair(&comm, ranks);
      if (groups_.count(key) == 0) groups_.emplace(key, comm.new_group(ranks));
    }
  }

  Group resolve(Collectives& comm, const GroupRanks& g) const {
    if (world_is_kworld_ && g.ranks == iota(0, 1, comm.world_size())) return kWorld;
    auto it = groups_.find(std::make_pair(&comm, g.ranks));
    PKB_CHECK(it != groups_.end(), "process group argument is not part of the ", name_, " layout");
    return it->second;
  }

 private:
  std::string name_;
  bool world_is_kworld_;
  mutable std::map<std::pair<const Collectives*, std::vector<int64_t>>, Group> groups_;
};

}  // namespace pkb::blocks
