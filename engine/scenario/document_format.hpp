#pragma once
// Every file Stratagem writes names its kind and version ("format": "stratagem-profile",
// "version": N); readers check both the same way.
#include <string>

#include "engine/scenario/json_reader.hpp"

namespace stratagem::scenario {

/// Reads "format" and "version" through `r`: SpecError("format") when the format is not
/// `format` (saying the document is not a `what`), SpecError("version") when its version is
/// newer than `newest`. Returns the version.
std::int64_t check_document_format(ObjectReader& r, const std::string& format, std::int64_t newest,
                                   const std::string& what);

}  // namespace stratagem::scenario
