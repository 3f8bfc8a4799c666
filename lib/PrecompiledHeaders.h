//===- PrecompiledHeaders.h - The compiler's precompiled headers ----------===//
//
// Parsed once per build into a precompiled header (smp_mlir_pch in the root
// CMakeLists.txt) and reused by every compiler library and test binary that
// builds against the smp dialect: SmpOps.h alone is 1.4 MB of generated
// declarations over MLIR's own headers, about 7 s of parsing per file on the
// CI's 2 cores, which every one of ~130 files paid again. The list holds
// only headers that most of those files include; a file still includes what
// it uses (-DSMP_ENABLE_PCH=OFF builds without it). docs/architecture.md,
// "Building".
//
//===----------------------------------------------------------------------===//

#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>
