// A golden fixture (../shared/golden/NN_slug/w{W}_r{rank}_t{T}.safetensors) as
// the harness uses it: the reference's inputs in argument order and its
// recorded outputs.
#pragma once

#include <string>
#include <vector>

#include "pkb/inputs.h"

namespace pkb {

struct GoldenFixture {
  int problem_id = 0;
  int world_size = 0;
  int rank = 0;
  int trial = 0;
  int64_t m = 0, n = 0;
  Inputs inputs;           // flattened in argument order (see pkb/inputs.h)
  Outputs outputs;         // tensor leaves in order
  std::vector<std::string> output_names;
  std::vector<std::string> notes;  // structure the flattening dropped (non-tensor outputs)
};

GoldenFixture load_golden(const std::string& path);
std::string golden_file_name(int world, int rank, int trial = 0);

// The recordings of one (world size, trial) in a fixture folder: one file per
// rank, each named and described (metadata) alike. `problem` lists what is
// wrong when not complete (a rank file missing, metadata that disagrees with
// the name); such a set is reported, never replayed.
struct GoldenSet {
  int world = 0;
  int trial = 0;
  std::vector<std::string> files;  // by rank; empty where missing
  std::string problem;
};

// Every w{W}_r{R}_t{T}.safetensors file under `dir`, grouped by (W, T) in
// that order. World size, rank and trial are read from each file's metadata.
std::vector<GoldenSet> golden_sets(const std::string& dir);

}  // namespace pkb
