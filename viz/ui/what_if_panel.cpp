// What-if: the strategy and hardware knobs of the loaded scenario. Every change is checked
// by the scenario rules at once (an invalid combination shows the reason) and re-simulated
// on a worker thread; the timeline keeps the previous picture until the new one is ready.
#include <algorithm>

#include "engine/scenario/presets.hpp"
#include "viz/model/compare.hpp"
#include "viz/ui/panels.hpp"

namespace stratagem::viz {
namespace {

template <typename E>
bool enum_combo(const char* label, E& value, std::initializer_list<E> all) {
  bool changed = false;
  if (ImGui::BeginCombo(label, scenario::to_string(value))) {
    for (E e : all) {
      if (ImGui::Selectable(scenario::to_string(e), e == value)) {
        changed = e != value;
        value = e;
      }
    }
    ImGui::EndCombo();
  }
  return changed;
}

bool preset_combo(const char* label, std::string& value, scenario::PresetKind kind,
                  const std::string& current) {
  bool changed = false;
  const std::string scenario_choice = current + " (scenario)";
  const std::string shown = value.empty() ? scenario_choice : value;
  if (ImGui::BeginCombo(label, shown.c_str())) {
    if (ImGui::Selectable(scenario_choice.c_str(), value.empty())) {
      changed = !value.empty();
      value.clear();
    }
    for (const auto& name : scenario::preset_names(kind)) {
      if (ImGui::Selectable(name.c_str(), name == value)) {
        changed = name != value;
        value = name;
      }
    }
    ImGui::EndCombo();
  }
  return changed;
}

bool int_knob(const char* label, int& v) {
  const int before = v;
  ImGui::InputInt(label, &v, 1, 4);
  v = std::max(1, v);
  return v != before;
}

}  // namespace

void draw_what_if_panel(ViewState& st, ImVec2 size) {
  ImGui::BeginChild("what_if", size, true);
  if (!st.what_if) {
    ImGui::TextWrapped(
        "Start the viewer with --scenario <file or shipped name> to change dp, tp (and "
        "sequence parallelism), cp, pp, the schedule, micro-batches, sharding, precision (fp8 too), "
        "attention kernel, recomputation, GPU and cluster and see each change re-simulated.");
    ImGui::EndChild();
    return;
  }
  auto& w = *st.what_if;
  auto& k = w.knobs;
  using scenario::Precision;
  using scenario::Recompute;
  using scenario::Schedule;
  using scenario::Sharding;
  ImGui::Text("What-if on %s", w.base.name.c_str());
  const float col = std::min(ImGui::GetContentRegionAvail().x * 0.5f - 8, 330.0f);
  ImGui::BeginGroup();
  ImGui::PushItemWidth(col * 0.55f);
  int_knob("dp (data-parallel)", k.dp);
  int_knob("tp (tensor-parallel)", k.tp);
  if (k.tp > 1) {
    ImGui::Checkbox("sequence parallel", &k.sequence_parallel);
    if (ImGui::IsItemHovered()) {
      ImGui::SetTooltip(
          "Megatron-LM sequence parallelism: each TP all-reduce becomes an all-gather and a\n"
          "reduce-scatter, and norms and dropout run on seq_len / tp tokens per rank.");
    }
  }
  int_knob("cp (context-parallel)", k.cp);
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip(
        "Megatron-LM context parallelism: each rank holds seq_len / cp tokens; K and V travel\n"
        "around the cp ranks in a ring, overlapped with the attention core (flash only).");
  }
  int_knob("pp (pipeline stages)", k.pp);
  enum_combo("schedule", k.schedule,
             {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved, Schedule::zb_h1,
              Schedule::interleaved_zb, Schedule::zbv, Schedule::dualpipev});
  if (k.schedule == Schedule::interleaved || k.schedule == Schedule::interleaved_zb) {
    int_knob("chunks per rank", k.chunks);
  }
  int_knob("micro-batches", k.micro_batches);
  int_knob("micro-batch size", k.micro_batch_size);
  ImGui::PopItemWidth();
  ImGui::EndGroup();
  ImGui::SameLine(col + 16);
  ImGui::BeginGroup();
  ImGui::PushItemWidth(col * 0.55f);
  enum_combo(
      "sharding", k.sharding,
      {Sharding::none, Sharding::zero1, Sharding::zero2, Sharding::zero3, Sharding::fsdp_full_shard,
       Sharding::fsdp_shard_grad_op, Sharding::fsdp_hybrid_shard});
  enum_combo("precision", k.precision,
             {Precision::no, Precision::fp16, Precision::bf16, Precision::fp8});
  enum_combo("attention", k.attention, {scenario::Attention::flash, scenario::Attention::eager});
  enum_combo("recompute", k.recompute,
             {Recompute::none, Recompute::selective, Recompute::selective_op, Recompute::full});
  preset_combo("GPU", k.gpu, scenario::PresetKind::gpu, w.base.cluster.gpu.name);
  preset_combo("cluster", k.cluster, scenario::PresetKind::cluster, w.base.cluster.name);
  ImGui::PopItemWidth();
  ImGui::EndGroup();
  st.submit_what_if();

  ImGui::Separator();
  ImGui::Text("world %d GPUs = dp %d × tp %d × cp %d × pp %d", world_of(k), k.dp, k.tp, k.cp,
              k.pp);
  const std::int64_t global = std::int64_t{k.micro_batch_size} * k.micro_batches * k.dp;
  ImGui::Text("global batch %lld sequences = micro-batch size × micro-batches × dp",
              static_cast<long long>(global));
  if (!w.error.empty()) {
    ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "This combination cannot run:");
    ImGui::TextWrapped("%s", w.error.c_str());
  } else if (w.worker->busy()) {
    ImGui::TextColored(ImVec4(1, 0.85f, 0.3f, 1), "simulating...");
  } else if (w.doc < 0) {
    ImGui::TextDisabled(
        "Change a knob: the result appears here and in the comparison as 'what-if'.");
  } else {
    const Document& d = *st.docs[w.doc];
    const auto& m = d.result().metrics;
    ImGui::TextDisabled("simulated in %s, off the UI thread",
                        format_duration(w.last_wall_s).c_str());
    ImGui::Text("%s", strategy_summary(d.result().scenario).c_str());
    ImGui::Text("step %s · %.0f tokens/s · MFU %.1f%% · bubble %.1f%% · exposed comm %s",
                format_duration(m.step_time_s).c_str(), m.tokens_per_s, 100 * m.mfu,
                100 * m.bubble_fraction, format_duration(m.exposed_comm_s).c_str());
    ImGui::Text(
        "peak memory %s of %s", format_bytes(d.peak_memory_bytes()).c_str(),
        format_bytes(d.result().ranks.empty() ? 0 : d.result().ranks[0].capacity_bytes).c_str());
    if (d.any_oom()) {
      ImGui::SameLine();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(im_col(palette::kOom)), "OUT OF MEMORY");
    }
    if (ImGui::Button("Show in the timeline")) {
      st.primary = w.doc;
      st.clear_selection();
      st.fit_pending = true;
    }
    ImGui::SameLine();
    if (ImGui::Button("Keep for comparison")) {
      auto copy = std::make_shared<Document>(d.result(), "what-if " + std::to_string(++w.kept));
      copy->set_plan(d.plan());
      st.add_doc(std::move(copy));
    }
  }
  ImGui::EndChild();
}

}  // namespace stratagem::viz
