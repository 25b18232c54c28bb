#include "common/memory_record.h"

#include <algorithm>
#include <cstdio>

namespace pkb {

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(std::max<int64_t>(0, bytes));
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u >= 3 ? "%.2f %s" : "%.0f %s", v, units[u]);
  return buf;
}

namespace {

void keep_max(Json& into, const std::string& key, const Json& v) {
  if (!v.is_number_integer()) return;
  if (!into.contains(key) || into[key].get<int64_t>() < v.get<int64_t>()) into[key] = v;
}

}  // namespace

Json memory_summary(const std::vector<Json>& rank_results, const Json& eval) {
  Json m = Json::object();
  Json sides = Json::object();
  Json ranks = Json::array();
  for (const auto& rj : rank_results) {
    if (!rj.contains("memory") || !rj["memory"].is_object()) continue;
    const Json& rm = rj["memory"];
    Json one = rm;
    one["rank"] = rj.value("rank", -1);
    ranks.push_back(one);
    for (const char* k : {"host_peak_bytes", "device_reserved_peak_bytes", "device_used_max_bytes"})
      if (rm.contains(k)) keep_max(m, k, rm[k]);
    if (rm.contains("device_free_at_start_bytes")) {
      // The least any rank found free: what the GPU offered this evaluation.
      const Json& f = rm["device_free_at_start_bytes"];
      if (!m.contains("device_free_at_start_bytes") || m["device_free_at_start_bytes"].get<int64_t>() > f.get<int64_t>())
        m["device_free_at_start_bytes"] = f;
      m["device_total_bytes"] = rm.value("device_total_bytes", int64_t{0});
    }
    const Json rank_sides = rm.value("sides", Json::object());  // items() of a temporary would dangle
    for (const auto& [side, s] : rank_sides.items()) {
      if (!sides.contains(side)) sides[side] = Json::object();
      for (const auto& [k, v] : s.items()) keep_max(sides[side], k, v);
    }
  }
  m["sides"] = sides;
  if (eval.is_object())
    for (const auto& [k, v] : eval.items()) m[k] = v;
  m["ranks"] = ranks;
  return m;
}

int64_t record_host_peak_bytes(const Json& r) {
  if (!r.contains("memory") || !r["memory"].is_object()) return -1;
  return r["memory"].value("host_peak_bytes", int64_t{-1});
}

int64_t record_device_peak_bytes(const Json& r) {
  if (!r.contains("memory") || !r["memory"].is_object()) return -1;
  return r["memory"].value("device_reserved_peak_bytes", int64_t{-1});
}

}  // namespace pkb
