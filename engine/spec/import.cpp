#include "engine/spec/import.hpp"

// Implemented by the import work (accelerate / DeepSpeed configs).
