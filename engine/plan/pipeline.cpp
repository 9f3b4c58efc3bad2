#include "engine/plan/pipeline.hpp"

#include "engine/workload/schedule.hpp"

namespace stratagem::plan {

int pipeline_gather(const scenario::Scenario& s) {
  const auto& st = s.strategy;
  const bool split = st.stack == scenario::Stack::megatron_legacy && st.tp > 1 &&
                     !st.sequence_parallel && !s.model.measured;
  return split ? st.tp : 1;
}

double activation_message_bytes(const scenario::Scenario& s) {
  const double c = scenario::compute_param_bytes(s.strategy.precision);
  if (const auto& mm = s.model.measured) {
    return s.strategy.micro_batch_size * mm->boundary_bytes * c / mm->element_bytes;
  }
  const double full = static_cast<double>(s.training.seq_len) * s.strategy.micro_batch_size *
                      static_cast<double>(s.model.hidden) * c;
  return s.strategy.sequence_parallel ? full / s.strategy.tp : full / pipeline_gather(s);
}

void add_pipeline_transfers(const BuildContext& ctx, RankDraft& d) {
  const auto& st = ctx.strategy();
  const Layout& L = ctx.layout();
  if (st.pp * st.chunks <= 1) return;
  const int stage = d.stage;
  const auto& c = L.coords[d.rank];
  const int last_vs = st.pp * st.chunks - 1;
  const double bytes = activation_message_bytes(ctx.scenario);
  const int gather = pipeline_gather(ctx.scenario);
  // The rank and chunk that run virtual stage `vs`; a neighbour on this rank (zbv's turn at
  // the bottom of the V) hands its tensor over without a message.
  struct Peer {
    int rank = -1;
    int chunk = 0;
  };
  auto peer = [&](int vs) {
    const auto [peer_stage, chunk] = workload::stage_chunk(st.schedule, st.pp, vs);
    return peer_stage == stage ? Peer{} : Peer{L.rank_of(peer_stage, c.dp, c.tp, c.cp), chunk};
  };
  auto p2p = [&](bool send, int peer, bool gradient, int chunk, int mb) {
    P2P p;
    p.send = send;
    p.peer = peer;
    p.bytes = bytes;
    p.microbatch = mb;
    p.chunk = chunk;  // the sending side's chunk, so both ends name a message alike
    p.gradient = gradient;
    p.gather = gather;
    return p;
  };
  DraftRef recv = kNoDraft;
  for (std::size_t k = 0; k < d.steps.size(); ++k) {
    Step& s = d.steps[k];
    if (s.phase == Phase::backward_weight) continue;  // W passes send and receive nothing
    const bool forward = s.phase == Phase::forward;
    const int vs = workload::virtual_stage(st.schedule, st.pp, stage, s.chunk);
    const Peer from =
        forward ? (vs > 0 ? peer(vs - 1) : Peer{}) : (vs < last_vs ? peer(vs + 1) : Peer{});
    if (s.first_of_item && (k == 0 || d.steps[k - 1].item != s.item)) {
      recv = kNoDraft;
      if (from.rank >= 0) {
        const DraftRef before = k == 0 ? kNoDraft : d.steps[k - 1].last();
        recv =
            d.add(Stream::p2p, p2p(false, from.rank, !forward, from.chunk, s.microbatch), {before});
        s.before[static_cast<int>(Anchor::p2p)].push_back(recv);
      }
    }
    if (s.first_of_item && recv != kNoDraft) add_dep(d, s, recv);
    const Peer to =
        forward ? (vs < last_vs ? peer(vs + 1) : Peer{}) : (vs > 0 ? peer(vs - 1) : Peer{});
    if (s.last_of_item && to.rank >= 0) {
      const DraftRef send =
          d.add(Stream::p2p, p2p(true, to.rank, !forward, s.chunk, s.microbatch), {s.last()});
      s.after[static_cast<int>(Anchor::p2p)].push_back(send);
    }
  }
}

}  // namespace stratagem::plan
