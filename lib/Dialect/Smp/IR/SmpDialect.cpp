//===- SmpDialect.cpp - smp dialect registration and attribute checks -----===//

#include "smp/Dialect/Smp/IR/SmpDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "smp/Dialect/Smp/IR/SmpLayout.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace smp;

#include "smp/Dialect/Smp/IR/SmpDialect.cpp.inc"
#include "smp/Dialect/Smp/IR/SmpEnums.cpp.inc"

void SmpDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "smp/Dialect/Smp/IR/SmpOps.cpp.inc"
      >();
  registerAttributes();
}

Operation *SmpDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  auto typed = dyn_cast<TypedAttr>(value);
  if (!typed || typed.getType() != type || !isa<RankedTensorType>(type))
    return nullptr;
  return ConstantOp::create(builder, loc, typed);
}

static LogicalResult requireString(Operation *op, NamedAttribute attr,
                                   StringRef what) {
  auto str = dyn_cast<StringAttr>(attr.getValue());
  if (!str || str.getValue().empty())
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' must be a non-empty string naming the "
                           << what;
  return success();
}

LogicalResult SmpDialect::verifyRegionArgAttribute(Operation *op,
                                                   unsigned regionIndex,
                                                   unsigned argIndex,
                                                   NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kParamAttr)
    return requireString(op, attr, "parameter");
  if (name == kInputAttr)
    return requireString(op, attr, "graph input");
  if (name == kInitFromAttr)
    return requireString(op, attr, "initializer that holds the initial value");
  if (name == kStateAttr)
    return requireString(op, attr, "optimizer state");
  if (name == "smp.init") {
    if (!isa<FloatAttr>(attr.getValue()))
      return op->emitError() << "'smp.init' must be a float (a state's "
                                "initial value)";
    return success();
  }
  if (name == kStageAttr) {
    if (!isa<IntegerAttr>(attr.getValue()))
      return op->emitError() << "'smp.stage' must be an integer";
    return success();
  }
  if (name == kLayoutAttr) {
    auto f = dyn_cast<FunctionOpInterface>(op);
    if (!f || argIndex >= f.getNumArguments())
      return op->emitError()
             << "'" << name << "' belongs on function arguments and results";
    return verifyLayoutOf(op, attr.getValue(), f.getArgumentTypes()[argIndex],
                          "argument #" + Twine(argIndex));
  }
  if (name == kInitValueAttr) {
    if (!isa<DenseElementsAttr>(attr.getValue()))
      return op->emitError() << "'smp.init_value' must be dense elements";
    return success();
  }
  if (name == kCausalValuesAttr) {
    auto values = dyn_cast<DenseF64ArrayAttr>(attr.getValue());
    auto f = dyn_cast<FunctionOpInterface>(op);
    auto type = f && argIndex < f.getNumArguments()
                    ? dyn_cast<RankedTensorType>(f.getArgumentTypes()[argIndex])
                    : RankedTensorType();
    if (!values || values.size() != 2)
      return op->emitError() << "'" << name
                             << "' must be array<f64: below, above>";
    if (!type || type.getRank() < 2 ||
        type.getDimSize(type.getRank() - 1) !=
            type.getDimSize(type.getRank() - 2) ||
        !f.getArgAttr(argIndex, kFrozenAttr))
      return op->emitError()
             << "'" << name << "' belongs on a frozen argument whose last "
             << "two dims are equal (a [..., S, S] mask)";
    return success();
  }
  if (name == kFrozenAttr || name == kInitZeroAttr) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a unit attribute";
    return success();
  }
  return op->emitError() << "unknown smp argument attribute '" << name << "'";
}

LogicalResult SmpDialect::verifyRegionResultAttribute(Operation *op,
                                                      unsigned regionIndex,
                                                      unsigned resultIndex,
                                                      NamedAttribute attr) {
  if (attr.getName().getValue() == kOutputAttr)
    return requireString(op, attr, "graph output");
  if (attr.getName().getValue() == kUpdateAttr)
    return requireString(op, attr, "parameter or state it updates");
  if (attr.getName().getValue() == kSamplesAttr)
    return requireString(op, attr, "\"per-sample\" or why not");
  if (attr.getName().getValue() == kLayoutAttr) {
    auto f = dyn_cast<FunctionOpInterface>(op);
    if (!f || resultIndex >= f.getNumResults())
      return op->emitError() << "'" << kLayoutAttr
                             << "' belongs on function arguments and results";
    return verifyLayoutOf(op, attr.getValue(), f.getResultTypes()[resultIndex],
                          "result #" + Twine(resultIndex));
  }
  // Between the passes that build @train_step (TrainStepContract.h).
  if (attr.getName().getValue() == "smp.grad_of") {
    if (!isa<IntegerAttr>(attr.getValue()))
      return op->emitError() << "'smp.grad_of' must be an integer (the "
                                "argument number of the parameter)";
    return success();
  }
  if (attr.getName().getValue() == "smp.found_inf") {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'smp.found_inf' must be a unit attribute";
    return success();
  }
  return op->emitError() << "unknown smp result attribute '"
                         << attr.getName().getValue() << "'";
}

namespace {
template <typename AttrT> bool isA(Attribute a) { return isa<AttrT>(a); }

bool isNonEmptyString(Attribute a) {
  auto s = dyn_cast<StringAttr>(a);
  return s && !s.getValue().empty();
}

bool isIntegerDictionary(Attribute a) {
  auto d = dyn_cast<DictionaryAttr>(a);
  return d && llvm::all_of(d, [](NamedAttribute entry) {
           return isa<IntegerAttr>(entry.getValue());
         });
}

bool isDictionaryArray(Attribute a) {
  auto list = dyn_cast<ArrayAttr>(a);
  return list && llvm::all_of(list, isA<DictionaryAttr>);
}

bool isPlusMinusOne(Attribute a) {
  auto i = dyn_cast<IntegerAttr>(a);
  return i && (i.getInt() == 1 || i.getInt() == -1);
}

/// The dialect's attributes on operations: what each must hold, and how an
/// error says so ("'NAME' must be ...").
struct OperationAttrRule {
  StringRef name;
  bool (*holds)(Attribute);
  const char *mustBe;
};
const OperationAttrRule kOperationAttrRules[] = {
    {SmpDialect::kSourceAttr, isA<StringAttr>, "a string path"},
    {SmpDialect::kOpsetAttr, isA<IntegerAttr>, "an integer"},
    {SmpDialect::kStageAttr, isA<IntegerAttr>, "an integer"},
    {SmpDialect::kMicrobatchAttr, isA<IntegerAttr>, "an integer"},
    {SmpDialect::kPipelineRankAttr, isA<IntegerAttr>, "an integer"},
    {SmpDialect::kBackwardAttr, isA<UnitAttr>, "a unit attribute"},
    {SmpDialect::kViewAttr, isA<UnitAttr>, "a unit attribute"},
    {"smp.recomputed", isA<UnitAttr>, "a unit attribute"},
    {"smp.copy", isA<IntegerAttr>, "an integer"},
    {SmpDialect::kPlacementAttr, isA<StringAttr>, "a string"},
    {SmpDialect::kScheduleAttr, isA<StringAttr>, "a string"},
    {SmpDialect::kRunningStatAttr, isA<StringAttr>, "a string"},
    {SmpDialect::kRunningMeanAttr, isNonEmptyString,
     "a non-empty string naming a parameter"},
    {SmpDialect::kRunningVarAttr, isNonEmptyString,
     "a non-empty string naming a parameter"},
    {SmpDialect::kModelAttr, isNonEmptyString,
     "a non-empty string naming the generated model's kind"},
    {SmpDialect::kModelConfigAttr, isIntegerDictionary,
     "a dictionary of integers (the generated model's sizes)"},
    {SmpDialect::kParamOriginsAttr, isDictionaryArray,
     "an array of dictionaries"},
    {SmpDialect::kStageCostsAttr, isA<DenseF64ArrayAttr>, "an f64 array"},
    {SmpDialect::kBatchScaledAttr, isPlusMinusOne, "the integer 1 or -1"},
    {SmpDialect::kBatchScalingUnknownAttr, isA<UnitAttr>, "a unit attribute"},
    {SmpDialect::kNoGradAttr, isA<UnitAttr>, "a unit attribute"},
    {SmpDialect::kEvalPadLabelsAttr, isNonEmptyString,
     "a non-empty string naming the labels input"},
    {SmpDialect::kEvalNoPadAttr, isNonEmptyString,
     "a non-empty string saying why"},
    {SmpDialect::kEvalCountedLabelsAttr, isA<DenseI64ArrayAttr>,
     "an i64 array of ranges"},
    {SmpDialect::kEvalNoCountAttr, isNonEmptyString,
     "a non-empty string saying why"},
    {SmpDialect::kEvalLossSumsAttr, isA<UnitAttr>, "a unit attribute"},
};
} // namespace

LogicalResult SmpDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  for (const OperationAttrRule &rule : kOperationAttrRules) {
    if (name != rule.name)
      continue;
    if (!rule.holds(attr.getValue()))
      return op->emitError() << "'" << name << "' must be " << rule.mustBe;
    return success();
  }
  return op->emitError() << "unknown smp attribute '" << name << "'";
}
