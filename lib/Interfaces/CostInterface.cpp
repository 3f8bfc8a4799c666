//===- CostInterface.cpp - Work and traffic of an op ----------------------===//

#include "smp/Interfaces/CostInterface.h"

#include "smp/Interfaces/CostInterface.cpp.inc"
