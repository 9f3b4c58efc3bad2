#include "viz/model/aggregate.hpp"

#include <algorithm>

namespace stratagem::viz {

int first_ending_after(std::span<const result::Span> spans, std::span<const int> lane, double t_s) {
  // Spans in a lane do not overlap and are sorted by start, so their ends are sorted too.
  auto it = std::upper_bound(lane.begin(), lane.end(), t_s,
                             [&](double t, int i) { return t < spans[i].end_s; });
  return static_cast<int>(it - lane.begin());
}

namespace {

// Position in `lane` of the first span starting at or after `t_s`, searching from `from`.
int first_starting_at(std::span<const result::Span> spans, std::span<const int> lane, int from,
                      double t_s) {
  auto it = std::lower_bound(lane.begin() + from, lane.end(), t_s,
                             [&](int i, double t) { return spans[i].start_s < t; });
  return static_cast<int>(it - lane.begin());
}

}  // namespace

void visible_blocks(std::span<const result::Span> spans, std::span<const int> lane,
                    const TimeView& view, double width_px, double min_px, std::vector<Block>& out) {
  out.clear();
  const int n = static_cast<int>(lane.size());
  const double right_s = view.right_s(width_px);
  int i = first_ending_after(spans, lane, view.left_s());
  while (i < n) {
    const result::Span& s = spans[lane[i]];
    if (s.start_s >= right_s) break;
    Block b;
    b.x0 = view.to_px(s.start_s);
    b.x1 = view.to_px(s.end_s);
    b.first = i;
    b.kind = s.kind;
    ++i;
    if (b.x1 - b.x0 < min_px) {
      // Take in every following span that starts less than min_px after the block's end,
      // up to the first wide one. Each jump moves the block's end by about min_px, so a
      // lane costs O(width / min_px · log n) however many spans it holds.
      while (i < n) {
        const int j = first_starting_at(spans, lane, i, view.to_time(b.x1 + min_px));
        if (j == i) break;
        const result::Span& last = spans[lane[j - 1]];
        const bool last_wide = view.to_px(last.end_s) - view.to_px(last.start_s) >= min_px;
        const int take = j - i - (last_wide ? 1 : 0);
        if (take > 0) {
          b.count += take;
          b.x1 = std::max(b.x1, view.to_px(spans[lane[i + take - 1]].end_s));
          i += take;
        }
        if (last_wide) break;
      }
      b.x1 = std::max(b.x1, b.x0 + min_px);
    }
    out.push_back(b);
  }
}

}  // namespace stratagem::viz
