// Check macros shared by the harness, the problems and the candidates.
//
// Every failure carries file:line, the rank (when known), the failing
// expression and the API's own error text. Inside the harness these are
// exceptions (pkb::Error); at plugin boundaries the harness turns them into
// outcomes with a reason.
#pragma once

#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

namespace pkb {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The rank of this process, or -1 outside a worker. Read from RANK, which the
// launcher sets, so that plugins loaded with dlopen need no harness symbol.
inline int current_rank() {
  const char* r = std::getenv("RANK");
  return r ? std::atoi(r) : -1;
}

namespace detail {
[[noreturn]] inline void throw_check_failure(const char* file, int line, const char* expr,
                                             const std::string& api_text,
                                             const std::string& message) {
  std::ostringstream os;
  os << file << ":" << line;
  if (current_rank() >= 0) os << " [rank " << current_rank() << "]";
  os << " check failed: " << expr;
  if (!api_text.empty()) os << ": " << api_text;
  if (!message.empty()) os << ": " << message;
  throw Error(os.str());
}

inline std::string concat() { return {}; }
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail
}  // namespace pkb

#define PKB_CHECK(cond, ...)                                                              \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      ::pkb::detail::throw_check_failure(__FILE__, __LINE__, #cond, "",                   \
                                         ::pkb::detail::concat(__VA_ARGS__));             \
    }                                                                                     \
  } while (0)

// CUDA runtime calls. Only usable where cuda_runtime.h is included.
#define PKB_CUDA_CHECK(expr)                                                              \
  do {                                                                                    \
    cudaError_t pkb_err_ = (expr);                                                        \
    if (pkb_err_ != cudaSuccess) {                                                        \
      ::pkb::detail::throw_check_failure(                                                 \
          __FILE__, __LINE__, #expr,                                                      \
          std::string(cudaGetErrorName(pkb_err_)) + ": " + cudaGetErrorString(pkb_err_),  \
          "");                                                                            \
    }                                                                                     \
  } while (0)

// NCCL calls. Only usable where nccl.h is included (the harness, never a candidate).
#define PKB_NCCL_CHECK(expr)                                                              \
  do {                                                                                    \
    ncclResult_t pkb_res_ = (expr);                                                       \
    if (pkb_res_ != ncclSuccess) {                                                        \
      ::pkb::detail::throw_check_failure(__FILE__, __LINE__, #expr,                       \
                                         ncclGetErrorString(pkb_res_), "");               \
    }                                                                                     \
  } while (0)
