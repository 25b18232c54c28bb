// See NOTE [paired rounds] in speedup.h.
#include "driver/speedup.h"

#include <algorithm>

#include "common/calibration.h"

namespace pkb {

bool slowest_per_round(const Json& timing, const char* side, std::vector<double>* rounds) {
  if (!timing.contains("round_medians_us") || !timing["round_medians_us"].contains(side)) return false;
  const Json& m = timing["round_medians_us"][side];
  if (!m.is_array() || m.empty()) return false;
  if (rounds->empty()) rounds->assign(m.size(), 0.0);
  if (rounds->size() != m.size()) return false;
  for (size_t i = 0; i < m.size(); ++i) {
    if (!m[i].is_number()) return false;
    (*rounds)[i] = std::max((*rounds)[i], m[i].get<double>());
  }
  return true;
}

double paired_speedup(const std::vector<double>& ref, const std::vector<double>& cand) {
  if (ref.size() != cand.size()) return 0;
  std::vector<double> ratios;
  for (size_t i = 0; i < ref.size(); ++i)
    if (ref[i] > 0 && cand[i] > 0) ratios.push_back(ref[i] / cand[i]);
  return median_of(ratios);
}

}  // namespace pkb
