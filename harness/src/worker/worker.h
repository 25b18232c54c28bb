// `pkb worker JOB.json`: one rank of one evaluation (or one golden replay).
// The launcher starts one per rank with RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR and MASTER_PORT set; each writes RESULT_DIR/rank_<r>.json.
#pragma once

#include <string>

#include "common/exit_codes.h"  // what worker_main returns

namespace pkb {

int worker_main(const std::string& job_path);

}  // namespace pkb
