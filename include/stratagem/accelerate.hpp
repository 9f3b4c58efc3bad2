#pragma once
// Stratagem's Accelerator for your own LibTorch program, as one header:
//   #include <stratagem/accelerate.hpp>
// with `target_link_libraries(app PRIVATE Stratagem::accelerate)` (find_package(Stratagem))
// or `pkg-config --cflags --libs stratagem`. It brings stratagem::accelerate::Accelerator and
// its options, data loader, schedulers, trackers, tensor-parallel layers and pipeline stages
// (docs/accelerator.md). Every other installed header is <stratagem/engine/...>.
#include "engine/accelerate/accelerator.hpp"
#include "engine/accelerate/data_loader.hpp"
#include "engine/accelerate/options.hpp"
#include "engine/accelerate/pipeline.hpp"
#include "engine/accelerate/scheduler.hpp"
#include "engine/accelerate/tensor_parallel.hpp"
#include "engine/accelerate/trackers.hpp"
