//===- AutodiffInterface.h - Vector-Jacobian products -----------*- C++ -*-===//

#ifndef SMP_INTERFACES_AUTODIFFINTERFACE_H
#define SMP_INTERFACES_AUTODIFFINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include "smp/Interfaces/AutodiffInterface.h.inc"

#endif // SMP_INTERFACES_AUTODIFFINTERFACE_H
