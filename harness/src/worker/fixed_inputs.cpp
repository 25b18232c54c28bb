#include "worker/fixed_inputs.h"

#include <algorithm>

#include "pkb/check.h"
#include "pkb/fixed_inputs.h"
#include "worker/integrity.h"

namespace pkb {

FixedSet fixed_inputs_of(const Problem& p) {
  auto k = dynamic_cast<const FixedInputs*>(&p);
  if (!k) return {};
  FixedSet s = k->fixed_inputs();
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

bool is_fixed(const FixedSet& fixed, size_t i) { return std::binary_search(fixed.begin(), fixed.end(), i); }

namespace {

// `in` with each tensor argument passed through f(i, tensor).
template <typename F>
Inputs map_tensors(const Inputs& in, F f) {
  Inputs out;
  for (size_t i = 0; i < in.size(); ++i) {
    const Arg& a = in.at(i);
    if (auto t = std::get_if<at::Tensor>(&a.value)) out.add(a.name, f(i, *t));
    else out.add(a.name, a.value);
  }
  return out;
}

}  // namespace

Inputs clone_but_fixed(const Inputs& in, const FixedSet& fixed) {
  if (fixed.empty()) return in.clone();
  return map_tensors(in, [&](size_t i, const at::Tensor& t) {
    return is_fixed(fixed, i) || !t.defined() ? t : t.clone();
  });
}

Inputs without_fixed(const Inputs& in, const FixedSet& fixed) {
  return map_tensors(in, [&](size_t i, const at::Tensor& t) { return is_fixed(fixed, i) ? at::Tensor() : t; });
}

Inputs only_fixed(const Inputs& in, const FixedSet& fixed) {
  return map_tensors(in, [&](size_t i, const at::Tensor& t) { return is_fixed(fixed, i) ? t : at::Tensor(); });
}

Inputs with_arg(const Inputs& in, size_t i, const at::Tensor& value) {
  return map_tensors(in, [&](size_t j, const at::Tensor& t) { return j == i ? value : t; });
}

std::vector<int64_t> fixed_checksums(const Inputs& in, const FixedSet& fixed) {
  std::vector<int64_t> out;
  for (size_t i : fixed) {
    PKB_CHECK(i < in.size() && in.is_tensor(i), "fixed input ", i, " is not a tensor argument");
    for (int64_t v : content_checksum(in.tensor(i))) out.push_back(v);
  }
  return out;
}

std::string fixed_written(const Inputs& in, const FixedSet& fixed, const std::vector<int64_t>& before,
                         const std::vector<int64_t>& after) {
  for (size_t k = 0; k < fixed.size(); ++k)
    for (size_t j = 3 * k; j < 3 * k + 3 && j < before.size() && j < after.size(); ++j)
      if (before[j] != after[j])
        return "the reference wrote input '" + in.at(fixed[k]).name + "' (argument " + std::to_string(fixed[k]) +
               "), which its problem declares fixed (read only; NOTE [fixed inputs])";
  return "";
}

std::string changed_fixed(const Inputs& original, const Inputs& copy, const FixedSet& fixed, const std::string& when) {
  for (size_t i : fixed) {
    if (i >= original.size() || i >= copy.size()) break;
    if (!same_bits(original.tensor(i), copy.tensor(i)))
      return "the candidate changed input '" + original.at(i).name + "' (argument " + std::to_string(i) + ") " +
             when + ", which the reference only reads";
  }
  return "";
}

}  // namespace pkb
