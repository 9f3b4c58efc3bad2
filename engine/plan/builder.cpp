// The strategy builders. One Builder instance turns a validated scenario into a StepPlan:
//   layout (ranks, groups, stage → units) → per-stage schedule order (GPipe / 1F1B /
//   interleaved) → per-rank compute ops with pipeline send/recv → gradient sync (bucketed
//   all-reduce, reduce-scatter) → parameter gathers (ZeRO-3/FSDP) → precision (found-inf
//   all-reduce) → optimizer step → parameter all-gather (ZeRO-1/2).
// Every strategy decision is made here; executors only follow ops and deps.
#include "engine/plan/builder.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "engine/spec/error.hpp"

namespace stratagem::plan {

namespace {

using spec::Sharding;

// Kernel launches per unit and phase: a transformer block's forward is ~10 kernels
// (2 norms, QKV, attention core, projection, 2 residual adds, MLP in/act/out), backward ~2×.
constexpr int kBlockForwardKernels = 10;
constexpr int kEmbeddingKernels = 2;
constexpr int kHeadForwardKernels = 4;
// Adam's update reads the gradient, the master weights and both moments, writes all three
// back and writes the compute copy of the parameters; ~10 FLOPs per parameter.
constexpr double kAdamFlopsPerParam = 10.0;
constexpr double kSgdFlopsPerParam = 4.0;
constexpr double kLossScaleBytes = 8.0;  // fp16 scale + found-inf flag
constexpr double kFoundInfBytes = 4.0;   // one float all-reduced (max) across ranks

struct BucketPlan {
  std::vector<int> units;  // in backward order
  double params = 0;
};

class Builder {
 public:
  Builder(const spec::Scenario& s, const BuildOptions& o) : s_(s), opt_(o) {}

  StepPlan build() {
    plan_.scenario = s_;
    make_layout();
    plan_.ranks.resize(plan_.layout.world);
    make_groups();
    for (int r = 0; r < plan_.layout.world; ++r) {
      const auto& c = plan_.layout.coords[r];
      plan_.ranks[r].representative = plan_.layout.rank_of(c.stage, 0);
      plan_.ranks[r].built = !opt_.fold || c.dp == 0;
    }
    plan_.folded = opt_.fold && s_.strategy.dp > 1;
    for (int r = 0; r < plan_.layout.world; ++r) {
      set_resident(r);
      if (plan_.ranks[r].built) build_rank(r);
    }
    plan_.model_flops_per_step = spec::training_flops_per_token(s_.model, s_.training.seq_len) *
                                 static_cast<double>(s_.tokens_per_step());
    check_pairs();
    return std::move(plan_);
  }

 private:
  // ---- layout and groups -------------------------------------------------------------
  void make_layout() {
    auto& L = plan_.layout;
    const auto& st = s_.strategy;
    L.world = s_.world_size();
    L.dp = st.dp;
    L.pp = st.pp;
    L.chunks = st.chunks;
    L.gpus_per_node = s_.cluster.gpus_per_node;
    L.nodes = s_.cluster.nodes;
    L.units = make_units(s_);
    L.stage_chunk_units = split_stages(static_cast<int>(s_.model.layers), st.pp, st.chunks);
    L.coords.resize(L.world);
    for (int r = 0; r < L.world; ++r) {
      auto& c = L.coords[r];
      c.stage = r / st.dp;
      c.dp = r % st.dp;
      c.node = r / L.gpus_per_node;
      c.local_rank = r % L.gpus_per_node;
    }
  }

  int add_group(std::vector<int> ranks, const std::string& label) {
    std::sort(ranks.begin(), ranks.end());
    auto it = group_index_.find(ranks);
    if (it != group_index_.end()) return it->second;
    Group g;
    g.ranks = ranks;
    g.label = label;
    int first_node = -1, last_node = -1, spanned = 0;
    for (int r : ranks) {
      const int node = plan_.layout.coords[r].node;
      if (node != last_node) ++spanned;  // ranks are sorted, nodes are contiguous
      if (first_node < 0) first_node = node;
      last_node = node;
    }
    g.nodes_spanned = spanned;
    g.intra_node = spanned == 1;
    plan_.groups.push_back(std::move(g));
    const int index = static_cast<int>(plan_.groups.size()) - 1;
    group_index_.emplace(plan_.groups.back().ranks, index);
    return index;
  }

  void make_groups() {
    const auto& L = plan_.layout;
    const auto& st = s_.strategy;
    std::vector<int> world(L.world);
    for (int r = 0; r < L.world; ++r) world[r] = r;
    world_group_ = add_group(world, "world");
    dp_group_.assign(L.world, -1);
    shard_group_.assign(L.world, -1);
    replica_group_.assign(L.world, -1);
    tied_group_.assign(L.world, -1);
    for (int r = 0; r < L.world; ++r) {
      const auto& c = L.coords[r];
      std::vector<int> dp;
      for (int d = 0; d < st.dp; ++d) dp.push_back(L.rank_of(c.stage, d));
      dp_group_[r] = add_group(dp, "dp(stage " + std::to_string(c.stage) + ")");
      if (st.sharding == Sharding::fsdp_hybrid_shard) {
        // Shard inside the node, replicate across nodes.
        std::vector<int> shard, replica;
        for (int q : dp) {
          if (L.coords[q].node == c.node) shard.push_back(q);
          if (L.coords[q].local_rank == c.local_rank) replica.push_back(q);
        }
        shard_group_[r] = add_group(shard, "shard(node " + std::to_string(c.node) + ")");
        replica_group_[r] =
            add_group(replica, "replica(local " + std::to_string(c.local_rank) + ")");
      } else {
        shard_group_[r] = dp_group_[r];
      }
      if (s_.model.tied_embeddings && st.pp > 1 && (c.stage == 0 || c.stage == st.pp - 1)) {
        tied_group_[r] = add_group({L.rank_of(0, c.dp), L.rank_of(st.pp - 1, c.dp)},
                                   "tied(dp " + std::to_string(c.dp) + ")");
      }
    }
  }

  int group_size(int g) const { return static_cast<int>(plan_.groups[g].ranks.size()); }

  // ---- parameters and resident memory ---------------------------------------------------
  double stage_params(int stage) const {
    double p = 0;
    for (const auto& [b, e] : plan_.layout.stage_chunk_units[stage]) {
      for (int u = b; u < e; ++u) p += plan_.layout.units[u].params;
    }
    return p;
  }

  double compute_bytes() const { return spec::compute_param_bytes(s_.strategy.precision); }

  void set_resident(int r) {
    const auto& st = s_.strategy;
    auto& info = plan_.ranks[r];
    const double psi = stage_params(plan_.layout.coords[r].stage);
    const double n = group_size(shard_group_[r]);
    const double c = compute_bytes();
    auto set = [&](TensorClass cls, double bytes) { info.initial[static_cast<int>(cls)] = bytes; };
    set(TensorClass::params, c * psi / (spec::shards_parameters(st.sharding) ? n : 1.0));
    set(TensorClass::grads, c * psi / (spec::shards_gradients(st.sharding) ? n : 1.0));
    const double opt_shard = spec::shards_optimizer(st.sharding) ? n : 1.0;
    const double states = spec::optimizer_state_bytes_per_param(st.optimizer) * psi / opt_shard;
    const double master = spec::has_master_weights(st) ? 4.0 * psi / opt_shard : 0.0;
    if (st.offload_optimizer == spec::Offload::cpu) {
      info.host_bytes = states + master;
    } else {
      set(TensorClass::optimizer, states);
      set(TensorClass::master_weights, master);
    }
    set(TensorClass::loss_scale, st.precision == spec::Precision::fp16 ? kLossScaleBytes : 0.0);
  }

  // ---- op emission ------------------------------------------------------------------------
  OpId emit(int rank, Stream stream, Payload payload, const std::vector<OpId>& deps,
            const std::vector<MemEffect>& effects) {
    Op op;
    op.id = static_cast<OpId>(plan_.ops.size());
    op.rank = rank;
    op.stream = stream;
    op.payload = std::move(payload);
    op.dep_begin = static_cast<std::uint32_t>(plan_.deps.size());
    for (OpId d : deps) {
      if (d != kNoOp) plan_.deps.push_back(d);
    }
    op.dep_count = static_cast<std::uint32_t>(plan_.deps.size()) - op.dep_begin;
    op.mem_begin = static_cast<std::uint32_t>(plan_.mem_effects.size());
    for (const auto& e : effects) {
      if (e.bytes != 0) plan_.mem_effects.push_back(e);
    }
    op.mem_count = static_cast<std::uint32_t>(plan_.mem_effects.size()) - op.mem_begin;
    plan_.ranks[rank].streams[static_cast<int>(stream)].push_back(op.id);
    plan_.ops.push_back(std::move(op));
    return plan_.ops.back().id;
  }

  OpId emit_collective(int rank, Stream stream, CollectiveKind kind, CommPurpose purpose, int group,
                       double bytes, int bucket, int u0, int u1, const std::vector<OpId>& deps,
                       const std::vector<MemEffect>& effects) {
    // Members of a group emit their collectives in the same order: the n-th collective a
    // rank emits on a group is the n-th instance of that group.
    const int seq = next_seq_[{rank, group}]++;
    auto [it, fresh] = instance_index_.try_emplace({group, seq}, -1);
    if (fresh) {
      CollectiveInstance inst;
      inst.group = group;
      inst.kind = kind;
      inst.bytes = bytes;
      plan_.collectives.push_back(std::move(inst));
      it->second = static_cast<int>(plan_.collectives.size()) - 1;
    }
    auto& inst = plan_.collectives[it->second];
    if (inst.kind != kind || inst.bytes != bytes) {
      throw RuntimeError("plan builder: members of group '" + plan_.groups[group].label +
                         "' disagree on collective #" + std::to_string(seq));
    }
    Collective c;
    c.kind = kind;
    c.purpose = purpose;
    c.group = group;
    c.instance = it->second;
    c.bytes = bytes;
    c.dtype = spec::compute_dtype(s_.strategy.precision);
    c.bucket = bucket;
    c.unit_begin = u0;
    c.unit_end = u1;
    const OpId id = emit(rank, stream, c, deps, effects);
    inst.ops.push_back(id);
    return id;
  }

  // `chunk` is the sending side's chunk, so both ends name a message alike.
  OpId emit_p2p(int rank, bool send, int peer, bool gradient, int chunk, int mb,
                const std::vector<OpId>& deps) {
    const int src = send ? rank : peer, dst = send ? peer : rank;
    auto [it, fresh] = transfer_index_.try_emplace({src, dst, gradient, chunk, mb}, -1);
    if (fresh) {
      Transfer t;
      t.src = src;
      t.dst = dst;
      t.bytes = activation_message_bytes();
      plan_.transfers.push_back(t);
      it->second = static_cast<int>(plan_.transfers.size()) - 1;
    }
    P2P p;
    p.send = send;
    p.peer = peer;
    p.transfer = it->second;
    p.bytes = activation_message_bytes();
    p.microbatch = mb;
    p.chunk = chunk;
    p.gradient = gradient;
    const OpId id = emit(rank, Stream::p2p, p, deps, {});
    (send ? plan_.transfers[it->second].send : plan_.transfers[it->second].recv) = id;
    return id;
  }

  double activation_message_bytes() const {
    // The hidden states between stages: s·b·h in the compute dtype (gradients alike); a
    // measured model's block output.
    if (const auto& mm = s_.model.measured) {
      return s_.strategy.micro_batch_size * mm->boundary_bytes * compute_bytes() /
             mm->element_bytes;
    }
    return static_cast<double>(s_.training.seq_len) * s_.strategy.micro_batch_size *
           static_cast<double>(s_.model.hidden) * compute_bytes();
  }

  Compute compute_op(Phase phase, int stage, int chunk, int mb, int u0, int u1) const {
    Compute c;
    c.phase = phase;
    c.stage = stage;
    c.chunk = chunk;
    c.microbatch = mb;
    c.unit_begin = u0;
    c.unit_end = u1;
    c.dtype = spec::compute_dtype(s_.strategy.precision);
    const int last = static_cast<int>(plan_.layout.units.size()) - 1;
    c.kernels = 0;
    for (int u = u0; u < u1; ++u) {
      const Unit& unit = plan_.layout.units[u];
      const int fwd_kernels = u == 0      ? kEmbeddingKernels
                              : u == last ? kHeadForwardKernels
                                          : kBlockForwardKernels;
      switch (phase) {
        // Memory-bound traffic: the forward's norms, softmax, activations and residual adds
        // write about the tensors a block saves for backward (full_act_bytes) once; backward
        // reads them and writes their gradients, about twice that.
        case Phase::forward:
          c.flops += unit.fwd_flops;
          c.bytes += unit.full_act_bytes;
          c.kernels += fwd_kernels;
          break;
        case Phase::backward:
          c.flops += 2.0 * unit.fwd_flops;
          c.bytes += 2.0 * unit.full_act_bytes;
          c.kernels += 2 * fwd_kernels;
          break;
        case Phase::recompute:
          c.flops += unit.recompute_flops;
          c.bytes += unit.full_act_bytes - unit.act_bytes;
          c.kernels += fwd_kernels;
          break;
        default:
          break;
      }
      if (unit.gemm_dim > 0)
        c.gemm_dim = c.gemm_dim > 0 ? std::min(c.gemm_dim, unit.gemm_dim) : unit.gemm_dim;
    }
    c.kernels = std::max(c.kernels, 1);
    return c;
  }

  double units_act(int u0, int u1, bool full) const {
    double b = 0;
    for (int u = u0; u < u1; ++u) {
      b += full ? plan_.layout.units[u].full_act_bytes : plan_.layout.units[u].act_bytes;
    }
    return b;
  }
  double units_params(int u0, int u1) const {
    double p = 0;
    for (int u = u0; u < u1; ++u) p += plan_.layout.units[u].params;
    return p;
  }

  // ---- one rank -------------------------------------------------------------------------
  void build_rank(int rank) {
    const auto& st = s_.strategy;
    const auto& L = plan_.layout;
    const int stage = L.coords[rank].stage;
    const int m = st.grad_accum;
    const int dp_n = group_size(dp_group_[rank]);
    const bool sync_grads = dp_n > 1;
    const bool shard_params = spec::shards_parameters(st.sharding) && dp_n > 1;
    const bool shard_grads = spec::shards_gradients(st.sharding) && sync_grads;
    const bool reshard = spec::reshards_after_forward(st.sharding);
    const bool recompute = st.recompute != spec::Recompute::none;
    const double pc = compute_bytes();

    const auto buckets = make_buckets(stage, shard_params);
    std::vector<int> bucket_of(L.units.size(), -1);
    for (int b = 0; b < static_cast<int>(buckets.size()); ++b) {
      for (int u : buckets[b].units) bucket_of[u] = b;
    }
    // Units of each bucket whose gradients of the current sync round are not final yet. A
    // round is one micro-batch for ZeRO-2/3 and FSDP, and the last micro-batch of every chunk
    // for DDP and ZeRO-1 (with interleaving, a bucket may hold units of several chunks, whose
    // last backwards are apart in time: the bucket launches after the later one).
    std::vector<int> bucket_remaining = bucket_sizes(buckets);
    std::vector<OpId> grad_sync_ops;  // collectives the optimizer waits for
    // Tied embeddings across the pipeline: the first and last stage sum their copies' word
    // table gradients after the last backward. A ZeRO-1 reduce-scatter leaves each rank only
    // a shard, so the bucket holding the table waits for that sum (the others overlap).
    const int tied_unit = tied_group_[rank] < 0 ? -1
                          : stage == 0          ? 0
                                                : static_cast<int>(L.units.size()) - 1;
    const bool defer_tied =
        tied_unit >= 0 && spec::shards_optimizer(st.sharding) && sync_grads && !shard_grads;
    int deferred_bucket = -1;
    auto finish_units = [&](int begin, int end, OpId after, std::vector<OpId>& sync_ops) {
      for (int u = end - 1; u >= begin; --u) {
        const int b = bucket_of[u];
        if (b < 0) continue;  // units without parameters sync nothing
        if (--bucket_remaining[b] == 0) {
          const auto& bu = buckets[b].units;
          if (defer_tied && std::find(bu.begin(), bu.end(), tied_unit) != bu.end()) {
            deferred_bucket = b;
            bucket_remaining[b] = static_cast<int>(bu.size());
            continue;
          }
          launch_bucket(rank, buckets[b], b, shard_grads, after, sync_ops);
          bucket_remaining[b] = static_cast<int>(buckets[b].units.size());  // next round
        }
      }
    };

    OpId last_compute = kNoOp;
    // Units gathered and kept from forward to backward (SHARD_GRAD_OP): (mb, unit).
    std::set<std::pair<int, int>> kept;
    const auto order = schedule_order(st.schedule, st.pp, stage, st.chunks, m);

    // Parameter gathers (ZeRO-3/FSDP), in the order compute needs them: every per-unit
    // forward, and every per-unit backward when the forward resharded. Gather k may start once
    // the compute that consumed gather k − 1 − prefetch has ended, and is emitted right after
    // that compute op (and the reduce-scatter it launches), ahead of later units' collectives,
    // so a backend that issues a rank's collectives in op order really prefetches.
    std::vector<int> need;
    if (shard_params) {
      for (const auto& item : order) {
        const auto [b, e] = L.stage_chunk_units[stage][item.chunk];
        if (item.forward) {
          for (int u = b; u < e; ++u) need.push_back(u);
        } else if (reshard) {
          for (int u = e - 1; u >= b; --u) need.push_back(u);
        }
      }
    }
    std::vector<OpId> gather_ops, consumers(need.size(), kNoOp);
    std::size_t taken = 0;  // gathers handed to their consumers so far
    auto emit_gather = [&](std::size_t k) {
      std::vector<OpId> deps;
      const auto limit = static_cast<std::ptrdiff_t>(k) - 1 - st.prefetch;
      if (limit >= 0) deps.push_back(consumers[static_cast<std::size_t>(limit)]);
      const int unit = need[k];
      const double bytes = pc * L.units[unit].gather_params;
      gather_ops.push_back(emit_collective(rank, Stream::gather, CollectiveKind::all_gather,
                                           CommPurpose::param_gather, shard_group_[rank], bytes,
                                           unit, unit, unit + 1, deps,
                                           {{TensorClass::gathered_params, bytes, false}}));
    };
    for (std::size_t k = 0; k < need.size() && k <= static_cast<std::size_t>(st.prefetch); ++k) {
      emit_gather(k);
    }
    auto gather_for = [&](int unit) -> OpId {
      if (taken >= need.size() || need[taken] != unit) {
        throw RuntimeError("plan builder: gather order disagrees with compute order at unit " +
                           std::to_string(unit));
      }
      return gather_ops[taken++];
    };
    // `consumer` used the last gather handed out: the gather prefetch + 1 places later may go.
    auto consumed = [&](OpId consumer) {
      consumers[taken - 1] = consumer;
      const std::size_t next = taken + static_cast<std::size_t>(st.prefetch);
      if (next < need.size()) emit_gather(next);
    };

    for (const auto& item : order) {
      const auto [u0, u1] = L.stage_chunk_units[stage][item.chunk];
      const int vs = item.chunk * st.pp + stage;
      const int last_vs = st.pp * st.chunks - 1;
      if (item.forward) {
        OpId recv = kNoOp;
        if (vs > 0) {
          const int peer = L.rank_of((stage - 1 + st.pp) % st.pp, L.coords[rank].dp);
          recv = emit_p2p(rank, false, peer, false, item.chunk - (stage == 0 ? 1 : 0),
                          item.microbatch, {last_compute});
        }
        const bool per_unit = shard_params;
        OpId prev = recv;
        if (!per_unit) {
          prev = emit(rank, Stream::compute,
                      compute_op(Phase::forward, stage, item.chunk, item.microbatch, u0, u1),
                      {last_compute, recv},
                      {{TensorClass::activations, units_act(u0, u1, false), true}});
        } else {
          for (int u = u0; u < u1; ++u) {
            const OpId g = gather_for(u);
            const double bytes = pc * L.units[u].gather_params;
            std::vector<MemEffect> fx = {{TensorClass::activations, L.units[u].act_bytes, true}};
            if (reshard) fx.push_back({TensorClass::gathered_params, -bytes, true});
            prev = emit(rank, Stream::compute,
                        compute_op(Phase::forward, stage, item.chunk, item.microbatch, u, u + 1),
                        {prev, g}, fx);
            consumed(prev);
            if (!reshard) kept.insert({item.microbatch, u});
          }
        }
        last_compute = prev;
        if (vs < last_vs) {
          const int peer = L.rank_of((stage + 1) % st.pp, L.coords[rank].dp);
          emit_p2p(rank, true, peer, false, item.chunk, item.microbatch, {prev});
        }
        continue;
      }

      // Backward.
      OpId recv = kNoOp;
      if (vs < last_vs) {
        const int peer = L.rank_of((stage + 1) % st.pp, L.coords[rank].dp);
        recv = emit_p2p(rank, false, peer, true, item.chunk + (stage == st.pp - 1 ? 1 : 0),
                        item.microbatch, {last_compute});
      }
      const bool sync_mb = item.microbatch == m - 1;  // grads final after the last micro-batch
      const bool launches_sync = sync_grads && (shard_grads || sync_mb);
      const bool per_unit = shard_params || recompute || (launches_sync && buckets.size() > 1);
      OpId prev = kNoOp;
      if (!per_unit) {
        std::vector<MemEffect> fx = {{TensorClass::activations, -units_act(u0, u1, false), true}};
        if (shard_grads) fx.push_back({TensorClass::comm_buckets, pc * units_params(u0, u1), true});
        prev = emit(rank, Stream::compute,
                    compute_op(Phase::backward, stage, item.chunk, item.microbatch, u0, u1),
                    {last_compute, recv}, fx);
        last_compute = prev;
        if (launches_sync) finish_units(u0, u1, prev, grad_sync_ops);
      } else {
        OpId dep = recv;
        for (int u = u1 - 1; u >= u0; --u) {
          const Unit& unit = L.units[u];
          OpId g = kNoOp;
          const double pbytes = pc * unit.params;
          const double gbytes = pc * unit.gather_params;
          const bool was_kept = kept.erase({item.microbatch, u}) > 0;
          if (shard_params && !was_kept) g = gather_for(u);
          if (recompute && unit.recompute_flops > 0) {
            last_compute =
                emit(rank, Stream::compute,
                     compute_op(Phase::recompute, stage, item.chunk, item.microbatch, u, u + 1),
                     {last_compute, dep, g},
                     {{TensorClass::activations, unit.full_act_bytes - unit.act_bytes, false}});
          }
          std::vector<MemEffect> fx = {{TensorClass::activations,
                                        -(recompute ? unit.full_act_bytes : unit.act_bytes), true}};
          if (shard_params) fx.push_back({TensorClass::gathered_params, -gbytes, true});
          if (shard_grads) fx.push_back({TensorClass::comm_buckets, pbytes, true});
          prev = emit(rank, Stream::compute,
                      compute_op(Phase::backward, stage, item.chunk, item.microbatch, u, u + 1),
                      {last_compute, dep, g}, fx);
          last_compute = prev;
          dep = kNoOp;
          if (launches_sync) finish_units(u, u + 1, prev, grad_sync_ops);
          if (g != kNoOp) consumed(prev);
        }
      }
      if (vs > 0) {
        const int peer = L.rank_of((stage - 1 + st.pp) % st.pp, L.coords[rank].dp);
        emit_p2p(rank, true, peer, true, item.chunk, item.microbatch, {prev});
      }
    }

    if (tied_unit >= 0) {
      const double bytes =
          pc * static_cast<double>(s_.model.vocab) * static_cast<double>(s_.model.hidden);
      const OpId tied = emit_collective(rank, Stream::collective, CollectiveKind::all_reduce,
                                        CommPurpose::tied_embedding, tied_group_[rank], bytes, -1,
                                        0, 0, {last_compute}, {});
      grad_sync_ops.push_back(tied);
      if (deferred_bucket >= 0) {
        launch_bucket(rank, buckets[deferred_bucket], deferred_bucket, shard_grads, tied,
                      grad_sync_ops);
      }
    }
    std::vector<OpId> before_step = grad_sync_ops;
    before_step.push_back(last_compute);
    if (st.precision == spec::Precision::fp16) {
      // Unscale and look for inf/nan in the local gradients, agree across all ranks, then
      // the optimizer step (skipped on overflow) updates the loss scale.
      const double grad_bytes = plan_.ranks[rank].initial[static_cast<int>(TensorClass::grads)];
      Compute check;
      check.phase = Phase::loss_scale_check;
      check.stage = stage;
      check.bytes = 2.0 * grad_bytes;
      check.kernels = 2;
      check.dtype = spec::DType::fp32;
      last_compute = emit(rank, Stream::compute, check, before_step, {});
      before_step = {last_compute};
      if (group_size(world_group_) > 1) {
        before_step.push_back(emit_collective(rank, Stream::collective, CollectiveKind::all_reduce,
                                              CommPurpose::found_inf, world_group_, kFoundInfBytes,
                                              -1, 0, 0, {last_compute}, {}));
      }
    }
    const OpId step = emit(rank, Stream::compute, optimizer_op(rank, stage), before_step, {});

    // ZeRO-1/2: every rank updated its shard; gather the updated parameters.
    if (sync_grads && spec::shards_optimizer(st.sharding) &&
        !spec::shards_parameters(st.sharding)) {
      for (int b = 0; b < static_cast<int>(buckets.size()); ++b) {
        const auto& bk = buckets[b];
        const auto [lo, hi] = std::minmax_element(bk.units.begin(), bk.units.end());
        emit_collective(rank, Stream::collective, CollectiveKind::all_gather,
                        CommPurpose::param_gather, shard_group_[rank], pc * bk.params, b, *lo,
                        *hi + 1, {step}, {});
      }
    }
  }

  Compute optimizer_op(int rank, int stage) const {
    const auto& st = s_.strategy;
    const double psi = stage_params(stage) /
                       (spec::shards_optimizer(st.sharding) ? group_size(shard_group_[rank]) : 1);
    const double pc = compute_bytes();
    const double master = spec::has_master_weights(st) ? 4.0 : 0.0;
    const double states = spec::optimizer_state_bytes_per_param(st.optimizer);
    Compute c;
    c.phase = Phase::optimizer;
    c.stage = stage;
    c.flops = psi * (st.optimizer == spec::Optimizer::sgd ? kSgdFlopsPerParam : kAdamFlopsPerParam);
    // Read the gradient, read+write master and states, write the compute copy.
    c.bytes = psi * (pc + 2.0 * master + 2.0 * states + pc);
    c.kernels = 4;
    c.dtype = spec::DType::fp32;
    c.on_host = st.offload_optimizer == spec::Offload::cpu;
    c.params = psi;
    return c;
  }

  // Buckets in backward (reverse unit) order. ZeRO-3/FSDP reduce-scatter per unit; DDP,
  // ZeRO-1 and ZeRO-2 fill buckets up to bucket_mb like PyTorch DDP (a bucket closes once it
  // reaches the cap; a unit is never split).
  std::vector<BucketPlan> make_buckets(int stage, bool per_unit) const {
    const auto& L = plan_.layout;
    const double cap = units::bucket_mb_to_bytes(s_.strategy.bucket_mb);
    std::vector<BucketPlan> out;
    BucketPlan cur;
    double cur_bytes = 0;
    for (int chunk = static_cast<int>(L.stage_chunk_units[stage].size()) - 1; chunk >= 0; --chunk) {
      const auto [u0, u1] = L.stage_chunk_units[stage][chunk];
      for (int u = u1 - 1; u >= u0; --u) {
        if (L.units[u].params <= 0) continue;
        cur.units.push_back(u);
        cur.params += L.units[u].params;
        cur_bytes += compute_bytes() * L.units[u].params;
        if (per_unit || cur_bytes >= cap) {
          out.push_back(std::move(cur));
          cur = {};
          cur_bytes = 0;
        }
      }
    }
    if (!cur.units.empty()) out.push_back(std::move(cur));
    return out;
  }

  static std::vector<int> bucket_sizes(const std::vector<BucketPlan>& buckets) {
    std::vector<int> n;
    for (const auto& b : buckets) n.push_back(static_cast<int>(b.units.size()));
    return n;
  }

  void launch_bucket(int rank, const BucketPlan& bucket, int index, bool reduce_scatter, OpId after,
                     std::vector<OpId>& sync_ops) {
    const double bytes = compute_bytes() * bucket.params;
    const auto [lo, hi] = std::minmax_element(bucket.units.begin(), bucket.units.end());
    if (!reduce_scatter && !spec::shards_optimizer(s_.strategy.sharding)) {
      sync_ops.push_back(emit_collective(rank, Stream::collective, CollectiveKind::all_reduce,
                                         CommPurpose::grad_sync, dp_group_[rank], bytes, index, *lo,
                                         *hi + 1, {after}, {}));
      return;
    }
    // ZeRO-1 reduce-scatters the accumulated full gradients once; ZeRO-2/3 and FSDP do it
    // every micro-batch and free the staged unsharded gradients.
    std::vector<MemEffect> fx;
    if (reduce_scatter) fx.push_back({TensorClass::comm_buckets, -bytes, true});
    sync_ops.push_back(emit_collective(rank, Stream::collective, CollectiveKind::reduce_scatter,
                                       CommPurpose::grad_sync, shard_group_[rank], bytes, index,
                                       *lo, *hi + 1, {after}, fx));
    if (replica_group_[rank] >= 0 && group_size(replica_group_[rank]) > 1) {
      // HYBRID_SHARD: the shards are then all-reduced across the node replicas.
      sync_ops.push_back(emit_collective(rank, Stream::collective, CollectiveKind::all_reduce,
                                         CommPurpose::grad_sync, replica_group_[rank],
                                         bytes / group_size(shard_group_[rank]), index, *lo,
                                         *hi + 1, {sync_ops.back()}, {}));
    }
  }

  void check_pairs() const {
    for (const auto& t : plan_.transfers) {
      const bool src_built = plan_.ranks[t.src].built, dst_built = plan_.ranks[t.dst].built;
      if ((src_built && t.send == kNoOp) || (dst_built && t.recv == kNoOp)) {
        throw RuntimeError("plan builder: unpaired transfer " + std::to_string(t.src) + " → " +
                           std::to_string(t.dst));
      }
    }
  }

  const spec::Scenario& s_;
  BuildOptions opt_;
  StepPlan plan_;
  std::map<std::vector<int>, int> group_index_;
  int world_group_ = 0;
  std::vector<int> dp_group_, shard_group_, replica_group_, tied_group_;
  std::map<std::pair<int, int>, int> next_seq_;        // (rank, group) → next sequence
  std::map<std::pair<int, int>, int> instance_index_;  // (group, sequence) → instance
  std::map<std::tuple<int, int, bool, int, int>, int> transfer_index_;
};

}  // namespace

StepPlan build_plan(const spec::Scenario& scenario, const BuildOptions& options) {
  return Builder(scenario, options).build();
}

}  // namespace stratagem::plan
