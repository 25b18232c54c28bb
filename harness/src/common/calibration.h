// Calibrated topologies: what `pkb calibrate` measured on this machine, as a
// topology file beside the datasheet ones, and the second roofline that
// records carry when such a file exists.
//
// NOTE [calibrated roofline]
// The datasheet topology (topology/NAME.json) gives the hardware's nominal
// rates; `pkb calibrate` measures the rates this machine achieves (NVLink per
// direction by SM loads, SM stores and the copy engine; HBM by a copy kernel;
// dense bf16 GEMM by at::matmul) and writes topology/NAME.calibrated.json:
// the same keys a topology file has (so --topology accepts it too), plus
// "calibrated": true, each rate's source ("measured", or "datasheet" with the
// reason, e.g. NVLink with one GPU), method and raw numbers, the launch and
// barrier latencies, and provenance. `pkb run` records keep `roofline` (from
// the datasheet, unchanged) and add `roofline.calibrated` with the same
// fields, computed from the same cost with the calibrated rates. A calibrated
// file is chosen by --calibrated FILE, or else the one in topology/ whose GPU
// name and count match the detected machine; `--calibrated none` turns it off.
// Datasheet matching (match_topology) never picks a calibrated file.
#pragma once

#include <string>
#include <vector>

#include "common/results.h"
#include "common/topology_detect.h"
#include "common/topology_io.h"

namespace pkb {

inline constexpr int kCalibrationFormatVersion = 1;
inline constexpr const char* kCalibratedSuffix = ".calibrated";

// Whether a topology name (file name without .json) is a calibrated one.
bool is_calibrated_name(const std::string& name);

// The datasheet file a calibration compares against: the (non-calibrated)
// topology/*.json whose GPU name and count match (`exact`), else the first
// whose GPU name matches (rates are per GPU, so they still apply).
struct DatasheetChoice {
  bool found = false;
  bool exact = false;
  std::string name;
  Topology topo;
};
DatasheetChoice datasheet_for(const std::string& gpu, int count, const std::string& source_dir);

// The calibrated file's default name (without .json): "<datasheet>.calibrated"
// for an exact datasheet match, else "<gpu slug>_<count>.calibrated"
// (e.g. "nvidia_h200_1.calibrated").
std::string calibrated_name(const std::string& gpu, int count, const DatasheetChoice& ds);

// Merges the ranks' measurements (each rank's "calibration" object, rank
// order) into a calibrated topology file. Rates are medians over GPUs (and,
// for NVLink, over peers); a rate that could not be measured takes the
// datasheet's value with the reason, or 0 (no roofline term) without one.
struct CalibrationInput {
  std::string name;          // the "name" field
  std::string gpu;           // detected GPU name
  int gpus = 0;              // GPUs calibrated (one rank each)
  bool p2p = false;          // every pair peer-accessible (NVML)
  DatasheetChoice datasheet;
  std::vector<Json> ranks;
  Json provenance = Json::object();
};
Json make_calibrated_topology(const CalibrationInput& in);

// The calibrated topology `pkb run` uses besides the datasheet one.
struct CalibratedChoice {
  bool valid = false;
  Topology topo;
  std::string path;
  Json nvlink_source;  // "measured" or "datasheet" (from the file)
};
// A file given by path, or a name under <source>/topology/; throws pkb::Error
// when it is missing or is not a calibrated topology.
CalibratedChoice load_calibrated(const std::string& name_or_path, const std::string& source_dir);
// The topology/*.calibrated.json whose GPU name and count match; invalid when none.
CalibratedChoice find_calibrated(const std::string& gpu, int count, const std::string& source_dir);
// `pkb run --calibrated OPTION`: "" automatic (cuda only: find_calibrated for
// the detected machine), "none" off, else load_calibrated(OPTION).
CalibratedChoice choose_calibrated(const std::string& option, const std::string& device,
                                   const std::string& source_dir);

// Adds record["roofline"]["calibrated"] from record["cost"] and
// record["times"] (medians) when `c` is valid and the record has times;
// record["roofline"]'s other fields are left as they are.
void add_calibrated_roofline(Json& record, const CalibratedChoice& c);

// The table `pkb calibrate` prints: each rate against the datasheet, with its
// source, then the launch and barrier latencies.
std::string calibration_summary(const Json& calibrated_topology);

double median_of(std::vector<double> v);
// The same of values already in ascending order (no copy, no sort).
double median_of_sorted(const std::vector<double>& v);

}  // namespace pkb
