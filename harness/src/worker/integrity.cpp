#include "worker/integrity.h"

#include <variant>

namespace pkb {

std::vector<TrialSpec> plan_trials(int published, int integrity) {
  std::vector<TrialSpec> out;
  for (int t = 0; t < published; ++t) out.push_back({t, false, 0});
  for (int k = 0; k < integrity; ++k) out.push_back({published + k, true, k});
  return out;
}

namespace {

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  if (a.numel() == 0) return true;
  // Bitwise, so NaN payloads and signed zeros count too.
  at::Tensor x = a.contiguous().reshape({-1}).view(at::kByte), y = b.contiguous().reshape({-1}).view(at::kByte);
  return at::equal(x, y);
}

}  // namespace

std::string changed_input(const Inputs& original, const Inputs& after_reference, const Inputs& after_candidate) {
  for (size_t i = 0; i < original.size(); ++i) {
    if (!original.is_tensor(i)) continue;
    if (i >= after_reference.size() || i >= after_candidate.size()) break;
    const at::Tensor& o = original.tensor(i);
    if (!same_bits(o, after_reference.tensor(i))) continue;  // the reference mutates it by design
    if (!same_bits(o, after_candidate.tensor(i)))
      return "the candidate changed input '" + original.at(i).name + "' (argument " + std::to_string(i) +
             "), which the reference leaves unchanged";
  }
  return "";
}

bool refresh_in_place(Inputs& target, const Inputs& fresh, std::string* why_not) {
  auto fail = [&](const std::string& w) {
    if (why_not) *why_not = w;
    return false;
  };
  if (target.size() != fresh.size()) return fail("the fresh draw has another argument count");
  for (size_t i = 0; i < target.size(); ++i) {
    const bool tt = target.is_tensor(i), ft = fresh.is_tensor(i);
    if (tt != ft) return fail("argument " + std::to_string(i) + " changes kind");
    if (!tt) {
      if (target.at(i).value.index() != fresh.at(i).value.index())
        return fail("argument " + std::to_string(i) + " changes type");
      const ArgValue &x = target.at(i).value, &y = fresh.at(i).value;
      bool same = true;
      if (auto p = std::get_if<int64_t>(&x)) same = *p == std::get<int64_t>(y);
      else if (auto p = std::get_if<double>(&x)) same = *p == std::get<double>(y);
      else if (auto p = std::get_if<bool>(&x)) same = *p == std::get<bool>(y);
      else if (auto p = std::get_if<std::string>(&x)) same = *p == std::get<std::string>(y);
      else if (auto p = std::get_if<GroupRanks>(&x)) same = p->ranks == std::get<GroupRanks>(y).ranks;
      if (!same) return fail("argument '" + target.at(i).name + "' is a seed-dependent scalar");
      continue;
    }
    const at::Tensor &a = target.tensor(i), &b = fresh.tensor(i);
    if (a.defined() != b.defined() || (a.defined() && (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type())))
      return fail("input '" + target.at(i).name + "' has a seed-dependent shape");
  }
  for (size_t i = 0; i < target.size(); ++i)
    if (target.is_tensor(i) && target.tensor(i).defined())
      const_cast<at::Tensor&>(target.tensor(i)).copy_(fresh.tensor(i));
  return true;
}

}  // namespace pkb
