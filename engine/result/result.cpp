#include "engine/result/result.hpp"

#include <fstream>

#include "engine/scenario/error.hpp"

namespace stratagem::result {

const char* to_string(SpanKind k) {
  switch (k) {
    case SpanKind::forward:
      return "forward";
    case SpanKind::backward:
      return "backward";
    case SpanKind::backward_input:
      return "backward_input";
    case SpanKind::backward_weight:
      return "backward_weight";
    case SpanKind::recompute:
      return "recompute";
    case SpanKind::optimizer:
      return "optimizer";
    case SpanKind::loss_scale_check:
      return "loss_scale_check";
    case SpanKind::all_reduce:
      return "all_reduce";
    case SpanKind::reduce_scatter:
      return "reduce_scatter";
    case SpanKind::all_gather:
      return "all_gather";
    case SpanKind::broadcast:
      return "broadcast";
    case SpanKind::all_to_all:
      return "all_to_all";
    case SpanKind::send:
      return "send";
    case SpanKind::recv:
      return "recv";
  }
  return "?";
}

const char* to_string(CommCategory c) {
  switch (c) {
    case CommCategory::grad_sync:
      return "grad_sync";
    case CommCategory::param_gather:
      return "param_gather";
    case CommCategory::tied_embedding:
      return "tied_embedding";
    case CommCategory::found_inf:
      return "found_inf";
    case CommCategory::pipeline:
      return "pipeline";
    case CommCategory::tensor_parallel:
      return "tensor_parallel";
    case CommCategory::context_parallel:
      return "context_parallel";
    case CommCategory::expert_parallel:
      return "expert_parallel";
  }
  return "?";
}

CommCategory comm_category(plan::CommPurpose p) {
  switch (p) {
    case plan::CommPurpose::grad_sync:
      return CommCategory::grad_sync;
    case plan::CommPurpose::param_gather:
      return CommCategory::param_gather;
    case plan::CommPurpose::tied_embedding:
      return CommCategory::tied_embedding;
    case plan::CommPurpose::found_inf:
      return CommCategory::found_inf;
    case plan::CommPurpose::tensor_parallel:
      return CommCategory::tensor_parallel;
    case plan::CommPurpose::context_parallel:
      return CommCategory::context_parallel;
    case plan::CommPurpose::sequence_parallel_grads:
      return CommCategory::grad_sync;
    case plan::CommPurpose::expert_parallel:
      return CommCategory::expert_parallel;
  }
  return CommCategory::grad_sync;
}

SpanKind span_kind_of(const plan::Op& op) {
  if (const auto* c = std::get_if<plan::Compute>(&op.payload)) {
    return static_cast<SpanKind>(static_cast<int>(c->phase));  // phases come first, in order
  }
  if (const auto* c = std::get_if<plan::Collective>(&op.payload)) {
    return static_cast<SpanKind>(static_cast<int>(SpanKind::all_reduce) +
                                 static_cast<int>(c->kind));
  }
  return std::get<plan::P2P>(op.payload).send ? SpanKind::send : SpanKind::recv;
}
static_assert(static_cast<int>(plan::Phase::loss_scale_check) ==
              static_cast<int>(SpanKind::loss_scale_check));
static_assert(static_cast<int>(plan::CollectiveKind::all_to_all) + 7 ==
              static_cast<int>(SpanKind::all_to_all));

bool is_compute(SpanKind k) {
  return k <= SpanKind::loss_scale_check;
}
bool is_collective(SpanKind k) {
  return k >= SpanKind::all_reduce && k <= SpanKind::all_to_all;
}
bool is_p2p(SpanKind k) {
  return k == SpanKind::send || k == SpanKind::recv;
}
bool is_model_compute(SpanKind k) {
  return k <= SpanKind::recompute;
}

bool is_layer_work(const Span& s) {
  return is_model_compute(s.kind) ||
         (is_collective(s.kind) && (s.purpose == plan::CommPurpose::tensor_parallel ||
                                    s.purpose == plan::CommPurpose::expert_parallel));
}

double MemoryTrack::total_at(std::size_t i) const {
  double total = 0;
  for (double b : bytes[i]) total += b;
  return total;
}

const RankResult& RunResult::resolved(int rank) const {
  const RankResult& r = ranks.at(static_cast<std::size_t>(rank));
  return r.same_as >= 0 ? ranks.at(static_cast<std::size_t>(r.same_as)) : r;
}

namespace {

constexpr int kCommPurposeCount = 8;
static_assert(static_cast<int>(plan::CommPurpose::expert_parallel) == kCommPurposeCount - 1);
constexpr int kDTypeCount = 5;
static_assert(static_cast<int>(scenario::DType::fp8) == kDTypeCount - 1);

const std::vector<std::string> kSpanColumns = {
    "op",         "kind",     "stream", "purpose", "stage", "chunk",   "microbatch",
    "unit_begin", "unit_end", "peer",   "bytes",   "flops", "start_s", "end_s"};

// Looks a name up among an enum's to_string values.
template <typename E, typename ToString>
E enum_from(const std::string& name, int count, ToString to_str, const std::string& where) {
  for (int i = 0; i < count; ++i) {
    if (name == to_str(static_cast<E>(i))) return static_cast<E>(i);
  }
  throw SpecError(where, "unknown name \"" + name + "\"");
}

nlohmann::json span_row(const Span& s) {
  nlohmann::json purpose = nullptr;
  if (is_collective(s.kind)) purpose = plan::to_string(s.purpose);
  return nlohmann::json::array({s.op, to_string(s.kind), plan::to_string(s.stream), purpose,
                                s.stage, s.chunk, s.microbatch, s.unit_begin, s.unit_end, s.peer,
                                s.bytes, s.flops, s.start_s, s.end_s});
}

nlohmann::json rank_to_json(const RankResult& r) {
  nlohmann::json j = {{"rank", r.rank},
                      {"stage", r.stage},
                      {"dp", r.dp},
                      {"node", r.node},
                      {"capacity_bytes", r.capacity_bytes},
                      {"peak_memory_bytes", r.peak_memory_bytes},
                      {"host_bytes", r.host_bytes},
                      {"oom", r.oom}};
  // Written where not 0, so a result without tensor or context parallelism reads as before.
  if (r.tp > 0) j["tp"] = r.tp;
  if (r.cp > 0) j["cp"] = r.cp;
  if (r.same_as >= 0) {
    j["same_as"] = r.same_as;
    return j;
  }
  nlohmann::json classes = nlohmann::json::array();
  for (int c = 0; c < plan::kTensorClassCount; ++c) {
    classes.push_back(plan::to_string(static_cast<plan::TensorClass>(c)));
  }
  nlohmann::json samples = nlohmann::json::array();
  for (std::size_t i = 0; i < r.memory.time_s.size(); ++i) {
    nlohmann::json row = nlohmann::json::array({r.memory.time_s[i]});
    for (double b : r.memory.bytes[i]) row.push_back(b);
    samples.push_back(std::move(row));
  }
  j["memory"] = {{"classes", std::move(classes)}, {"samples", std::move(samples)}};
  nlohmann::json rows = nlohmann::json::array();
  for (const Span& s : r.spans) rows.push_back(span_row(s));
  j["spans"] = {{"columns", kSpanColumns}, {"rows", std::move(rows)}};
  return j;
}

nlohmann::json metrics_to_json(const Metrics& m) {
  nlohmann::json comm = nlohmann::json::object();
  for (int c = 0; c < kCommCategoryCount; ++c) {
    comm[to_string(static_cast<CommCategory>(c))] = m.comm_bytes[c];
  }
  nlohmann::json j = {{"step_time_s", m.step_time_s},
                      {"samples_per_s", m.samples_per_s},
                      {"tokens_per_s", m.tokens_per_s},
                      {"model_flops_per_step", m.model_flops_per_step},
                      {"mfu", m.mfu},
                      {"peak_flops",
                       {{"flops_per_s", m.peak_flops.flops_per_s},
                        {"dtype", scenario::to_string(m.peak_flops.dtype)}}},
                      {"bubble_fraction", m.bubble_fraction},
                      {"exposed_comm_s", m.exposed_comm_s},
                      {"comm_s", m.comm_s},
                      {"comm_bytes", std::move(comm)}};
  if (!m.losses.empty()) j["losses"] = m.losses;
  if (!m.step_times_s.empty()) j["step_times_s"] = m.step_times_s;
  return j;
}

Metrics metrics_from_json(const nlohmann::json& j, const std::string& where) {
  Metrics m;
  m.step_time_s = j.at("step_time_s").get<double>();
  m.samples_per_s = j.at("samples_per_s").get<double>();
  m.tokens_per_s = j.at("tokens_per_s").get<double>();
  m.model_flops_per_step = j.at("model_flops_per_step").get<double>();
  m.mfu = j.at("mfu").get<double>();
  m.peak_flops.flops_per_s = j.at("peak_flops").at("flops_per_s").get<double>();
  const std::string dtype = j.at("peak_flops").at("dtype").get<std::string>();
  m.peak_flops.dtype = enum_from<scenario::DType>(
      dtype, kDTypeCount, [](scenario::DType d) { return std::string(scenario::to_string(d)); },
      where + ".peak_flops.dtype");
  m.bubble_fraction = j.at("bubble_fraction").get<double>();
  m.exposed_comm_s = j.at("exposed_comm_s").get<double>();
  m.comm_s = j.value("comm_s", m.exposed_comm_s);  // results written before comm_s existed
  const auto& comm = j.at("comm_bytes");
  for (int c = 0; c < kCommCategoryCount; ++c) {
    const char* name = to_string(static_cast<CommCategory>(c));
    m.comm_bytes[c] = comm.contains(name) ? comm.at(name).get<double>() : 0.0;
  }
  if (j.contains("losses")) m.losses = j.at("losses").get<std::vector<double>>();
  if (j.contains("step_times_s")) {
    m.step_times_s = j.at("step_times_s").get<std::vector<double>>();
  }
  return m;
}

Span span_from_row(const nlohmann::json& row, const std::vector<int>& col,
                   const std::string& where) {
  auto at = [&](int column) -> const nlohmann::json& { return row.at(col[column]); };
  Span s;
  s.op = at(0).get<plan::OpId>();
  s.kind = enum_from<SpanKind>(
      at(1).get<std::string>(), kSpanKindCount,
      [](SpanKind k) { return std::string(to_string(k)); }, where);
  s.stream = enum_from<plan::Stream>(
      at(2).get<std::string>(), plan::kStreamCount,
      [](plan::Stream x) { return std::string(plan::to_string(x)); }, where);
  if (!at(3).is_null()) {
    s.purpose = enum_from<plan::CommPurpose>(
        at(3).get<std::string>(), kCommPurposeCount,
        [](plan::CommPurpose p) { return std::string(plan::to_string(p)); }, where);
  }
  s.stage = at(4).get<int>();
  s.chunk = at(5).get<int>();
  s.microbatch = at(6).get<int>();
  s.unit_begin = at(7).get<int>();
  s.unit_end = at(8).get<int>();
  s.peer = at(9).get<int>();
  s.bytes = at(10).get<double>();
  s.flops = at(11).get<double>();
  s.start_s = at(12).get<double>();
  s.end_s = at(13).get<double>();
  return s;
}

RankResult rank_from_json(const nlohmann::json& j, const std::string& where) {
  RankResult r;
  r.rank = j.at("rank").get<int>();
  r.stage = j.at("stage").get<int>();
  r.dp = j.at("dp").get<int>();
  r.node = j.at("node").get<int>();
  r.tp = j.value("tp", 0);
  r.cp = j.value("cp", 0);
  r.capacity_bytes = j.at("capacity_bytes").get<double>();
  r.peak_memory_bytes = j.at("peak_memory_bytes").get<double>();
  r.host_bytes = j.value("host_bytes", 0.0);
  r.oom = j.at("oom").get<bool>();
  if (j.contains("same_as")) {
    r.same_as = j.at("same_as").get<int>();
    return r;
  }
  // Memory classes and span columns are looked up by name, so a document that adds classes
  // or columns stays readable.
  const auto& memory = j.at("memory");
  std::vector<int> class_column(plan::kTensorClassCount, -1);
  const auto& classes = memory.at("classes");
  for (std::size_t i = 0; i < classes.size(); ++i) {
    const std::string name = classes[i].get<std::string>();
    for (int c = 0; c < plan::kTensorClassCount; ++c) {
      if (name == plan::to_string(static_cast<plan::TensorClass>(c))) {
        class_column[c] = static_cast<int>(i) + 1;
      }
    }
  }
  for (const auto& row : memory.at("samples")) {
    r.memory.time_s.push_back(row.at(0).get<double>());
    std::array<double, plan::kTensorClassCount> bytes{};
    for (int c = 0; c < plan::kTensorClassCount; ++c) {
      if (class_column[c] >= 0) bytes[c] = row.at(class_column[c]).get<double>();
    }
    r.memory.bytes.push_back(bytes);
  }
  const auto& spans = j.at("spans");
  const auto& columns = spans.at("columns");
  std::vector<int> col(kSpanColumns.size(), -1);
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const std::string name = columns[i].get<std::string>();
    for (std::size_t k = 0; k < kSpanColumns.size(); ++k) {
      if (name == kSpanColumns[k]) col[k] = static_cast<int>(i);
    }
  }
  for (std::size_t k = 0; k < col.size(); ++k) {
    if (col[k] < 0) throw SpecError(where + ".spans.columns", "missing column " + kSpanColumns[k]);
  }
  const auto& rows = spans.at("rows");
  r.spans.reserve(rows.size());
  for (const auto& row : rows) r.spans.push_back(span_from_row(row, col, where + ".spans"));
  return r;
}

}  // namespace

nlohmann::json to_json(const RunResult& r) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankResult& rank : r.ranks) ranks.push_back(rank_to_json(rank));
  return {{"format", kFormatName},
          {"version", kFormatVersion},
          {"executor", {{"name", r.executor}, {"hardware", r.hardware}, {"events", r.events}}},
          {"scenario", scenario::to_json(r.scenario)},
          {"metrics", metrics_to_json(r.metrics)},
          {"ranks", std::move(ranks)}};
}

RunResult result_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string()) {
    throw SpecError(source, "not a stratagem result (no \"format\" field)");
  }
  const std::string format = j["format"].get<std::string>();
  if (format != kFormatName) {
    throw SpecError(source, "not a stratagem result (format \"" + format + "\", expected \"" +
                                kFormatName + "\")");
  }
  if (!j.contains("version") || !j["version"].is_number_integer()) {
    throw SpecError(source, "missing integer \"version\"");
  }
  const int version = j["version"].get<int>();
  if (version > kFormatVersion) {
    throw SpecError(source, "result format version " + std::to_string(version) +
                                " is newer than this stratagem reads (up to " +
                                std::to_string(kFormatVersion) + "); upgrade stratagem");
  }
  if (version < 1)
    throw SpecError(source, "invalid result format version " + std::to_string(version));
  try {
    RunResult r;
    const auto& executor = j.at("executor");
    r.executor = executor.at("name").get<std::string>();
    r.hardware = executor.at("hardware").get<std::string>();
    r.events = executor.value("events", std::uint64_t{0});
    r.scenario = scenario::parse_scenario(j.at("scenario"));
    r.metrics = metrics_from_json(j.at("metrics"), source + ": metrics");
    const auto& ranks = j.at("ranks");
    r.ranks.reserve(ranks.size());
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      r.ranks.push_back(rank_from_json(ranks[i], source + ": ranks[" + std::to_string(i) + "]"));
    }
    for (const RankResult& rank : r.ranks) {
      if (rank.same_as >= static_cast<int>(r.ranks.size()) ||
          (rank.same_as >= 0 && r.ranks[rank.same_as].same_as >= 0)) {
        throw SpecError(source + ": ranks[" + std::to_string(rank.rank) + "].same_as",
                        "must name a rank with its own spans");
      }
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw SpecError(source, std::string("malformed result: ") + e.what());
  }
}

void save_result(const RunResult& r, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw RuntimeError("cannot write " + path);
  out << to_json(r).dump() << "\n";
  if (!out) throw RuntimeError("error writing " + path);
}

RunResult load_result(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw SpecError(path, "cannot open file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw SpecError(path, std::string("not valid JSON: ") + e.what());
  }
  return result_from_json(j, path);
}

Span span_of(const plan::StepPlan& plan, const plan::Op& op, double start_s, double end_s) {
  Span s;
  s.op = op.id;
  s.kind = span_kind_of(op);
  s.stream = op.stream;
  s.stage = plan.layout.coords[op.rank].stage;
  s.start_s = start_s;
  s.end_s = end_s;
  if (const auto* c = std::get_if<plan::Compute>(&op.payload)) {
    s.stage = c->stage;
    s.chunk = c->chunk;
    s.microbatch = c->microbatch;
    s.unit_begin = c->unit_begin;
    s.unit_end = c->unit_end;
    s.bytes = c->bytes;
    s.flops = c->flops;
  } else if (const auto* c = std::get_if<plan::Collective>(&op.payload)) {
    s.purpose = c->purpose;
    s.unit_begin = c->unit_begin;
    s.unit_end = c->unit_end;
    s.bytes = c->bytes;
  } else {
    const auto& p = std::get<plan::P2P>(op.payload);
    s.chunk = p.chunk;
    s.microbatch = p.microbatch;
    s.peer = p.peer;
    s.bytes = p.bytes;
  }
  return s;
}

}  // namespace stratagem::result
