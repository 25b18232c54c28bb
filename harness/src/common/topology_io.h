// Machine descriptions (topology/*.json) and the roofline they give.
#pragma once

#include <string>

#include "common/results.h"
#include "pkb/context.h"
#include "pkb/problem.h"

namespace pkb {

// `name_or_path`: a file path, or a name looked up as <source>/topology/NAME.json.
Topology load_topology(const std::string& name_or_path, const std::string& source_dir);
Topology cpu_topology();
Json to_json(const Topology& t);
Topology topology_from_json(const Json& j);

// NOTE [roofline]
// T_roof = max(flops / peak_bf16_flops, hbm_bytes / hbm_bw,
//              nvlink_bytes / nvlink_bw_per_dir), per rank, from the problem's
// cost model and the topology; a measured time t reads T_roof / t (1.0 is the
// hardware's limit). Terms whose rate the topology lacks are left out; with
// none left (CPU mode) there is no roofline.
struct Roofline {
  bool valid = false;
  double t_roof_us = 0;
  std::string bound;  // "nvlink", "hbm" or "compute"
};
Roofline roofline(const Cost& cost, const Topology& topo);

}  // namespace pkb
