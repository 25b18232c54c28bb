// Distributed sample sort: local sort, regular sampling (one sample per
// active rank), splitters chosen on the host with (value, rank, position)
// tie-breaking, a variable all-to-all into buckets, a merge, then an exact
// even redistribution of the globally sorted sequence. Ranks may hold no
// element (trial ≡ 3 mod 4, odd ranks); the output is uniquely determined as
// this rank's even slice of the sorted multiset of all values.
#include "../blocks/host_list.h"
#include "pkb/problem.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

namespace {

const pkb::ProblemSpec kSpec{85, "distributed_sample_sort", "Distributed sample sort with exact even redistribution",
                             "Other", "unknown (classic parallel sample sort)", "any"};

using pkb::blocks::host_list;

std::vector<int64_t> local_sizes(pkb::Collectives& comm, const at::Device& dev, int64_t n) {
  const int world = comm.world_size();
  at::Tensor size = at::full({1}, n, at::TensorOptions().dtype(at::kLong).device(dev));
  std::vector<at::Tensor> gathered;
  for (int i = 0; i < world; ++i) gathered.push_back(at::empty_like(size));
  comm.all_gather(gathered, size);
  std::vector<int64_t> out;
  for (const auto& g : gathered) out.push_back(g.item<int64_t>());
  return out;
}

// Counts first (an all-to-all of W int64), then the data with those splits.
std::vector<at::Tensor> variable_all_to_all(pkb::Collectives& comm, const std::vector<at::Tensor>& chunks) {
  const at::Device dev = chunks[0].device();
  const at::ScalarType dt = chunks[0].scalar_type();
  std::vector<int64_t> sends;
  for (const auto& c : chunks) sends.push_back(c.numel());
  at::Tensor send_counts = at::tensor(sends, at::TensorOptions().dtype(at::kLong)).to(dev);
  at::Tensor recv_counts = at::empty_like(send_counts);
  comm.all_to_all_single(recv_counts, send_counts);
  int64_t send_total = 0;
  for (int64_t v : sends) send_total += v;
  at::Tensor send = send_total > 0 ? at::cat(chunks, 0) : at::empty({0}, at::TensorOptions().dtype(dt).device(dev));
  std::vector<int64_t> recvs = host_list(recv_counts);
  int64_t recv_total = 0;
  for (int64_t v : recvs) recv_total += v;
  at::Tensor recv = at::empty({recv_total}, at::TensorOptions().dtype(dt).device(dev));
  comm.all_to_all_single(recv, send, recvs, sends);
  std::vector<at::Tensor> out;
  int64_t offset = 0;
  for (int64_t c : recvs) {
    out.push_back(recv.narrow(0, offset, c));
    offset += c;
  }
  return out;
}

class DistributedSampleSort : public pkb::ProblemWithSpec<kSpec> {
 public:
  // n = max(4W, min(M / W, 4096)) values per rank, 0 on odd ranks when
  // trial ≡ 3 (mod 4); integers in [-50, 50) drawn as int64, converted to the
  // run's dtype, then shifted by -rank·max(1, n) (rounded to the dtype).
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    int64_t n = std::max<int64_t>(4 * req.world, std::min<int64_t>(req.m / std::max(req.world, 1), 4096));
    if (req.trial % 4 == 3 && req.rank % 2 == 1) n = 0;
    at::Tensor values = at::randint(-50, 50, {n}, req.options(at::kLong));
    values = values.to(req.dtype) - static_cast<int64_t>(req.rank) * std::max<int64_t>(1, n);
    return {{"local_shard", values.contiguous()}, {"group", pkb::None{}}};
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const at::Tensor& shard = in.tensor(0);
    const int world = comm.world_size(), rank = comm.rank();
    const at::Device dev = shard.device();
    at::Tensor sorted = std::get<0>(shard.sort());
    const int64_t n = sorted.numel();

    std::vector<int64_t> sizes = local_sizes(comm, dev, shard.numel());
    std::vector<int> active;
    for (int i = 0; i < world; ++i)
      if (sizes[i] > 0) active.push_back(i);
    auto found = std::find(active.begin(), active.end(), rank);
    const int64_t sort_rank = found == active.end() ? -1 : found - active.begin();
    const int64_t active_count = static_cast<int64_t>(active.size());
    if (active_count == 0) return {at::empty({0}, shard.options())};

    // Regular samples, padded with (+inf, -1, -1).
    const int64_t ns = active_count;
    auto lopts = at::TensorOptions().dtype(at::kLong).device(dev);
    at::Tensor s_values = at::full({ns}, std::numeric_limits<double>::infinity(), sorted.options());
    at::Tensor s_ranks = at::full({ns}, -1, lopts);
    at::Tensor s_pos = at::full_like(s_ranks, -1);
    if (sort_rank >= 0 && n > 0) {
      at::Tensor idx = at::arange(ns, lopts);
      const int64_t valid = std::min(ns, n);
      at::Tensor positions = ns < n ? at::div((idx + 1) * n, ns, "floor") - 1 : idx.narrow(0, 0, valid);
      positions = positions.narrow(0, 0, valid);
      s_values.narrow(0, 0, valid).copy_(sorted.index_select(0, positions));
      s_ranks.narrow(0, 0, valid).fill_(sort_rank);
      s_pos.narrow(0, 0, valid).copy_(positions);
    }

    // Splitters: all samples gathered, sorted on the host by (value, rank, position).
    std::vector<at::Tensor> vparts, rparts, pparts;
    for (int i = 0; i < world; ++i) {
      vparts.push_back(at::empty_like(s_values));
      rparts.push_back(at::empty_like(s_ranks));
      pparts.push_back(at::empty_like(s_pos));
    }
    comm.all_gather(vparts, s_values);
    comm.all_gather(rparts, s_ranks);
    comm.all_gather(pparts, s_pos);
    at::Tensor all_v = at::cat(vparts).to(at::kCPU, at::kDouble).contiguous();
    std::vector<int64_t> all_r = host_list(at::cat(rparts)), all_p = host_list(at::cat(pparts));
    using Sample = std::tuple<double, int64_t, int64_t>;
    std::vector<Sample> samples;
    for (int64_t i = 0; i < all_v.numel(); ++i)
      if (all_r[i] >= 0) samples.emplace_back(all_v.data_ptr<double>()[i], all_r[i], all_p[i]);
    std::sort(samples.begin(), samples.end());
    std::vector<Sample> splitters;
    const int64_t usable = static_cast<int64_t>(samples.size());
    for (int64_t s = 0; s < active_count - 1; ++s) {
      int64_t index = (s + 1) * usable / active_count - 1;
      splitters.push_back(samples[std::max<int64_t>(0, std::min(index, usable - 1))]);
    }

    // Bucket boundaries in the local sorted run; ties go by (rank, position).
    std::vector<int64_t> bounds;
    if (sort_rank < 0) {
      bounds.assign(splitters.size() + 2, 0);
    } else {
      bounds.push_back(0);
      for (const auto& [value, srank, spos] : splitters) {
        at::Tensor probe = at::scalar_tensor(value, sorted.options());
        int64_t end;
        if (sort_rank > srank) {
          end = at::searchsorted(sorted, probe, false, /*right=*/false).item<int64_t>();
        } else if (sort_rank < srank) {
          end = at::searchsorted(sorted, probe, false, /*right=*/true).item<int64_t>();
        } else {
          end = spos + 1;
        }
        bounds.push_back(std::max(bounds.back(), std::min(end, n)));
      }
      bounds.push_back(n);
    }

    std::vector<at::Tensor> chunks(world);
    for (int i = 0; i < world; ++i) chunks[i] = at::empty({0}, sorted.options());
    for (size_t b = 0; b < active.size(); ++b)
      chunks[active[b]] = sorted.slice(0, bounds[b], bounds[b + 1]).contiguous();
    std::vector<at::Tensor> received = variable_all_to_all(comm, chunks);
    std::vector<at::Tensor> nonempty;
    for (const auto& r : received)
      if (r.numel() > 0) nonempty.push_back(r);
    at::Tensor merged = nonempty.empty() ? at::empty({0}, sorted.options()) : std::get<0>(at::cat(nonempty, 0).sort());

    // Exact redistribution: rank d gets [d·⌊T/W⌋ + min(d, T mod W), +⌊T/W⌋ + (d < T mod W)).
    std::vector<int64_t> msizes = local_sizes(comm, dev, merged.numel());
    int64_t total = 0, bucket_start = 0;
    for (int i = 0; i < world; ++i) {
      total += msizes[i];
      if (i < rank) bucket_start += msizes[i];
    }
    const int64_t bucket_end = bucket_start + merged.numel();
    const int64_t base = total / world, extra = total % world;
    std::vector<at::Tensor> out_chunks;
    for (int d = 0; d < world; ++d) {
      const int64_t ts = d * base + std::min<int64_t>(d, extra), te = ts + base + (d < extra ? 1 : 0);
      const int64_t s = std::max(bucket_start, ts), e = std::min(bucket_end, te);
      out_chunks.push_back(s < e ? merged.slice(0, s - bucket_start, e - bucket_start) : at::empty({0}, merged.options()));
    }
    return {at::cat(variable_all_to_all(comm, out_chunks), 0)};
  }

  // n local values (e bytes each): the data crosses NVLink at most twice
  // (buckets, then redistribution), plus W-element size/sample collectives
  // (8 B counts twice, e + 16 B samples); HBM: about 4 passes over the data
  // (read, sorted write, bucket receive, output); FLOPs: two local sorts,
  // 2·n·log2(n) comparisons.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& t = in.tensor(0);
    const double n = static_cast<double>(t.numel()), e = static_cast<double>(t.element_size()), w = world;
    return {/*nvlink_bytes_per_rank=*/2.0 * n * e + (w - 1) * (8.0 * 4 + w * (e + 16.0)),
            /*hbm_bytes_per_rank=*/4.0 * n * e,
            /*flops_per_rank=*/n > 1 ? 2.0 * n * std::log2(n) : 0.0};
  }
};

}  // namespace

PKB_PROBLEM(DistributedSampleSort)
