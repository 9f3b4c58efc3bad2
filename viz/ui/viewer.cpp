#include "viz/ui/viewer.hpp"

#define GL_GLEXT_PROTOTYPES
// GLFW brings in GL/gl.h, which glext.h extends (framebuffer objects for off-screen frames).
#include <GLFW/glfw3.h>

#include <GL/glext.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "engine/scenario/error.hpp"
#include "viz/model/input_script.hpp"
#include "viz/ui/image.hpp"
#include "viz/ui/panels.hpp"

namespace stratagem::viz {

Panel parse_panel(const std::string& name) {
  if (name == "all") return Panel::all;
  if (name == "timeline") return Panel::timeline;
  if (name == "memory") return Panel::memory;
  if (name == "compare") return Panel::compare;
  if (name == "whatif" || name == "what-if") return Panel::what_if;
  throw SpecError("--panel",
                  "unknown panel '" + name + "'; valid: timeline, memory, compare, whatif, all");
}

namespace {

std::string glfw_error;  // set by the GLFW error callback (GLFW has no user pointer for it)

void load_documents(ViewState& st, const ViewerOptions& o) {
  st.layout_options.collapse_replicas = o.collapse_replicas;
  for (const auto& f : o.results) st.add_doc(Document::load(f));
  if (o.scenario.empty()) {
    if (!o.strategies.empty()) throw SpecError("--strategies", "needs --scenario");
    if (!o.what_if.empty()) throw SpecError("--what-if", "needs --scenario");
    if (st.docs.empty()) throw SpecError("view", "give result files, --scenario, or both");
  } else {
    const scenario::Scenario base = scenario::load_scenario(o.scenario);
    WhatIf knobs = what_if_of(base);
    set_knobs(knobs, o.what_if);
    // Invalid edits on the command line are input errors (exit 2), not a picture.
    const scenario::Scenario edited = o.what_if.empty() ? base : apply_what_if(base, knobs);
    if (!o.strategies.empty()) {
      std::vector<std::string> skipped;
      for (auto& d : simulate_variants(edited, o.strategies, skipped)) st.add_doc(std::move(d));
      for (auto& s : skipped) st.notes.push_back("skipped " + s);
    }
    // The scenario itself is simulated when nothing else is loaded (before the window shows;
    // later edits run in the background), else on the first change in the What-if tab.
    const bool simulate_now = st.docs.empty();
    st.start_what_if(base, knobs, simulate_now);
    if (simulate_now) {
      st.what_if->worker->wait_idle();
      st.poll_what_if();
      if (st.docs.empty()) throw SpecError(o.scenario, st.what_if->error);
    }
    st.bottom_tab = o.strategies.empty() && o.results.empty() ? 1 : 0;
  }
  const int n = static_cast<int>(st.docs.size());
  if (o.overlay) {
    if (n < 2)
      throw SpecError("--overlay", "needs two results (the second is drawn over the first)");
    st.overlay = 1;
  }
  if (o.pair) {
    const int b = o.overlay ? 2 : 1;
    if (n <= b) throw SpecError("--pair", "needs another result to draw below the first");
    st.pair = b;
  }
  if (o.select_op != plan::kNoOp) st.select(0, o.select_op);
  st.cursor_s = o.cursor_s;
  if (o.range_s) {
    st.has_range = true;
    st.range_begin_s = o.range_s->first;
    st.range_end_s = o.range_s->second;
  }
  if (o.panel == Panel::what_if) st.bottom_tab = 1;
}

void draw_toolbar_combo(const char* label, int& value, const ViewState& st, bool allow_none) {
  const char* shown = value >= 0 && value < static_cast<int>(st.docs.size())
                          ? st.docs[value]->label().c_str()
                          : "none";
  ImGui::SetNextItemWidth(170);
  if (ImGui::BeginCombo(label, shown)) {
    if (allow_none && ImGui::Selectable("none", value < 0)) value = -1;
    for (int i = 0; i < static_cast<int>(st.docs.size()); ++i) {
      ImGui::PushID(i);
      if (ImGui::Selectable(st.docs[i]->label().c_str(), value == i)) value = i;
      ImGui::PopID();
    }
    ImGui::EndCombo();
  }
}

void draw_frame(ViewState& st, Panel panel, int& force_tab) {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(vp->Pos);
  ImGui::SetNextWindowSize(vp->Size);
  ImGui::Begin("stratagem", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize |
                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus |
                   ImGuiWindowFlags_NoBackground);  // glClear paints it: one fill, not two
  draw_toolbar(st);
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  switch (panel) {
    case Panel::timeline:
      draw_timeline_panel(st, avail);
      break;
    case Panel::memory:
      draw_memory_panel(st, avail);
      break;
    case Panel::compare:
      draw_compare_panel(st, avail);
      break;
    case Panel::all:
    case Panel::what_if: {
      draw_timeline_panel(st, ImVec2(avail.x, std::floor(avail.y * 0.56f)));
      const ImVec2 bottom = ImGui::GetContentRegionAvail();
      const float mem_w = std::floor(bottom.x * 0.48f);
      draw_memory_panel(st, ImVec2(mem_w, bottom.y));
      ImGui::SameLine();
      ImGui::BeginGroup();
      if (ImGui::BeginTabBar("bottom")) {
        const ImGuiTabItemFlags f0 = force_tab == 0 ? ImGuiTabItemFlags_SetSelected : 0;
        const ImGuiTabItemFlags f1 = force_tab == 1 ? ImGuiTabItemFlags_SetSelected : 0;
        if (ImGui::BeginTabItem("Throughput and comparison", nullptr, f0)) {
          st.bottom_tab = 0;
          draw_compare_panel(st, ImGui::GetContentRegionAvail());
          ImGui::EndTabItem();
        }
        if (ImGui::BeginTabItem("What-if", nullptr, f1)) {
          st.bottom_tab = 1;
          draw_what_if_panel(st, ImGui::GetContentRegionAvail());
          ImGui::EndTabItem();
        }
        ImGui::EndTabBar();
      }
      ImGui::EndGroup();
      force_tab = -1;
      break;
    }
  }
  ImGui::End();
}

struct Window {
  GLFWwindow* handle = nullptr;
  bool imgui = false;
  ~Window() {
    if (imgui) {
      ImGui_ImplOpenGL3_Shutdown();
      ImGui_ImplGlfw_Shutdown();
      ImGui::DestroyContext();
    }
    if (handle) glfwDestroyWindow(handle);
    glfwTerminate();
  }
};

void open_window(Window& w, const ViewerOptions& o, bool visible) {
  glfwSetErrorCallback([](int, const char* text) { glfw_error = text; });
  if (!glfwInit()) {
    throw RuntimeError("cannot open a window: " + glfw_error +
                       " (no display? run under `xvfb-run -a` for --screenshot)");
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  glfwWindowHint(GLFW_VISIBLE, visible ? GLFW_TRUE : GLFW_FALSE);
  w.handle = glfwCreateWindow(o.width, o.height, "stratagem view", nullptr, nullptr);
  if (!w.handle) throw RuntimeError("cannot create an OpenGL 3.3 window: " + glfw_error);
  glfwMakeContextCurrent(w.handle);
  glfwSwapInterval(o.bench_frames > 0 ? 0 : 1);
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  w.imgui = true;
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // the layout is fixed; nothing to remember between runs
  ImGui::StyleColorsDark();
  ImGui::GetStyle().FrameRounding = 2;
  // DejaVu Sans when the system has it (Debian's fonts-dejavu-core), else ImGui's own font.
  const char* font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
  if (!std::filesystem::exists(font) || !io.Fonts->AddFontFromFileTTF(font, 15.0f)) {
    io.Fonts->AddFontDefault();
  }
  ImGui_ImplGlfw_InitForOpenGL(w.handle, true);
  ImGui_ImplOpenGL3_Init("#version 330");
}

// One frame: input, panels, draw into the bound framebuffer. `headless` replaces the mouse by
// `scripted` (none: away from the window) and fixes the display size (the window may be
// smaller than the screenshot).
double render_frame(ViewState& st, const ViewerOptions& o, int& force_tab, bool headless,
                    const InputFrame* scripted = nullptr) {
  glfwPollEvents();
  const auto t0 = std::chrono::steady_clock::now();
  if (st.poll_what_if() && st.what_if && st.primary == st.what_if->doc) st.fit_pending = true;
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  ImGuiIO& io = ImGui::GetIO();
  if (headless) {
    io.DisplaySize = ImVec2(static_cast<float>(o.width), static_cast<float>(o.height));
    io.DisplayFramebufferScale = ImVec2(1, 1);
    io.MousePos = scripted ? ImVec2(scripted->x, scripted->y) : ImVec2(-FLT_MAX, -FLT_MAX);
    io.MouseDown[0] = scripted && scripted->left;
    io.MouseDown[1] = scripted && scripted->right;
    io.MouseWheel = scripted ? scripted->wheel : 0;
  }
  ImGui::NewFrame();
  draw_frame(st, o.panel, force_tab);
  ImGui::Render();
  const double build_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ImDrawData* dd = ImGui::GetDrawData();
  glViewport(0, 0, static_cast<int>(dd->DisplaySize.x * dd->FramebufferScale.x),
             static_cast<int>(dd->DisplaySize.y * dd->FramebufferScale.y));
  const ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
  glClearColor(bg.x, bg.y, bg.z, 1);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  return build_s;
}

void apply_view_options(ViewState& st, const ViewerOptions& o) {
  if (o.zoom_s) {
    st.time.fit(o.zoom_s->first, o.zoom_s->second, st.timeline_width_px);
    st.fit_pending = false;
  }
}

Image screenshot(ViewState& st, const ViewerOptions& o, int& force_tab) {
  GLuint fbo = 0, color = 0;
  glGenFramebuffers(1, &fbo);
  glBindFramebuffer(GL_FRAMEBUFFER, fbo);
  glGenRenderbuffers(1, &color);
  glBindRenderbuffer(GL_RENDERBUFFER, color);
  glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, o.width, o.height);
  glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, color);
  if (glCheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE) {
    throw RuntimeError("cannot render off-screen: framebuffer incomplete");
  }
  // Layout settles over a few frames (first frame measures, the next ones place).
  for (int i = 0; i < 5; ++i) {
    render_frame(st, o, force_tab, true);
    if (i == 0) apply_view_options(st, o);
  }
  // Scripted input, then a few frames with the mouse resting where the script left it (so a
  // tooltip under it is in the picture).
  const auto input = parse_input_script(o.input);
  for (const InputFrame& f : input) render_frame(st, o, force_tab, true, &f);
  if (!input.empty()) {
    InputFrame rest = input.back();
    rest.left = rest.right = false;
    rest.wheel = 0;
    for (int i = 0; i < 3; ++i) render_frame(st, o, force_tab, true, &rest);
  }
  Image img;
  img.width = o.width;
  img.height = o.height;
  img.rgba.resize(static_cast<std::size_t>(o.width) * o.height * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, o.width, o.height, GL_RGBA, GL_UNSIGNED_BYTE, img.rgba.data());
  // OpenGL's rows go bottom-up; PNG's top-down.
  const std::size_t row = static_cast<std::size_t>(o.width) * 4;
  for (int y = 0; y < o.height / 2; ++y) {
    std::swap_ranges(img.rgba.begin() + y * row, img.rgba.begin() + (y + 1) * row,
                     img.rgba.begin() + (o.height - 1 - y) * row);
  }
  for (std::size_t i = 3; i < img.rgba.size(); i += 4) img.rgba[i] = 255;
  glBindFramebuffer(GL_FRAMEBUFFER, 0);
  glDeleteRenderbuffers(1, &color);
  glDeleteFramebuffers(1, &fbo);
  return img;
}

// A scripted session: zoom into the middle of the step, pan along it, zoom back out, then
// scroll through every rank. Each frame is finished (glFinish) before it is timed.
BenchReport bench(ViewState& st, const ViewerOptions& o, Window& w, int& force_tab) {
  render_frame(st, o, force_tab, false);  // settle the layout; not timed
  glfwSwapBuffers(w.handle);
  const int n = o.bench_frames;
  const int q = std::max(1, n / 4);
  const double zoom_step = std::pow(64.0, 1.0 / q);
  float content_h = 0;
  for (const auto& l : st.layouts) content_h = std::max(content_h, l.height);
  BenchReport r;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const double mid = st.timeline_width_px * 0.5;
    const int phase = std::min(3, i / q);
    if (phase == 0) st.time.zoom_at(mid, zoom_step);
    if (phase == 1) st.time.pan_px(-0.5 * st.timeline_width_px / q);
    if (phase == 2) st.time.zoom_at(mid, 1 / zoom_step);
    st.scroll_request = content_h * static_cast<float>(i) / static_cast<float>(n);
    r.build_s += render_frame(st, o, force_tab, false);
    glfwSwapBuffers(w.handle);
    glFinish();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.slowest_frame_s = std::max(r.slowest_frame_s, dt);
  }
  r.frames = n;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.frames_per_s = r.seconds > 0 ? n / r.seconds : 0;
  return r;
}

// What the picture shows, for scripts and tests: the visible time range, cursor, range
// selection and selected op.
void print_state(const ViewState& st) {
  if (st.timeline_width_px > 1)
    std::printf("time range: %s to %s over %.0f px\n", format_duration(st.time.left_s()).c_str(),
                format_duration(st.time.right_s(st.timeline_width_px)).c_str(),
                static_cast<double>(st.timeline_width_px));
  if (st.cursor_s >= 0) std::printf("cursor: %s\n", format_duration(st.cursor_s).c_str());
  if (st.has_range) {
    const double b = std::min(st.range_begin_s, st.range_end_s);
    const double e = std::max(st.range_begin_s, st.range_end_s);
    std::printf("selection: %s (from %s to %s)\n", format_duration(e - b).c_str(),
                format_duration(b).c_str(), format_duration(e).c_str());
  }
  if (st.sel_doc >= 0) {
    int up = 0, down = 0;
    for (const auto& m : st.marked) {
      up += m.mark == Mark::upstream;
      down += m.mark == Mark::downstream;
    }
    std::printf("selected: op %d of %s, waits for %d ops, feeds %d%s%s\n", st.sel_op,
                st.docs[st.sel_doc]->label().c_str(), up, down, st.sel_note.empty() ? "" : "; ",
                st.sel_note.c_str());
  }
  if (st.what_if && !st.what_if->error.empty()) {
    std::printf("what-if: %s\n", st.what_if->error.c_str());
  }
}

}  // namespace

void draw_toolbar(ViewState& st) {
  ImGui::TextUnformatted("Timeline");
  ImGui::SameLine();
  const int before = st.primary;
  draw_toolbar_combo("##primary", st.primary, st, false);
  if (st.primary != before) {
    st.clear_selection();
    st.fit_pending = true;
  }
  ImGui::SameLine();
  ImGui::TextUnformatted("  overlay");
  ImGui::SameLine();
  draw_toolbar_combo("##overlay", st.overlay, st, true);
  ImGui::SameLine();
  ImGui::TextUnformatted("  below, same time scale");
  ImGui::SameLine();
  draw_toolbar_combo("##pair", st.pair, st, true);
  ImGui::SameLine();
  if (ImGui::Checkbox("one row per replica group", &st.layout_options.collapse_replicas)) {
    st.relayout();
  }
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip(
        "Folded data-parallel replicas (and tensor-parallel peers) behave exactly like\n"
        "their representative; show them as one row labelled with their count.");
  }
}

int run_viewer(const ViewerOptions& o) {
  if (o.width < 200 || o.height < 150) throw SpecError("--size", "at least 200x150");
  if (!o.input.empty() && o.screenshot.empty()) throw SpecError("--input", "needs --screenshot");
  parse_input_script(o.input);  // bad scripts fail before any simulation or window
  ViewState st;
  load_documents(st, o);
  Window w;
  open_window(w, o, o.screenshot.empty());
  int force_tab = st.bottom_tab;
  if (!o.screenshot.empty()) {
    const Image img = screenshot(st, o, force_tab);
    write_png(img, o.screenshot);
    std::printf("wrote %s (%dx%d)\n", o.screenshot.c_str(), img.width, img.height);
    print_state(st);
    return 0;
  }
  if (o.bench_frames > 0) {
    const BenchReport r = bench(st, o, w, force_tab);
    const Document& d = *st.docs[st.primary];
    std::size_t spans = 0;
    for (const auto& rank : d.result().ranks) spans += rank.spans.size();
    std::printf(
        "bench: %d frames in %.2f s = %.1f frames/s (slowest frame %s); %s: %d ranks, "
        "%zu spans, %dx%d\n",
        r.frames, r.seconds, r.frames_per_s, format_duration(r.slowest_frame_s).c_str(),
        d.label().c_str(), d.world(), spans, o.width, o.height);
    std::printf(
        "bench: building the frames took %s each on average; the rest is OpenGL "
        "(%s) and presenting\n",
        format_duration(r.build_s / std::max(r.frames, 1)).c_str(),
        reinterpret_cast<const char*>(glGetString(GL_RENDERER)));
    return 0;
  }
  bool first = true;
  while (!glfwWindowShouldClose(w.handle)) {
    render_frame(st, o, force_tab, false);
    if (first) apply_view_options(st, o);
    first = false;
    glfwSwapBuffers(w.handle);
    // Sleep on events when nothing animates; a running simulation polls for its result.
    if (st.what_if && st.what_if->worker->busy()) {
      glfwWaitEventsTimeout(0.05);
    } else {
      glfwWaitEventsTimeout(0.5);
    }
  }
  return 0;
}

}  // namespace stratagem::viz
