#include "engine/plan/print.hpp"

#include <cmath>
#include <cstdio>

namespace stratagem::plan {

namespace {

std::string human(double value, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (std::abs(value) >= 1000.0 && i < 5) {
    value /= 1000.0;
    ++i;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g %s%s", value, prefixes[i], unit);
  return buf;
}

std::string units_text(int b, int e) {
  return "units [" + std::to_string(b) + "," + std::to_string(e) + ")";
}

}  // namespace

std::string kind_label(const Op& op) {
  if (const auto* c = std::get_if<Compute>(&op.payload)) return to_string(c->phase);
  if (const auto* c = std::get_if<Collective>(&op.payload)) return to_string(c->kind);
  const auto& p = std::get<P2P>(op.payload);
  return p.send ? "send" : "recv";
}

std::string describe(const StepPlan& plan, const Op& op) {
  std::string s = "#" + std::to_string(op.id) + " " + to_string(op.stream) + " " + kind_label(op);
  if (const auto* c = std::get_if<Compute>(&op.payload)) {
    s += " stage " + std::to_string(c->stage);
    if (plan.layout.chunks > 1) s += " chunk " + std::to_string(c->chunk);
    if (c->microbatch >= 0) s += " mb " + std::to_string(c->microbatch);
    if (c->unit_end > c->unit_begin) s += " " + units_text(c->unit_begin, c->unit_end);
    s += " " + human(c->flops + c->flops_16bit + c->attention_flops, "FLOP") + " " +
         human(c->bytes, "B");
    if (c->on_host) s += " (host)";
  } else if (const auto* c = std::get_if<Collective>(&op.payload)) {
    s += " " + human(c->bytes, "B") + " on " + plan.groups[c->group].label + " (" +
         std::to_string(plan.groups[c->group].ranks.size()) + " ranks) " + to_string(c->purpose);
    if (c->bucket >= 0) s += " bucket " + std::to_string(c->bucket);
    if (c->unit_end > c->unit_begin) s += " " + units_text(c->unit_begin, c->unit_end);
  } else {
    const auto& p = std::get<P2P>(op.payload);
    s += std::string(p.send ? " to " : " from ") + "rank " + std::to_string(p.peer) + " " +
         (p.gradient ? "grad" : "act") + " mb " + std::to_string(p.microbatch) + " " +
         human(p.bytes, "B");
  }
  const auto deps = plan.deps_of(op);
  if (!deps.empty()) {
    s += " deps";
    for (std::size_t i = 0; i < deps.size(); ++i) s += (i ? ",#" : " #") + std::to_string(deps[i]);
  }
  for (const auto& e : plan.effects_of(op)) {
    s += std::string(" ") + (e.bytes > 0 ? "+" : "-") + human(std::abs(e.bytes), "B") + " " +
         to_string(e.cls) + (e.at_end ? "@end" : "@start");
  }
  return s;
}

void print_rank(std::ostream& out, const StepPlan& plan, int rank) {
  const auto& L = plan.layout;
  const auto& c = L.coords.at(rank);
  const auto& info = plan.ranks.at(rank);
  out << "rank " << rank << " of " << L.world << ": stage " << c.stage << ", dp index " << c.dp;
  if (L.tp > 1) out << ", tp index " << c.tp;
  out << ", node " << c.node << "\n";
  for (int ch = 0; ch < L.chunks; ++ch) {
    const auto [b, e] = L.stage_chunk_units[c.stage][ch];
    out << "  chunk " << ch << ": units [" << b << "," << e << ") = " << L.units[b].name << " .. "
        << L.units[e - 1].name << "\n";
  }
  out << "  resident:";
  for (int k = 0; k < kTensorClassCount; ++k) {
    if (info.initial[k] > 0) {
      out << " " << to_string(static_cast<TensorClass>(k)) << " " << human(info.initial[k], "B");
    }
  }
  if (info.host_bytes > 0) out << " (host: " << human(info.host_bytes, "B") << ")";
  out << "\n";
  if (!info.built) {
    out << "  (folded: same ops as rank " << info.representative << "; use --no-fold)\n";
    return;
  }
  for (int st = 0; st < kStreamCount; ++st) {
    const auto& ids = info.streams[st];
    if (ids.empty()) continue;
    out << "  stream " << to_string(static_cast<Stream>(st)) << " (" << ids.size() << " ops)\n";
    for (OpId id : ids) out << "    " << describe(plan, plan.ops[id]) << "\n";
  }
}

nlohmann::json rank_to_json(const StepPlan& plan, int rank) {
  const auto& info = plan.ranks.at(rank);
  const auto& c = plan.layout.coords.at(rank);
  nlohmann::json resident = nlohmann::json::object();
  for (int k = 0; k < kTensorClassCount; ++k) {
    resident[to_string(static_cast<TensorClass>(k))] = info.initial[k];
  }
  nlohmann::json ops = nlohmann::json::array();
  if (info.built) {
    for (int st = 0; st < kStreamCount; ++st) {
      for (OpId id : info.streams[st]) {
        const Op& op = plan.ops[id];
        nlohmann::json j = {
            {"id", op.id}, {"stream", to_string(op.stream)}, {"kind", kind_label(op)}};
        if (const auto* x = std::get_if<Compute>(&op.payload)) {
          j.update({{"stage", x->stage},
                    {"chunk", x->chunk},
                    {"microbatch", x->microbatch},
                    {"units", {x->unit_begin, x->unit_end}},
                    {"flops", x->flops},
                    {"bytes", x->bytes},
                    {"on_host", x->on_host}});
        } else if (const auto* x = std::get_if<Collective>(&op.payload)) {
          j.update({{"bytes", x->bytes},
                    {"group", plan.groups[x->group].ranks},
                    {"group_label", plan.groups[x->group].label},
                    {"purpose", to_string(x->purpose)},
                    {"bucket", x->bucket},
                    {"units", {x->unit_begin, x->unit_end}}});
        } else {
          const auto& p = std::get<P2P>(op.payload);
          j.update({{"peer", p.peer},
                    {"bytes", p.bytes},
                    {"microbatch", p.microbatch},
                    {"chunk", p.chunk},
                    {"gradient", p.gradient},
                    {"transfer", p.transfer}});
          if (p.gather > 1) j["gather"] = p.gather;
        }
        j["deps"] = std::vector<OpId>(plan.deps_of(op).begin(), plan.deps_of(op).end());
        nlohmann::json fx = nlohmann::json::array();
        for (const auto& e : plan.effects_of(op)) {
          fx.push_back({{"class", to_string(e.cls)},
                        {"bytes", e.bytes},
                        {"at", e.at_end ? "end" : "start"}});
        }
        if (!fx.empty()) j["memory"] = fx;
        ops.push_back(std::move(j));
      }
    }
  }
  return {{"rank", rank},
          {"stage", c.stage},
          {"dp_index", c.dp},
          {"node", c.node},
          {"built", info.built},
          {"representative", info.representative},
          {"resident", resident},
          {"host_bytes", info.host_bytes},
          {"ops", ops}};
}

}  // namespace stratagem::plan
