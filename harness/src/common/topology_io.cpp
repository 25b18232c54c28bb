#include "common/topology_io.h"

#include <fstream>

#include "pkb/check.h"

namespace pkb {

Topology topology_from_json(const Json& j) {
  Topology t;
  t.name = j.value("name", "");
  t.gpu = j.value("gpu", "");
  t.gpus = j.value("gpus", 0);
  t.p2p = j.value("p2p", false);
  t.multicast = j.value("multicast", false);
  t.nvlink_bw_per_dir = j.value("nvlink_bw_per_dir", 0.0);
  t.hbm_bw = j.value("hbm_bw", 0.0);
  t.peak_bf16_flops = j.value("peak_bf16_flops", 0.0);
  return t;
}

Json to_json(const Topology& t) {
  return Json{{"name", t.name},
              {"gpu", t.gpu},
              {"gpus", t.gpus},
              {"p2p", t.p2p},
              {"multicast", t.multicast},
              {"nvlink_bw_per_dir", t.nvlink_bw_per_dir},
              {"hbm_bw", t.hbm_bw},
              {"peak_bf16_flops", t.peak_bf16_flops}};
}

Topology load_topology(const std::string& name_or_path, const std::string& source_dir) {
  std::string path = name_or_path;
  if (path.find('/') == std::string::npos && path.find(".json") == std::string::npos)
    path = source_dir + "/topology/" + name_or_path + ".json";
  std::ifstream f(path);
  PKB_CHECK(f.good(), "no topology file '", path, "'");
  Json j = Json::parse(f, nullptr, false);
  PKB_CHECK(!j.is_discarded(), "topology file '", path, "' is not valid JSON");
  return topology_from_json(j);
}

Topology cpu_topology() {
  Topology t;
  t.name = "cpu";
  return t;
}

Roofline roofline(const Cost& c, const Topology& t) {
  Roofline r;
  auto term = [&](double amount, double rate, const char* name) {
    if (rate <= 0 || amount <= 0) return;
    double us = amount / rate * 1e6;
    if (!r.valid || us > r.t_roof_us) {
      r.t_roof_us = us;
      r.bound = name;
    }
    r.valid = true;
  };
  term(c.nvlink_bytes_per_rank, t.nvlink_bw_per_dir, "nvlink");
  term(c.hbm_bytes_per_rank, t.hbm_bw, "hbm");
  term(c.flops_per_rank, t.peak_bf16_flops, "compute");
  return r;
}

}  // namespace pkb
