// Problem selections as users type them: "all", "1-8", "3,5,12", "allreduce",
// "12_allgather_gemm", or any comma-separated mix; a token prefixed with '!'
// removes what it names ("all,!15", "1-30,!20-25").
#pragma once

#include <string>
#include <vector>

namespace pkb {

struct ProblemName {
  int id;
  std::string slug;
};

// Returns the selected ids in ascending order, without duplicates. Throws
// pkb::Error naming the offending token when it matches no problem.
std::vector<int> parse_selection(const std::string& text, const std::vector<ProblemName>& known);

// "MxN" -> {M, N}; throws pkb::Error on anything else.
std::pair<long, long> parse_shape(const std::string& text);

// "i/N" -> {i, N} with 0 <= i < N.
std::pair<int, int> parse_shard(const std::string& text);

}  // namespace pkb
