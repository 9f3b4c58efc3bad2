// Analytic memory model (engine/memory): see memory.hpp.
