// The timeline's tooltip: what the block under the mouse is, where it runs (rank and mesh
// coordinate, stream), what it carries and when; tensor-parallel collectives name their group.
#include "viz/ui/panels.hpp"

namespace stratagem::viz {

void span_tooltip(const Document& doc, int rank, const result::Span& s, int count, const Block& b,
                  const TimeView& view) {
  ImGui::BeginTooltip();
  if (count > 1) {
    ImGui::Text("%d ops merged (narrower than a pixel; zoom in)", count);
    ImGui::Text("from %s to %s", format_duration(view.to_time(b.x0)).c_str(),
                format_duration(view.to_time(b.x1)).c_str());
    ImGui::EndTooltip();
    return;
  }
  ImGui::TextUnformatted(result::to_string(s.kind));
  if (is_tensor_parallel(s)) {
    ImGui::SameLine();
    ImGui::TextUnformatted("(tensor-parallel)");
  }
  if (s.microbatch >= 0) {
    ImGui::SameLine();
    ImGui::Text(" micro-batch %d", s.microbatch);
  }
  ImGui::Separator();
  const Mesh& mesh = doc.mesh();
  if (mesh.tensor_parallel()) {
    ImGui::Text("%s · chunk %d · %s stream", rank_label(mesh, rank).c_str(), s.chunk,
                plan::to_string(s.stream));
  } else {
    ImGui::Text("rank %d · stage %d · chunk %d · %s stream", rank, s.stage, s.chunk,
                plan::to_string(s.stream));
  }
  if (doc.resolved_rank(rank) != rank) {
    ImGui::Text("(folded: same as rank %d)", doc.resolved_rank(rank));
  }
  if (s.unit_end > s.unit_begin) {
    ImGui::Text("layers (units) %d..%d", s.unit_begin, s.unit_end - 1);
  }
  if (result::is_collective(s.kind) && is_tensor_parallel(s)) {
    // "all_reduce tensor_parallel over tp(stage 0, dp 0) · ranks 0..7"
    ImGui::TextUnformatted(collective_summary(mesh, rank, s).c_str());
    ImGui::Text("buffer %s", format_bytes(s.bytes).c_str());
  } else if (result::is_collective(s.kind)) {
    ImGui::Text("purpose %s · buffer %s", plan::to_string(s.purpose),
                format_bytes(s.bytes).c_str());
  } else if (result::is_p2p(s.kind)) {
    ImGui::Text("%s rank %d · %s", s.kind == result::SpanKind::send ? "to" : "from", s.peer,
                format_bytes(s.bytes).c_str());
  } else {
    ImGui::Text("%s · %s moved", format_flops(s.flops).c_str(), format_bytes(s.bytes).c_str());
  }
  ImGui::Text("start %s · duration %s", format_duration(s.start_s).c_str(),
              format_duration(s.end_s - s.start_s).c_str());
  ImGui::TextDisabled("op #%d · click for its dependencies", s.op);
  ImGui::EndTooltip();
}

}  // namespace stratagem::viz
