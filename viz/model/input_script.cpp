#include "viz/model/input_script.hpp"

#include <sstream>

#include "engine/scenario/error.hpp"

namespace stratagem::viz {
namespace {

constexpr int kDragSteps = 8;  // intermediate positions: ImGui sees a drag, not a jump

struct Point {
  float x = 0, y = 0;
};

Point parse_point(const std::string& word, const std::string& action) {
  Point p;
  char comma = 0;
  std::istringstream in(word);
  if (!(in >> p.x >> comma >> p.y) || comma != ',' || !in.eof()) {
    throw SpecError("--input", "'" + action + "': expected X,Y, got '" + word + "'");
  }
  return p;
}

}  // namespace

std::vector<InputFrame> parse_input_script(const std::string& script) {
  std::vector<InputFrame> frames;
  std::stringstream actions(script);
  std::string action;
  while (std::getline(actions, action, ';')) {
    std::istringstream in(action);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    if (words.empty()) continue;
    const std::string& verb = words[0];
    auto need = [&](std::size_t n) {
      if (words.size() != n) {
        throw SpecError("--input",
                        "'" + action + "': expected " + std::to_string(n - 1) + " argument(s)");
      }
    };
    if (verb == "move") {
      need(2);
      const Point p = parse_point(words[1], action);
      frames.push_back({p.x, p.y, false, false, 0});
    } else if (verb == "click") {
      need(2);
      const Point p = parse_point(words[1], action);
      frames.push_back({p.x, p.y, false, false, 0});
      frames.push_back({p.x, p.y, true, false, 0});
      frames.push_back({p.x, p.y, false, false, 0});
    } else if (verb == "drag" || verb == "rdrag") {
      need(3);
      const Point a = parse_point(words[1], action), b = parse_point(words[2], action);
      const bool left = verb == "drag";
      frames.push_back({a.x, a.y, false, false, 0});
      for (int i = 0; i <= kDragSteps; ++i) {
        const float f = static_cast<float>(i) / kDragSteps;
        frames.push_back({a.x + (b.x - a.x) * f, a.y + (b.y - a.y) * f, left, !left, 0});
      }
      frames.push_back({b.x, b.y, false, false, 0});
    } else if (verb == "wheel") {
      need(3);
      const Point p = parse_point(words[1], action);
      float notches = 0;
      std::istringstream n(words[2]);
      if (!(n >> notches) || !n.eof()) {
        throw SpecError("--input", "'" + action + "': expected a number of notches");
      }
      frames.push_back({p.x, p.y, false, false, 0});
      frames.push_back({p.x, p.y, false, false, notches});
    } else {
      throw SpecError("--input",
                      "unknown action '" + verb + "'; valid: move, click, drag, rdrag, wheel");
    }
  }
  return frames;
}

}  // namespace stratagem::viz
