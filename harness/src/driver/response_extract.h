// Raw model responses (.md / .txt) as candidates: the candidate is the last
// fenced code block labelled cuda, cu, cpp, c++ or cxx. Earlier blocks are
// usually drafts the model then corrected; unlabelled blocks are usually
// shell commands or output, not the kernel.
#pragma once

#include <optional>
#include <string>

namespace pkb {

struct ExtractedCode {
  std::string code;
  std::string language;  // as labelled, lower case
};

std::optional<ExtractedCode> extract_candidate(const std::string& response);
bool is_response_file(const std::string& path);  // .md or .txt

}  // namespace pkb
