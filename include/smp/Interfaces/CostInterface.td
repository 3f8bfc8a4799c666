//===- CostInterface.td - Work and traffic of an op --------*- tablegen -*-===//

#ifndef SMP_INTERFACES_COSTINTERFACE_TD
#define SMP_INTERFACES_COSTINTERFACE_TD

include "mlir/IR/OpBase.td"

def Smp_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::smp";
  let description = [{
    What an op costs, independent of any device: its floating-point work
    and the bytes it reads and writes (its operands and results, once each:
    what a kernel that does not fuse moves through memory). The cost model
    turns it into time on a device (roofline) and the planner sums it over
    stages.
  }];
  let methods = [
    InterfaceMethod<[{
        FLOPs (multiply and add count two), bytes read and written, and
        whether the work runs on matrix units (tensor cores).
      }],
      "::smp::OpCost", "getCost", (ins)>
  ];
}

#endif // SMP_INTERFACES_COSTINTERFACE_TD
