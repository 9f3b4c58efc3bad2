#include "engine/plan/plan.hpp"
