//===- Version.h - smp version ----------------------------------*- C++ -*-===//
#ifndef SMP_VERSION_H
#define SMP_VERSION_H
#define SMP_VERSION "0.1.0"
#endif // SMP_VERSION_H
