#include "worker/integrity.h"

#include <algorithm>
#include <variant>

namespace pkb {

std::vector<TrialSpec> plan_trials(int published, int integrity) {
  std::vector<TrialSpec> out;
  for (int t = 0; t < published; ++t) out.push_back({t, false, 0});
  for (int k = 0; k < integrity; ++k) out.push_back({published + k, true, k});
  return out;
}

at::Tensor flat_bytes(const at::Tensor& t) { return t.contiguous().reshape({-1}).view(at::kByte); }

bool same_bits(const at::Tensor& a, const at::Tensor& b, int64_t chunk_bytes) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  if (a.numel() == 0) return true;
  if (a.is_same(b)) return true;
  // Bitwise, so NaN payloads and signed zeros count too.
  at::Tensor x = flat_bytes(a), y = flat_bytes(b);
  const int64_t n = x.numel();
  for (int64_t off = 0; off < n; off += chunk_bytes) {
    const int64_t len = std::min(chunk_bytes, n - off);
    if (!at::equal(x.narrow(0, off, len), y.narrow(0, off, len))) return false;
  }
  return true;
}

std::vector<int64_t> content_checksum(const at::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return {0, 0, 0};
  at::Tensor bytes = flat_bytes(t);
  // As int32 words where the size allows (a quarter of the elements to sum).
  at::Tensor w = bytes.numel() % 4 == 0 ? bytes.view(at::kInt) : bytes;
  constexpr int64_t kCols = 4096;
  const int64_t n = w.numel(), rows = n / kCols;
  auto opts = at::TensorOptions().device(t.device()).dtype(at::kLong);
  at::Tensor total = at::zeros({3}, opts);
  // The column sums add up over the chunks and are weighted once at the end
  // (the same sum: int64 arithmetic wraps, a checksum does not mind). Sums of
  // int32 reduce in int64 without a widened copy. Chunks as same_bits's.
  at::Tensor cols = at::zeros({kCols}, opts);
  const int64_t chunk_rows = std::max<int64_t>(1, kSameBitsChunkBytes / (kCols * w.element_size()));
  for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
    const int64_t nr = std::min(chunk_rows, rows - r0);
    at::Tensor m = w.narrow(0, r0 * kCols, nr * kCols).view({nr, kCols});
    at::Tensor row = m.sum(1, false, at::kLong);
    cols += m.sum(0, false, at::kLong);
    total[0] += row.sum();
    total[1] += (row * (at::arange(r0, r0 + nr, opts).remainder(65521) + 1)).sum();
  }
  total[2] = (cols * (at::arange(0, kCols, opts) + 1)).sum();
  if (rows * kCols < n) {
    at::Tensor tail = w.narrow(0, rows * kCols, n - rows * kCols).to(at::kLong);
    total[0] += tail.sum();
    total[1] += (tail * (at::arange(0, tail.numel(), opts) + 7)).sum();
  }
  at::Tensor h = total.cpu();
  return {h[0].item<int64_t>(), h[1].item<int64_t>(), h[2].item<int64_t>()};
}

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
    if (target.is_tensor(i) && target.tensor(i).defined() && !target.tensor(i).is_same(fresh.tensor(i)))
      const_cast<at::Tensor&>(target.tensor(i)).copy_(fresh.tensor(i));  // a fixed input may be the same tensor
  return true;
}

}  // namespace pkb
