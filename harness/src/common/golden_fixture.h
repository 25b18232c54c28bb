// A golden fixture (../shared/golden/NN_slug/w{W}_r{rank}_t0.safetensors) as
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
  int64_t m = 0, n = 0;
  Inputs inputs;           // flattened in argument order (see pkb/inputs.h)
  Outputs outputs;         // tensor leaves in order
  std::vector<std::string> output_names;
  std::vector<std::string> notes;  // structure the flattening dropped (non-tensor outputs)
};

GoldenFixture load_golden(const std::string& path);
std::string golden_file_name(int world, int rank, int trial = 0);

}  // namespace pkb
