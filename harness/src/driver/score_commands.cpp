// pkb score, pkb leaderboard, pkb merge: the offline commands that turn
// results files into scores and tables (DESIGN.md §6, §9).
#include <iostream>

#include <pkb/check.h>

#include "common/files.h"
#include "common/outcome.h"
#include "common/results.h"
#include "driver/commands.h"
#include "scores/leaderboard.h"
#include "scores/merge.h"
#include "scores/scoring.h"

namespace pkb {

namespace {

Json read_json_file(const std::string& path) {
  Json j = Json::parse(read_file(path), nullptr, /*allow_exceptions=*/false);
  PKB_CHECK(!j.is_discarded(), "'", path, "' is not JSON");
  return j;
}

// Refuses an existing --out before any work, so a long run never ends in it.
void check_out_is_new(const std::string& out) {
  PKB_CHECK(out.empty() || !file_exists(out), "refusing to overwrite existing file '", out, "'");
}

void emit(const std::string& out, const std::string& text) {
  if (out.empty()) {
    std::cout << text << std::flush;
  } else {
    write_file_atomic(out, text, /*overwrite=*/false);
  }
}

}  // namespace

int cmd_score(const ScoreOptions& opts) {
  check_out_is_new(opts.out);
  std::vector<Json> records;
  for (const auto& path : opts.inputs) {
    PKB_CHECK(file_exists(path), "no such results file '", path, "'");
    for (auto& r : read_jsonl(path)) records.push_back(std::move(r));
  }
  ScoreSettings settings;
  settings.k = opts.k;
  settings.p = opts.p;
  settings.mixed_speed = opts.mixed_speed;
  std::vector<std::string> warnings;
  const Json scores = make_scores(records, opts.inputs, settings, &warnings);
  for (const auto& w : warnings) std::cerr << "warning: " << w << "\n";
  if (scores["models"].empty()) std::cerr << "warning: no evaluation records in the inputs\n";
  emit(opts.out, scores.dump(2) + "\n");
  if (!opts.out.empty()) {
    std::cerr << "scored " << scores["models"].size() << " model(s) into " << opts.out << "\n";
  }
  return kExitAllCorrect;
}

int cmd_leaderboard(const LeaderboardOptions& opts) {
  check_out_is_new(opts.out);
  std::vector<Json> files;
  for (const auto& path : opts.inputs) files.push_back(read_json_file(path));
  emit(opts.out, render_leaderboard(combine_scores(files, opts.mixed_speed), opts.format));
  return kExitAllCorrect;
}

int cmd_merge(const MergeOptions& opts) {
  check_out_is_new(opts.out);
  const std::vector<Json> records = merge_results(opts.inputs);
  write_file_atomic(opts.out, to_jsonl(records), /*overwrite=*/false);
  std::cerr << "merged " << records.size() << " record(s) from " << opts.inputs.size() << " file(s) into " << opts.out
            << "\n";
  return kExitAllCorrect;
}

}  // namespace pkb
