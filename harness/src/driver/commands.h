// The user-facing commands; each returns the process exit code (see outcome.h).
#pragma once

#include <string>

#include "driver/options.h"

namespace pkb {

int cmd_list();
// `pkb list --memory`: declared estimates and measured peaks per rank (NOTE [memory record]).
int cmd_list_memory(const std::vector<std::string>& results);
int cmd_show(const std::string& problem);
int cmd_run(const RunOptions& opts);
int cmd_golden(const GoldenOptions& opts);
int cmd_audit(const AuditOptions& opts);
int cmd_topo();
int cmd_prompt(const PromptOptions& opts);
int cmd_score(const ScoreOptions& opts);
int cmd_leaderboard(const LeaderboardOptions& opts);
int cmd_merge(const MergeOptions& opts);
int cmd_try(const TryOptions& opts);
int cmd_agent(const AgentOptions& opts);
int cmd_calibrate(const CalibrateOptions& opts);
int cmd_generate(const GenerateOptions& opts);

}  // namespace pkb
