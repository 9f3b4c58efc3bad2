#include "engine/plan/pipeline.hpp"

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
  const int prev_rank = L.rank_of((stage - 1 + st.pp) % st.pp, c.dp, c.tp, c.cp);
  const int next_rank = L.rank_of((stage + 1) % st.pp, c.dp, c.tp, c.cp);
  const double bytes = activation_message_bytes(ctx.scenario);
  const int gather = pipeline_gather(ctx.scenario);
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
    const bool forward = s.phase == Phase::forward;
    const int vs = s.chunk * st.pp + stage;
    const bool has_input = forward ? vs > 0 : vs < last_vs;
    if (s.first_of_item && (k == 0 || d.steps[k - 1].item != s.item)) {
      recv = kNoDraft;
      if (has_input) {
        const DraftRef before = k == 0 ? kNoDraft : d.steps[k - 1].last();
        recv =
            forward
                ? d.add(Stream::p2p,
                        p2p(false, prev_rank, false, s.chunk - (stage == 0 ? 1 : 0), s.microbatch),
                        {before})
                : d.add(Stream::p2p,
                        p2p(false, next_rank, true, s.chunk + (stage == st.pp - 1 ? 1 : 0),
                            s.microbatch),
                        {before});
        s.before[static_cast<int>(Anchor::p2p)].push_back(recv);
      }
    }
    if (s.first_of_item && recv != kNoDraft) add_dep(d, s, recv);
    const bool has_output = forward ? vs < last_vs : vs > 0;
    if (s.last_of_item && has_output) {
      const DraftRef send =
          forward
              ? d.add(Stream::p2p, p2p(true, next_rank, false, s.chunk, s.microbatch), {s.last()})
              : d.add(Stream::p2p, p2p(true, prev_rank, true, s.chunk, s.microbatch), {s.last()});
      s.after[static_cast<int>(Anchor::p2p)].push_back(send);
    }
  }
}

}  // namespace stratagem::plan
