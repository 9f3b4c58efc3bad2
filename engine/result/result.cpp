// RunResult (engine/result): see result.hpp.
