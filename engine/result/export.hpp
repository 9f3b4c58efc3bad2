#pragma once
// Exports of a RunResult for other tools: Chrome trace / Perfetto JSON and CSV of spans.
#include <ostream>

#include <nlohmann/json.hpp>

#include "engine/result/result.hpp"

namespace stratagem::result {

/// Chrome trace event format ({"traceEvents": [...]}): one pid per rank with process_name,
/// one tid per stream with thread_name, spans as complete events (ph "X", ts/dur in µs),
/// memory by tensor class as counter events (ph "C"). Slices on one tid never overlap: spans
/// that overlap on a stream (p2p ops are posted concurrently) move to extra tids
/// ("p2p #2", ...). Folded ranks get a process named after the rank they copy, no events.
nlohmann::json chrome_trace(const RunResult& r);
void write_chrome_trace(const RunResult& r, const std::string& path);

/// One row per span with a header line; numbers in shortest round-trip form.
void write_spans_csv(const RunResult& r, std::ostream& out);
void write_spans_csv(const RunResult& r, const std::string& path);

/// A span's display name: "forward mb 3", "all_reduce grad_sync", "send to 5".
std::string span_label(const Span& s);

}  // namespace stratagem::result
