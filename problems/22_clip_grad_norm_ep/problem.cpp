// EP-aware global gradient-norm clipping (VeOmni FSDP2 clip_grad_norm with EP
// and EP-FSDP groups). As published, the grads are mutated in place: the EP
// grads are scaled by 1/ep_size first, then both lists are clipped. The grads
// are not returned, but the harness reuses the inputs across timed calls, so
// the mutation is part of the contract (see README).
#include "../blocks/group_layout.h"
#include <cmath>

#include "pkb/integrity.h"
#include "pkb/problem.h"

#include <map>
#include <utility>
#include <variant>

namespace {

const pkb::ProblemSpec kSpec{22, "clip_grad_norm_ep",
                             "Global grad-norm with separate non-expert and expert-parameter reductions, with clipping",
                             "FSDP/ZeRO", "ByteDance VeOmni (FSDP2 clip_grad_norm with EP / EP-FSDP groups)", "any"};

using namespace pkb::blocks;

class ClipGradNormEp : public pkb::ProblemWithSpec<kSpec> {
 public:
  // RNG order as published: the non-EP grad's randn, then the EP grad's.
  pkb::Inputs make_inputs(const pkb::InputRequest& req) const override {
    auto opts = req.options();
    at::Tensor non_ep = at::randn({req.m, req.n}, opts);
    at::Tensor ep = at::randn({req.m, req.n}, opts);
    const int64_t world = req.world, rank = req.rank, ep_size = ep_size_for(world);
    pkb::Inputs in{{"non_ep_grad_tensors.0", non_ep}, {"ep_grad_tensors.0", ep}, {"max_norm", 1.0}, {"norm_type", 2.0},
                   {"ep_size", ep_size}, {"fsdp_group", pkb::GroupRanks{iota(0, 1, world)}}};
    if (degenerate(world, ep_size)) {
      in.add("ep_fsdp_group", pkb::GroupRanks{iota(0, 1, world)});
      in.add("ep_group", pkb::None{});
    } else {
      // rank = ep_fsdp_idx * ep_size + ep_idx
      in.add("ep_fsdp_group", pkb::GroupRanks{iota(rank % ep_size, ep_size, world / ep_size)});
      in.add("ep_group", pkb::GroupRanks{iota(rank / ep_size * ep_size, 1, ep_size)});
    }
    return in;
  }

  // Integrity trials (NOTE [integrity trials], pkb/integrity.h): the output
  // norm concentrates under a re-draw (see problem 21); each gradient is
  // scaled by its own factor in [e^-2, e^2], drawn per rank and trial.
  pkb::Inputs make_integrity_inputs(const pkb::InputRequest& req) const override {
    pkb::Inputs in = make_inputs(req);
    for (int i = 0; i < 2; ++i) {
      const double f = std::exp(4.0 * (at::rand({1}, at::kDouble).item<double>() - 0.5));
      in.args()[i].value = in.tensor(i) * f;
    }
    return in;
  }

  pkb::Outputs reference(pkb::Context& ctx, pkb::Collectives& comm, const pkb::Inputs& in) const override {
    const auto [non_ep, ep] = in.tensors<2>();
    const double max_norm = in.real(2), norm_type = in.real(3);
    const int64_t ep_size = in.integer(4);
    build_layout(comm, ep_size);
    const pkb::Group fsdp_group = layout_.resolve(comm, in.group(5));
    const pkb::Group ep_fsdp_group = layout_.resolve(comm, in.group(6));
    const bool has_ep_group = !std::holds_alternative<pkb::None>(in.at(7).value);

    if (ep_size > 1) ep.mul_(1.0 / static_cast<double>(ep_size));
    at::Tensor non_ep_total = local_pth_sum(non_ep, norm_type);
    comm.all_reduce(non_ep_total, pkb::ReduceOp::kSum, fsdp_group);
    at::Tensor ep_total = local_pth_sum(ep, norm_type);
    comm.all_reduce(ep_total, pkb::ReduceOp::kSum, ep_fsdp_group);
    if (has_ep_group) comm.all_reduce(ep_total, pkb::ReduceOp::kSum, layout_.resolve(comm, in.group(7)));

    at::Tensor total_norm = at::pow(non_ep_total + ep_total, 1.0 / norm_type);
    if ((total_norm > max_norm).item<bool>()) {
      // Python's `max_norm / tensor` is reciprocal(tensor) * max_norm.
      at::Tensor coef = total_norm.reciprocal() * max_norm;
      non_ep.mul_(coef);
      ep.mul_(coef);
    }
    return {total_norm};
  }

  // Three 4-byte all-reduces (two in the degenerate layout), each 2(g-1)/g of
  // 4 bytes over its group of g ranks; HBM: both grads read for the norms, the
  // EP grad read+written by the 1/ep_size scaling, both read+written by the
  // clip; FLOPs: 2 per element per norm, 1 per element per scaling.
  pkb::Cost cost(int world, const pkb::Inputs& in) const override {
    const at::Tensor& g = in.tensor(0);
    const double numel = static_cast<double>(g.numel()), bytes = static_cast<double>(g.nbytes());
    const int64_t ep_size = in.integer(4);
    auto ar = [](double size) { return 2.0 * (size - 1) / size * 4.0; };
    const double w = world;
    pkb::Cost c;
    if (degenerate(world, ep_size)) {
      c.nvlink_bytes_per_rank = 2.0 * ar(w);
    } else {
      c.nvlink_bytes_per_rank = ar(w) + ar(w / static_cast<double>(ep_size)) + ar(static_cast<double>(ep_size));
    }
    const bool scaled = ep_size > 1;
    c.hbm_bytes_per_rank = 2.0 * bytes + (scaled ? 2.0 * bytes : 0.0) + 4.0 * bytes;
    c.flops_per_rank = 4.0 * numel + (scaled ? numel : 0.0) + 2.0 * numel;
    return c;
  }

 private:
  static int64_t ep_size_for(int64_t world) { return std::max<int64_t>(1, world / 2); }
  // As published: with ep_size <= 1 or not dividing W, the EP term is reduced
  // over the whole world in one stage (ep_group None, ep_fsdp_group WORLD).
  static bool degenerate(int64_t world, int64_t ep_size) { return ep_size <= 1 || world % ep_size != 0; }

  // fp32 0-d accumulator of ||g||_p^p, as VeOmni's _local_pth_sum (one grad per list here).
  static at::Tensor local_pth_sum(const at::Tensor& g, double p) {
    at::Tensor acc = at::zeros({}, g.options().dtype(at::kFloat));
    at::Tensor gn = at::norm(g.to(at::kFloat), p);
    return acc + at::pow(gn, p);
  }

  // Every rank creates every EP block, then every EP-FSDP set, in the
  // published order. Once per facade: the published harness builds the
  // groups while making the inputs, outside the timed call.
  void build_layout(pkb::Collectives& comm, int64_t ep_size) const {
    const int64_t world = comm.world_size();
    if (degenerate(world, ep_size)) return;
    const int64_t ep_fsdp_size = world / ep_size;
    layout_.build(comm, rows_then_columns(ep_fsdp_size, ep_size));
  }

  const GroupLayout layout_{"EP x EP-FSDP", true};
};

}  // namespace

PKB_PROBLEM(ClipGradNormEp)
