// The leaderboard: scores files -> the published per-category table and an
// overall table, as Markdown, CSV, LaTeX or one static HTML page.
//
// The per-category table has one row per category (with its problem count)
// and, per model, `pass@A→B` and `fast1@A→B` as counts (expected problems
// solved, summed over the category) for the smallest and largest k scored,
// then a Total row. Counts print as integers when they are, else with one
// decimal.
#pragma once

#include <string>
#include <vector>

#include "common/results.h"

namespace pkb {

// A count as the published table shows it: "28", or "27.3".
std::string format_count(double x);

// Joins the models of several scores files (a model in two files is an error;
// so are files with different k or p). Throws pkb::Error on a file that is not
// a scores file of this schema.
// `mixed_speed`: accept scores made with pkb score --mixed-speed (refused otherwise).
Json combine_scores(const std::vector<Json>& scores, bool mixed_speed = false);

// `format`: md, csv, tex or html.
std::string render_leaderboard(const Json& scores, const std::string& format);

}  // namespace pkb
