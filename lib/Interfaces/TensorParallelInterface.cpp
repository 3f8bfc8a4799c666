//===- TensorParallelInterface.cpp - Sharding rules -----------------------===//

#include "smp/Interfaces/TensorParallelInterface.h"

#include "smp/Interfaces/TensorParallelInterface.cpp.inc"
