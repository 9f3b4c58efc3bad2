#pragma once
// A canonical text form of a StepPlan (every op with its payload, deps and memory effects,
// groups, collective instances, transfers, resident bytes and stream orders) and a 64-bit
// FNV-1a digest of it, for golden tests that must stay byte-identical across refactors.
#include <cstdint>
#include <cstdio>
#include <string>
#include <variant>

#include "engine/plan/plan.hpp"

namespace stratagem::test {

class CanonicalWriter {
 public:
  void num(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g ", v);
    out_ += buf;
  }
  void i(long long v) { out_ += std::to_string(v) + ' '; }
  void s(const std::string& v) { out_ += v + ' '; }
  void nl() { out_ += '\n'; }
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

inline std::string canonical_plan(const plan::StepPlan& p) {
  CanonicalWriter w;
  w.s("layout");
  w.i(p.layout.world);
  w.i(p.layout.dp);
  w.i(p.layout.pp);
  w.i(p.layout.chunks);
  w.i(p.folded);
  w.num(p.model_flops_per_step);
  w.nl();
  for (const auto& u : p.layout.units) {
    w.s(u.name);
    w.num(u.params);
    w.num(u.gather_params);
    w.num(u.fwd_flops);
    w.num(u.act_bytes);
    w.num(u.full_act_bytes);
    w.num(u.recompute_flops);
    w.num(u.gemm_dim);
    w.nl();
  }
  for (const auto& g : p.groups) {
    w.s(g.label);
    w.i(g.intra_node);
    w.i(g.nodes_spanned);
    for (int r : g.ranks) w.i(r);
    w.nl();
  }
  for (const auto& op : p.ops) {
    w.i(op.id);
    w.i(op.rank);
    w.s(plan::to_string(op.stream));
    if (const auto* c = std::get_if<plan::Compute>(&op.payload)) {
      w.s(plan::to_string(c->phase));
      w.i(c->stage);
      w.i(c->chunk);
      w.i(c->microbatch);
      w.i(c->unit_begin);
      w.i(c->unit_end);
      w.num(c->flops);
      w.num(c->bytes);
      w.num(c->gemm_dim);
      w.i(c->kernels);
      w.i(static_cast<int>(c->dtype));
      w.i(c->on_host);
      w.num(c->params);
    } else if (const auto* c = std::get_if<plan::Collective>(&op.payload)) {
      w.s(plan::to_string(c->kind));
      w.s(plan::to_string(c->purpose));
      w.i(c->group);
      w.i(c->instance);
      w.num(c->bytes);
      w.i(static_cast<int>(c->dtype));
      w.i(c->bucket);
      w.i(c->unit_begin);
      w.i(c->unit_end);
    } else {
      const auto& t = std::get<plan::P2P>(op.payload);
      w.s(t.send ? "send" : "recv");
      w.i(t.peer);
      w.i(t.transfer);
      w.num(t.bytes);
      w.i(t.microbatch);
      w.i(t.chunk);
      w.i(t.gradient);
    }
    w.s("deps");
    for (plan::OpId d : p.deps_of(op)) w.i(d);
    w.s("mem");
    for (const auto& e : p.effects_of(op)) {
      w.s(plan::to_string(e.cls));
      w.num(e.bytes);
      w.i(e.at_end);
    }
    w.nl();
  }
  for (const auto& c : p.collectives) {
    w.s("instance");
    w.i(c.group);
    w.s(plan::to_string(c.kind));
    w.num(c.bytes);
    for (plan::OpId id : c.ops) w.i(id);
    w.nl();
  }
  for (const auto& t : p.transfers) {
    w.s("transfer");
    w.i(t.send);
    w.i(t.recv);
    w.i(t.src);
    w.i(t.dst);
    w.num(t.bytes);
    w.nl();
  }
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    const auto& info = p.ranks[r];
    w.s("rank");
    w.i(static_cast<long long>(r));
    w.i(info.built);
    w.i(info.representative);
    const auto& c = p.layout.coords[r];
    w.i(c.dp);
    w.i(c.stage);
    w.i(c.node);
    w.i(c.local_rank);
    for (double b : info.initial) w.num(b);
    w.num(info.host_bytes);
    for (int s = 0; s < plan::kStreamCount; ++s) {
      if (info.streams[s].empty()) continue;  // streams added later stay out of old digests
      w.s(plan::to_string(static_cast<plan::Stream>(s)));
      for (plan::OpId id : info.streams[s]) w.i(id);
    }
    w.nl();
  }
  return w.text();
}

inline std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  return h;
}

inline std::string hex(std::uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace stratagem::test
