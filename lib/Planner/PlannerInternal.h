//===- PlannerInternal.h - Shared by the planner's files -------*- C++ -*-===//

#ifndef SMP_LIB_PLANNER_PLANNERINTERNAL_H
#define SMP_LIB_PLANNER_PLANNERINTERNAL_H

#include <string>

namespace smp {

/// "70.6 GB", "12.0 MB", "3.4 KB" (one decimal), for plan text and errors.
std::string formatBytes(double bytes);

} // namespace smp

#endif // SMP_LIB_PLANNER_PLANNERINTERNAL_H
