#include "tests/docs/doc_blocks.hpp"

#include <regex>
#include <sstream>

namespace stratagem::docs {

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    lines.push_back(l);
  }
  return lines;
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// `<!-- test: WORD REST -->` → (WORD, REST); nullopt when the line is no test marker.
std::optional<std::pair<std::string, std::string>> marker(const std::string& raw) {
  const std::string l = trim(raw);
  if (!starts_with(l, "<!-- test:")) return std::nullopt;
  if (l.size() < 14 || l.substr(l.size() - 3) != "-->") return std::pair{std::string(), l};
  const std::string body = trim(l.substr(10, l.size() - 13));
  const auto space = body.find(' ');
  if (space == std::string::npos) return std::pair{body, std::string()};
  return std::pair{body.substr(0, space), trim(body.substr(space + 1))};
}

}  // namespace

std::vector<DocBlock> extract_blocks(const std::string& file, const std::string& text) {
  const auto lines = split_lines(text);
  std::vector<DocBlock> blocks;
  const std::regex fence_re("^```([A-Za-z0-9_+-]*).*$");
  // The closing fence of the block opened at `open`, or lines.size().
  auto close_of = [&](std::size_t open) {
    std::size_t k = open + 1;
    while (k < lines.size() && !starts_with(lines[k], "```")) ++k;
    return k;
  };
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(lines[i], m, fence_re)) continue;
    const std::string lang = m[1];
    const std::size_t end = close_of(i);
    if (lang != "sh" && lang != "bash" && lang != "console") {
      i = end;
      continue;
    }
    DocBlock b;
    b.file = file;
    b.line = static_cast<int>(i) + 1;
    b.lang = lang;
    if (i > 0) {
      if (const auto mk = marker(lines[i - 1])) {
        if (mk->first == "run" && mk->second.empty()) {
          b.mark = DocBlock::Mark::run;
        } else if (mk->first == "skip" && !mk->second.empty()) {
          b.mark = DocBlock::Mark::skip;
          b.reason = mk->second;
        } else {
          b.mark = DocBlock::Mark::malformed;
          b.reason = "marker '" + trim(lines[i - 1]) +
                     "' is neither `<!-- test: run -->` nor `<!-- test: skip REASON -->`";
        }
      }
    }
    std::vector<std::string> shown;
    std::string script;
    for (std::size_t k = i + 1; k < end; ++k) {
      if (lang == "console") {
        if (starts_with(lines[k], "$ ")) {
          script += lines[k].substr(2) + "\n";
        } else {
          shown.push_back(lines[k]);
        }
      } else {
        script += lines[k] + "\n";
      }
    }
    b.script = script;
    if (lang == "console") {
      b.expected = shown;
    } else {
      // An output block: blank lines, the marker, then a fence.
      std::size_t k = end + 1;
      while (k < lines.size() && trim(lines[k]).empty()) ++k;
      if (k + 1 < lines.size()) {
        const auto mk = marker(lines[k]);
        if (mk && mk->first == "output" && starts_with(lines[k + 1], "```")) {
          const std::size_t out_end = close_of(k + 1);
          b.expected = std::vector<std::string>(lines.begin() + static_cast<long>(k) + 2,
                                                lines.begin() + static_cast<long>(out_end));
        }
      }
    }
    blocks.push_back(std::move(b));
    i = end;
  }
  return blocks;
}

std::string shape_of(const std::string& line) {
  static const std::regex number("[0-9]+([.,:][0-9]+)*");
  static const std::regex space("\\s+");
  // Table rules (───, ---, ===) are as wide as their table, which changes with its contents.
  const std::string s = std::regex_replace(line, number, "#");
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    static const std::string box = "\xE2\x94\x80";
    if (s.compare(i, 3, box) == 0) {
      out += box;
      while (s.compare(i, 3, box) == 0) i += 3;
    } else if ((s[i] == '-' || s[i] == '=') && i + 1 < s.size() && s[i + 1] == s[i]) {
      out += s[i];
      const char c = s[i];
      while (i < s.size() && s[i] == c) ++i;
    } else {
      out += s[i++];
    }
  }
  return trim(std::regex_replace(out, space, " "));
}

bool output_matches(const std::vector<std::string>& expected, const std::string& actual,
                    std::string* missing) {
  std::vector<std::string> got;
  for (const auto& l : split_lines(actual)) got.push_back(shape_of(l));
  std::size_t at = 0;
  for (const auto& e : expected) {
    const std::string want = shape_of(e);
    if (want.empty() || want == "..." || want == "…") continue;
    while (at < got.size() && got[at] != want) ++at;
    if (at == got.size()) {
      if (missing) *missing = e;
      return false;
    }
    ++at;
  }
  return true;
}

}  // namespace stratagem::docs
