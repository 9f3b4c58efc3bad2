#pragma once
// Formatting for CLI tables: human units and fixed-width columns.
#include <cstdio>
#include <string>
#include <vector>

namespace stratagem::cli {

// 1,557,611,200: exact counts stay readable.
inline std::string grouped(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.0f", x);
  std::string digits = buf, out;
  const std::size_t first = digits[0] == '-' ? 1 : 0;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > first && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

/// 4 significant digits, %g style: 1.027e+10.
inline std::string sci(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

/// Bytes as "212.891 MiB" or "9.979 GiB".
inline std::string bytes_text(double bytes) {
  char buf[48];
  if (bytes >= (1024.0 * 1024 * 1024)) {
    std::snprintf(buf, sizeof buf, "%.3f GiB", bytes / (1024.0 * 1024 * 1024));
  } else {
    std::snprintf(buf, sizeof buf, "%.3f MiB", bytes / (1024.0 * 1024));
  }
  return buf;
}

inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// Seconds as "12.3 ms", "1.20 s".
inline std::string fmt_time(double s) {
  if (s >= 1.0) return fmt("%.3g s", s);
  if (s >= 1e-3) return fmt("%.3g ms", s * 1e3);
  return fmt("%.3g us", s * 1e6);
}

/// Bytes in GiB (2^30), the unit nvidia-smi and PyTorch report.
inline std::string fmt_gib(double bytes) {
  return fmt("%.2f GiB", bytes / (1024.0 * 1024 * 1024));
}

/// FLOP/s as "312.0 TFLOP/s", or "43.3 GFLOP/s" below a TFLOP/s (calibrated CPUs).
inline std::string fmt_flops(double flops_per_s) {
  if (flops_per_s >= 1e12) return fmt("%.1f TFLOP/s", flops_per_s / 1e12);
  return fmt("%.1f GFLOP/s", flops_per_s / 1e9);
}

inline std::string fmt_rate(double v) {
  if (v >= 1e6) return fmt("%.3gM", v / 1e6);
  if (v >= 1e3) return fmt("%.3gk", v / 1e3);
  return fmt("%.3g", v);
}

/// A signed fraction as "+3.5%", "-0.7%".
inline std::string signed_percent(double fraction) {
  return fmt("%+.1f%%", 100.0 * fraction);
}

inline std::string fmt_percent(double fraction) {
  return fmt("%.1f%%", fraction * 100.0);
}

/// Prints rows as a table with columns padded to their widest cell (UTF-8 aware).
inline void print_table(std::FILE* out, const std::vector<std::vector<std::string>>& rows) {
  auto width = [](const std::string& s) {
    std::size_t w = 0;
    for (unsigned char c : s) w += (c & 0xC0) != 0x80 ? 1 : 0;
    return w;
  };
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], width(row[i]));
  }
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (std::size_t i = 0; i < rows[r].size(); ++i) {
      line += rows[r][i];
      if (i + 1 < rows[r].size()) line += std::string(widths[i] - width(rows[r][i]) + 2, ' ');
    }
    std::fprintf(out, "%s\n", line.c_str());
    if (r == 0) {
      std::size_t total = 0;
      for (auto w : widths) total += w + 2;
      std::string rule;
      for (std::size_t i = 0; i + 2 < total; ++i) rule += "─";
      std::fprintf(out, "%s\n", rule.c_str());
    }
  }
}

}  // namespace stratagem::cli
