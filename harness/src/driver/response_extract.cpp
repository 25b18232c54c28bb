#include "driver/response_extract.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace pkb {

namespace {

bool is_fence(const std::string& line, std::string* info) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos || line.size() - i < 3) return false;
  char c = line[i];
  if ((c != '`' && c != '~') || line.compare(i, 3, std::string(3, c)) != 0) return false;
  size_t j = i;
  while (j < line.size() && line[j] == c) ++j;
  std::string rest = line.substr(j);
  rest.erase(0, rest.find_first_not_of(" \t"));
  std::string word = rest.substr(0, rest.find_first_of(" \t{"));
  std::transform(word.begin(), word.end(), word.begin(), [](unsigned char ch) { return std::tolower(ch); });
  *info = word;
  return true;
}

bool is_code_language(const std::string& lang) {
  return lang == "cuda" || lang == "cu" || lang == "cpp" || lang == "c++" || lang == "cxx";
}

}  // namespace

std::optional<ExtractedCode> extract_candidate(const std::string& response) {
  std::istringstream in(response);
  std::string line, info;
  std::optional<ExtractedCode> last;
  bool inside = false;
  ExtractedCode cur;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!inside) {
      if (is_fence(line, &info)) {
        inside = true;
        cur = {"", info};
      }
      continue;
    }
    std::string closing;
    if (is_fence(line, &closing) && closing.empty()) {
      inside = false;
      if (is_code_language(cur.language)) last = cur;
      continue;
    }
    cur.code += line + "\n";
  }
  return last;  // an unterminated block (a truncated response) does not count
}

bool is_response_file(const std::string& path) {
  size_t dot = path.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = path.substr(dot);
  return ext == ".md" || ext == ".txt";
}

}  // namespace pkb
