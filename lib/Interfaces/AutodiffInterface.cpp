//===- AutodiffInterface.cpp - Vector-Jacobian products -------------------===//

#include "smp/Interfaces/AutodiffInterface.h"

#include "smp/Interfaces/AutodiffInterface.cpp.inc"
