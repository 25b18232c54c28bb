// The verdict of one evaluation: what a model (or a person) reads after an
// attempt, made from the evaluation's result record (`pkb try`, and the
// verdict files of `pkb agent`). README "Trying one candidate" documents the
// JSON fields; tests/e2e/golden/try_*.json pin them.
//
// NOTE [verdicts]
// A verdict says what went wrong in the fewest lines that still let the
// author fix it: the outcome and its reason; compiler diagnostics with the
// error blocks first and file:line kept (naming the candidate's file, not the
// build cache's copy); for each rank and trial that failed, the first output
// that differs (index, expected, got, max errors); and for a correct
// candidate, the times, speedup, roofline fraction and mechanisms. It never
// shows the reference's outputs beyond that one element.
#pragma once

#include <string>

#include "common/results.h"

namespace pkb {

inline constexpr int kVerdictSchemaVersion = 1;

// Compiler output cut to what matters: error diagnostics (with their source
// excerpts, notes and "In file included from" context) before warnings, at
// most `max_lines` lines, and a last line counting what was left out.
std::string trim_diagnostics(const std::string& log, size_t max_lines = 60);

// The verdict object of a result record (README: the --json fields).
Json make_verdict(const Json& record);

// The verdict as text for a model to read.
std::string verdict_text(const Json& verdict);

}  // namespace pkb
