#include "engine/scenario/error.hpp"

#include <algorithm>
#include <vector>

namespace stratagem {

namespace {

// Length of the valid UTF-8 sequence starting at s[i] (1–4), or 0 when it is not one.
std::size_t utf8_length(const std::string& s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  unsigned min = 0;
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2, min = 0x80;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3, min = 0x800;
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  unsigned cp = b & (0x7F >> n);
  for (std::size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (c & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

std::string printable(const std::string& text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 16);
  static const char* hex = "0123456789abcdef";
  // Past max_bytes, a short rest is kept (so a cut text passes through unchanged again).
  constexpr std::size_t kShortRest = 48;
  std::size_t i = 0;
  for (; i < text.size() && (out.size() < max_bytes || text.size() - i <= kShortRest);) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b >= 0x20 && b < 0x7F) {
      out += text[i++];
      continue;
    }
    if (b >= 0x80) {
      if (const std::size_t n = utf8_length(text, i)) {
        out.append(text, i, n);
        i += n;
        continue;
      }
    }
    if (b == '\n') {
      out += "\\n";
    } else if (b == '\t') {
      out += "\\t";
    } else if (b == '\r') {
      out += "\\r";
    } else {
      out += "\\x";
      out += hex[b >> 4];
      out += hex[b & 0xF];
    }
    ++i;
  }
  if (i < text.size()) {
    out += "… (" + std::to_string(text.size() - i) + " more bytes)";
  }
  return out;
}

SpecError::SpecError(std::string path, const std::string& reason)
    : std::runtime_error(path.empty() ? printable(reason)
                                      : printable(path, 240) + ": " + printable(reason)),
      path_(printable(path, 240)),
      reason_(printable(reason)) {}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace stratagem
