// Files the driver and the workers read and write whole: written atomically,
// never replaced by accident (NOTE [result files]).
#pragma once

#include <optional>
#include <string>

namespace pkb {

bool file_exists(const std::string& path);
bool is_regular_file(const std::string& path);
bool is_directory(const std::string& path);
// A directory holding nothing (false when `path` is absent or not a directory).
bool is_empty_directory(const std::string& path);

// mkdir -p (0755); what already exists is left as it is. Errors surface at the
// first write into the folder, which names the path.
void make_dirs(const std::string& path);

// A file's bytes; nullopt when it cannot be opened.
std::optional<std::string> read_if_present(const std::string& path);
// The same, where a file that cannot be opened is an error naming the path.
std::string read_file(const std::string& path);

// Writes `text` to a temporary file beside `path`, then puts it in place:
// renamed over `path` when `overwrite`, otherwise linked to it, so that of two
// writers racing for a new path exactly one wins and the other gets "refusing
// to overwrite" (a check and then a rename would let both write, the second
// replacing the first). The temporary file never stays behind.
void write_file_atomic(const std::string& path, const std::string& text, bool overwrite);

}  // namespace pkb
