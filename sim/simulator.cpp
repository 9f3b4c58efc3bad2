// Simulator (sim/): see simulator.hpp.
