// The argument list of a problem: an ordered list mirroring the published
// reference's `solution()` arguments (nested lists flattened in order, a module
// as its weight then bias, scalars as typed scalars, a process group as the
// list of its ranks). This order is the contract with the golden fixtures and
// with every candidate.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "pkb/check.h"

namespace pkb {

// The ranks of a process group argument, in group-rank order.
struct GroupRanks {
  std::vector<int64_t> ranks;
};

struct None {};

using ArgValue =
    std::variant<at::Tensor, int64_t, double, bool, std::string, c10::ScalarType, GroupRanks, None>;

struct Arg {
  std::string name;  // e.g. "tensor", "dst"; the golden path ("input.0") when replayed
  ArgValue value;
};

class Inputs {
 public:
  Inputs() = default;
  explicit Inputs(std::vector<Arg> args) : args_(std::move(args)) {}
  // So a make_inputs can return its list as it reads: return {{"x", x}, {"eps", 1e-5}};
  // the braces evaluate in order, so draws written inside them keep their RNG order.
  Inputs(std::initializer_list<Arg> args) : args_(args) {}

  void add(std::string name, ArgValue value) { args_.push_back({std::move(name), std::move(value)}); }

  size_t size() const { return args_.size(); }
  const Arg& at(size_t i) const {
    PKB_CHECK(i < args_.size(), "input index ", i, " out of range (", args_.size(), " inputs)");
    return args_[i];
  }
  const std::vector<Arg>& args() const { return args_; }
  std::vector<Arg>& args() { return args_; }

  const at::Tensor& tensor(size_t i) const { return get<at::Tensor>(i, "tensor"); }
  int64_t integer(size_t i) const { return get<int64_t>(i, "int"); }
  double real(size_t i) const { return get<double>(i, "float"); }
  bool boolean(size_t i) const { return get<bool>(i, "bool"); }
  const std::string& str(size_t i) const { return get<std::string>(i, "str"); }
  c10::ScalarType dtype(size_t i) const { return get<c10::ScalarType>(i, "dtype"); }
  const GroupRanks& group(size_t i) const { return get<GroupRanks>(i, "group"); }
  bool is_tensor(size_t i) const { return std::holds_alternative<at::Tensor>(at(i).value); }
  // The first N arguments, each a tensor, for one structured binding:
  //   const auto [x, w] = in.tensors<2>();
  // (handles that share storage with the inputs, not copies of the data).
  template <size_t N>
  std::array<at::Tensor, N> tensors() const {
    std::array<at::Tensor, N> out;
    for (size_t i = 0; i < N; ++i) out[i] = tensor(i);
    return out;
  }

  // A deep copy: every tensor cloned (strides preserved), scalars copied.
  Inputs clone() const {
    Inputs out;
    for (const auto& a : args_) {
      if (auto t = std::get_if<at::Tensor>(&a.value)) {
        out.add(a.name, t->defined() ? t->clone(at::MemoryFormat::Preserve) : *t);
      } else {
        out.add(a.name, a.value);
      }
    }
    return out;
  }

 private:
  template <typename T>
  const T& get(size_t i, const char* kind) const {
    const Arg& a = at(i);
    const T* v = std::get_if<T>(&a.value);
    PKB_CHECK(v != nullptr, "input ", i, " ('", a.name, "') is not a ", kind);
    return *v;
  }

  std::vector<Arg> args_;
};

using Outputs = std::vector<at::Tensor>;

}  // namespace pkb
