//===- Chain.h - Building a composition of smp ops for one node -*- C++ -*-===//
//
// Converters that compose several smp ops for one ONNX node (activations,
// recurrent layers) build them through a Chain: each step goes through
// NodeContext::create (inferred, verified, folded), and the first error is
// kept while the later steps do nothing, so a composition reads as the
// formula it implements and reports one error naming the node.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_FRONTEND_ONNX_CHAIN_H
#define SMP_LIB_FRONTEND_ONNX_CHAIN_H

#include "NodeContext.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

#include <optional>
#include <string>

namespace smp::onnx_frontend {

class Chain {
public:
  explicit Chain(NodeContext &nc) : nc(nc) {}

  template <typename OpT> mlir::Value unary(mlir::Value x) {
    return keep(failed() ? llvm::Expected<mlir::Value>(mlir::Value())
                         : nc.create<OpT>(x));
  }
  template <typename OpT> mlir::Value binary(mlir::Value a, mlir::Value b) {
    return keep(failed() ? llvm::Expected<mlir::Value>(mlir::Value())
                         : nc.create<OpT>(nc.placeholder(), a, b));
  }
  /// An op whose result type is inferred, from its other builder arguments.
  template <typename OpT, typename... Args> mlir::Value make(Args &&...args) {
    return keep(failed() ? llvm::Expected<mlir::Value>(mlir::Value())
                         : nc.create<OpT>(nc.placeholder(),
                                          std::forward<Args>(args)...));
  }
  mlir::Value where(mlir::Value c, mlir::Value a, mlir::Value b) {
    return make<smp::WhereOp>(c, a, b);
  }
  mlir::Value scalar(mlir::Value like, double v) {
    return failed() ? mlir::Value() : nc.scalarLike(like, v);
  }
  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape) {
    return keep(failed() ? llvm::Expected<mlir::Value>(mlir::Value())
                         : nc.reshape(x, shape));
  }
  /// x[start:limit] along `axis`.
  mlir::Value slice(mlir::Value x, int64_t axis, int64_t start, int64_t limit) {
    if (failed())
      return {};
    llvm::SmallVector<int64_t> shape = shapeOf(x);
    llvm::SmallVector<int64_t> starts(shape.size(), 0), limits(shape),
        steps(shape.size(), 1);
    starts[axis] = start;
    limits[axis] = limit;
    auto &b = nc.builder();
    return make<smp::SliceOp>(x, b.getDenseI64ArrayAttr(starts),
                              b.getDenseI64ArrayAttr(limits),
                              b.getDenseI64ArrayAttr(steps));
  }
  /// Keeps `v` or its error (the first one).
  mlir::Value keep(llvm::Expected<mlir::Value> v) {
    if (!v) {
      std::string msg = llvm::toString(v.takeError());
      if (!error)
        error = msg;
      return {};
    }
    return *v;
  }
  bool failed() const { return error.has_value(); }
  /// Output `i` is `y`, or the first error.
  llvm::Error finish(mlir::Value y, unsigned i = 0) {
    if (failed())
      return llvm::createStringError(llvm::inconvertibleErrorCode(), *error);
    nc.setOutput(i, y);
    return llvm::Error::success();
  }

protected:
  NodeContext &nc;
  std::optional<std::string> error;
};

} // namespace smp::onnx_frontend

#endif // SMP_LIB_FRONTEND_ONNX_CHAIN_H
