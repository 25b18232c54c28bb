// `pkb topo`: the machine as detected (NVML), the topology file that matches
// it (used for the roofline), and the topology files this source tree has.
#include <cstdio>

#include "common/build_info.h"
#include "common/calibration.h"
#include "common/outcome.h"
#include "common/topology_detect.h"
#include "common/topology_io.h"
#include "driver/commands.h"

namespace pkb {

int cmd_topo() {
  DetectedMachine m = detect_machine();
  if (!m.ok) {
    std::printf("no GPU detected: %s\n", m.why_not.c_str());
  } else {
    std::printf("%zu GPU(s); every pair peer-accessible (P2P read): %s\n", m.gpus.size(),
                m.all_pairs_p2p ? "yes" : "no");
    for (size_t i = 0; i < m.gpus.size(); ++i)
      std::printf("  GPU %zu: %s, %d active NVLink link(s)\n", i, m.gpus[i].c_str(), m.nvlink_links[i]);
  }
  std::string match = match_topology(m, source_dir());
  if (!match.empty()) {
    Topology t = load_topology(match, source_dir());
    std::printf("topology: %s (NVLink %.1f GB/s per direction, HBM %.2f TB/s, bf16 %.0f TFLOP/s per GPU; multicast %s)\n",
                match.c_str(), t.nvlink_bw_per_dir / 1e9, t.hbm_bw / 1e12, t.peak_bf16_flops / 1e12,
                t.multicast ? "yes" : "no");
  } else if (m.ok) {
    std::printf("topology: no topology/*.json matches this machine; runs get no roofline "
                "(add one, or pass --topology)\n");
  }
  if (m.ok) {
    CalibratedChoice c = find_calibrated(m.gpus[0], static_cast<int>(m.gpus.size()), source_dir());
    if (c.valid)
      std::printf("calibrated: %s (NVLink %.1f GB/s [%s], HBM %.2f TB/s, bf16 %.0f TFLOP/s): records also carry "
                  "roofline.calibrated\n",
                  c.path.c_str(), c.topo.nvlink_bw_per_dir / 1e9, c.nvlink_source.get<std::string>().c_str(),
                  c.topo.hbm_bw / 1e12, c.topo.peak_bf16_flops / 1e12);
    else
      std::printf("calibrated: none for this machine (`pkb calibrate` writes one)\n");
  }
  std::printf("\n%s\n", to_json(m).dump(2).c_str());
  return kExitAllCorrect;
}

}  // namespace pkb
