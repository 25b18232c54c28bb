// An exception's message for a reason or a log line: c10::Error's what()
// carries a C++ backtrace that buries the message.
#pragma once

#include <c10/util/Exception.h>

#include <exception>
#include <string>

namespace pkb {

inline std::string error_text(const std::exception& e) {
  if (auto c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

}  // namespace pkb
