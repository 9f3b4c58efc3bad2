#include "engine/scenario/document_format.hpp"

#include "engine/scenario/error.hpp"

namespace stratagem::scenario {

std::int64_t check_document_format(ObjectReader& r, const std::string& format, std::int64_t newest,
                                   const std::string& what) {
  const std::string got = r.string("format");
  if (got != format) {
    throw SpecError("format",
                    "expected \"" + format + "\", got \"" + got + "\" (not a " + what + ")");
  }
  const auto version = r.integer("version", 1, 1 << 20);
  if (version > newest) {
    throw SpecError("version", what + " version " + std::to_string(version) +
                                   " is newer than this stratagem reads (" +
                                   std::to_string(newest) + "); update stratagem");
  }
  return version;
}

}  // namespace stratagem::scenario
