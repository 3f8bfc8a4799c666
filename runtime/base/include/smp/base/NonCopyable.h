//===- NonCopyable.h - Base of classes that own a resource -----*- C++ -*-===//
//
// Part of smp_base. A class that owns a file, a descriptor or memory derives
// from NonCopyable, so that a copy cannot release its resource twice (the
// classes close or free it in their destructors).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_NONCOPYABLE_H
#define SMP_BASE_NONCOPYABLE_H

namespace smp::base {

class NonCopyable {
public:
  NonCopyable(const NonCopyable &) = delete;
  NonCopyable &operator=(const NonCopyable &) = delete;

protected:
  NonCopyable() = default;
  ~NonCopyable() = default;
};

} // namespace smp::base

#endif // SMP_BASE_NONCOPYABLE_H
