//===- Reduce.cpp - reduce_sum / reduce_mean / reduce_max -----------------===//
//
// The input's dims are grouped into runs of kept and reduced dims (size-1
// dims dropped, neighbours merged). Each output element (or, when the last
// group is kept, each contiguous row of outputs) accumulates over the
// reduced groups; output rows are independent and run in parallel.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

namespace smp::kernels::cpu {
using namespace detail;

namespace {

struct Group {
  int64_t size, stride;
};

struct Plan {
  std::vector<Group> keptOuter, reducedOuter;
  int64_t inner = 1; // L: contiguous kept elements per output row
  int64_t run = 1;   // contiguous reduced elements (when inner == 1)
  int64_t rows = 1;  // product of keptOuter sizes
  int64_t count = 1; // reduced elements per output
};

Plan makePlan(const std::vector<int64_t> &shape,
              const std::vector<bool> &reduced) {
  std::vector<common::DimGroup> groups = common::reduceGroups(shape, reduced);
  Plan p;
  if (!groups.empty()) {
    if (groups.back().reduced)
      p.run = groups.back().size;
    else
      p.inner = groups.back().size;
    groups.pop_back();
  }
  for (const common::DimGroup &g : groups) {
    if (g.reduced)
      p.reducedOuter.push_back({g.size, g.stride});
    else
      p.keptOuter.push_back({g.size, g.stride});
  }
  for (const Group &g : p.keptOuter)
    p.rows *= g.size;
  p.count = p.run;
  for (const Group &g : p.reducedOuter)
    p.count *= g.size;
  return p;
}

/// The input offset where output row r's reduction starts.
int64_t rowBase(const Plan &p, int64_t r) {
  int64_t base = 0;
  for (size_t d = p.keptOuter.size(); d-- > 0;) {
    base += (r % p.keptOuter[d].size) * p.keptOuter[d].stride;
    r /= p.keptOuter[d].size;
  }
  return base;
}

/// Ops: Acc init(); void add(Acc &, S); O finish(Acc).
/// Tasks are (output row, block of kCols kept columns): a reduction over
/// the leading dims (a bias gradient: [B, T, N] -> [N], one output row)
/// still runs on every thread. Each output element accumulates in the same
/// order whatever the split.
template <class S, class O, class Ops>
void reduceLoop(const Plan &p, const S *x, O *y, const Ops &ops) {
  using Acc = decltype(ops.init());
  constexpr int64_t kCols = 256;
  int64_t colBlocks = (p.inner + kCols - 1) / kCols;
  int64_t work = std::max<int64_t>(1, p.count * std::min(p.inner, kCols));
  parallelFor(p.rows * colBlocks, grainFor(work), [&](int64_t begin,
                                                      int64_t end) {
    std::vector<Acc> acc(static_cast<size_t>(std::min(p.inner, kCols)));
    size_t nr = p.reducedOuter.size();
    std::vector<int64_t> qidx(nr);
    for (int64_t task = begin; task < end; ++task) {
      int64_t r = task / colBlocks, j0 = task % colBlocks * kCols;
      int64_t cols = std::min(kCols, p.inner - j0);
      int64_t base = rowBase(p, r) + j0;
      std::fill(acc.begin(), acc.end(), ops.init());
      std::fill(qidx.begin(), qidx.end(), 0);
      int64_t off = base;
      while (true) {
        if (p.inner > 1) {
          const S *row = x + off;
          for (int64_t j = 0; j < cols; ++j)
            ops.add(acc[j], row[j]);
        } else {
          const S *run = x + off;
          Acc a = acc[0];
          for (int64_t j = 0; j < p.run; ++j)
            ops.add(a, run[j]);
          acc[0] = a;
        }
        // Next reduced multi-index (odometer over reducedOuter).
        bool done = true;
        for (size_t d = nr; d-- > 0;) {
          off += p.reducedOuter[d].stride;
          if (++qidx[d] < p.reducedOuter[d].size) {
            done = false;
            break;
          }
          off -= qidx[d] * p.reducedOuter[d].stride;
          qidx[d] = 0;
        }
        if (done)
          break;
      }
      O *dst = y + r * p.inner + j0;
      for (int64_t j = 0; j < cols; ++j)
        dst[j] = ops.finish(acc[j]);
    }
  });
}

/// Reductions of one long contiguous run per output (a whole tensor to a
/// scalar: the gradient norm's sums of squares): each run is cut into
/// blocks of kRunBlock elements (a function of the shape only), the blocks
/// reduce in parallel, each over four interleaved partials, and a run's
/// blocks merge in order. The same bits for any thread count.
constexpr int64_t kRunBlock = 16384;

bool blockedRuns(const Plan &p) {
  return p.inner == 1 && p.reducedOuter.empty() && p.run >= 2 * kRunBlock;
}

template <class S, class O, class Ops>
void reduceBlockedRuns(const Plan &p, const S *x, O *y, const Ops &ops) {
  using Acc = decltype(ops.init());
  int64_t blocks = (p.run + kRunBlock - 1) / kRunBlock;
  std::vector<Acc> part(static_cast<size_t>(p.rows * blocks));
  parallelFor(p.rows * blocks, grainFor(kRunBlock), [&](int64_t b,
                                                        int64_t e) {
    for (int64_t task = b; task < e; ++task) {
      int64_t r = task / blocks, j0 = task % blocks * kRunBlock;
      const S *run = x + rowBase(p, r) + j0;
      int64_t len = std::min(kRunBlock, p.run - j0), j = 0;
      Acc a[4] = {ops.init(), ops.init(), ops.init(), ops.init()};
      for (; j + 4 <= len; j += 4)
        for (int k = 0; k < 4; ++k)
          ops.add(a[k], run[j + k]);
      for (; j < len; ++j)
        ops.add(a[0], run[j]);
      ops.merge(a[0], a[1]);
      ops.merge(a[2], a[3]);
      ops.merge(a[0], a[2]);
      part[task] = a[0];
    }
  });
  for (int64_t r = 0; r < p.rows; ++r) {
    Acc a = part[r * blocks];
    for (int64_t k = 1; k < blocks; ++k)
      ops.merge(a, part[r * blocks + k]);
    y[r] = ops.finish(a);
  }
}

template <class S> struct FloatSum {
  bool mean;
  int64_t count;
  double init() const { return 0.0; }
  void add(double &a, S v) const {
    a += static_cast<double>(Float<S>::load(v));
  }
  void merge(double &a, double b) const { a += b; }
  S finish(double a) const {
    using C = typename Float<S>::C;
    return Float<S>::store(
        static_cast<C>(mean ? a / static_cast<double>(count) : a));
  }
};

template <class S> struct FloatMax {
  using C = typename Float<S>::C;
  C init() const { return -std::numeric_limits<C>::infinity(); }
  void add(C &a, S s) const {
    C v = Float<S>::load(s);
    if (v > a || std::isnan(v))
      a = v;
  }
  void merge(C &a, C b) const {
    if (b > a || std::isnan(b))
      a = b;
  }
  S finish(C a) const { return Float<S>::store(a); }
};

template <class T> struct IntSum {
  bool mean;
  int64_t count;
  uint64_t init() const { return 0; }
  void add(uint64_t &a, T v) const {
    a += static_cast<uint64_t>(static_cast<int64_t>(v));
  }
  void merge(uint64_t &a, uint64_t b) const { a += b; }
  T finish(uint64_t a) const {
    if (!mean || count == 0)
      return static_cast<T>(a);
    if constexpr (std::is_signed_v<T>)
      return static_cast<T>(static_cast<int64_t>(a) / count);
    else
      return static_cast<T>(a / static_cast<uint64_t>(count));
  }
};

template <class T> struct IntMax {
  T init() const { return std::numeric_limits<T>::lowest(); }
  void add(T &a, T v) const { a = a < v ? v : a; }
  void merge(T &a, T b) const { add(a, b); }
  T finish(T a) const { return a; }
};

/// A float sum over one run of leading rows into one row of columns (a
/// bias gradient: [B, T, N] -> [N]) with more than one row block: the rows
/// go in blocks (sumRowBlocks: contiguous reads, every thread busy however
/// few the columns). With one block, reduceLoop sums each column from zero
/// in row order: the same bits.
bool leadingRows(const Plan &p) {
  return p.rows == 1 && p.inner > 1 && p.reducedOuter.size() == 1 &&
         rowBlockCount(p.reducedOuter[0].size, p.inner) > 1;
}

template <class S>
void reduceLeadingRows(const Plan &p, const S *x, S *y,
                       const FloatSum<S> &ops) {
  int64_t rows = p.reducedOuter[0].size, cols = p.inner;
  std::vector<double> total =
      sumRowBlocks(rows, cols, cols, [&](int64_t r0, int64_t r1, double *acc) {
        for (int64_t r = r0; r < r1; ++r) {
          const S *row = x + r * cols;
          for (int64_t j = 0; j < cols; ++j)
            ops.add(acc[j], row[j]);
        }
      });
  for (int64_t j = 0; j < cols; ++j)
    y[j] = ops.finish(total[j]);
}

/// The arithmetic of storage type S (float or integer).
template <class S>
using SumOps =
    std::conditional_t<std::is_integral_v<S>, IntSum<S>, FloatSum<S>>;
template <class S>
using MaxOps =
    std::conditional_t<std::is_integral_v<S>, IntMax<S>, FloatMax<S>>;

/// The value of a reduction over no elements.
Status fillEmpty(ReduceOp op, const TensorRef &out) {
  int64_t n = out.numel();
  if (smp::base::isFloat(out.dtype))
    return visitFloat(out.dtype, "reduce", [&](auto tag) {
      using S = typename decltype(tag)::type;
      using C = typename Float<S>::C;
      C v = op == ReduceOp::Sum    ? C(0)
            : op == ReduceOp::Mean ? std::numeric_limits<C>::quiet_NaN()
                                   : -std::numeric_limits<C>::infinity();
      std::fill_n(out.as<S>(), n, Float<S>::store(v));
      return Status::success();
    });
  if (op == ReduceOp::Max && out.dtype != DType::Bool)
    return visitInt(out.dtype, "reduce_max", [&](auto tag) {
      using T = typename decltype(tag)::type;
      std::fill_n(out.as<T>(), n, std::numeric_limits<T>::lowest());
      return Status::success();
    });
  std::fill_n(static_cast<uint8_t *>(out.data), out.bytes(), uint8_t(0));
  return Status::success();
}

/// reduce(Sum)'s arithmetic on the f32 squares binary(Mul, x, x) makes of
/// x (of an f16/bf16 x: of its f32 copy, the widening being exact).
template <class S> struct SquareSum {
  double init() const { return 0.0; }
  void add(double &a, S s) const {
    float v = Float<S>::load(s);
    float square = v * v;
    a += static_cast<double>(square);
  }
  void merge(double &a, double b) const { a += b; }
  float finish(double a) const { return static_cast<float>(a); }
};

} // namespace

Status sumSquares(const std::vector<TensorRef> &inputs, const TensorRef &out) {
  SMP_RETURN_IF_ERROR(common::checkSumSquares(inputs, out));
  float total = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorRef &x = inputs[i];
    float term = 0;
    if (x.numel() > 0) {
      // The plan reduce(Sum) makes for every dim of x (one contiguous run).
      Plan p = makePlan(x.shape, std::vector<bool>(x.shape.size(), true));
      SMP_RETURN_IF_ERROR(visitFloat(x.dtype, "sum_squares", [&](auto tag) {
        using S = typename decltype(tag)::type;
        if constexpr (std::is_same_v<typename Float<S>::C, float>) {
          if (blockedRuns(p))
            reduceBlockedRuns(p, x.as<S>(), &term, SquareSum<S>{});
          else
            reduceLoop(p, x.as<S>(), &term, SquareSum<S>{});
        }
        return Status::success();
      }));
    }
    total += term; // the chain of adds, in order (0 + a term is the term)
  }
  *out.as<float>() = total;
  return Status::success();
}

Status reduce(ReduceOp op, const TensorRef &in,
              const std::vector<int64_t> &axes, const TensorRef &out) {
  const char *name = reduceOpName(op);
  std::vector<bool> reduced;
  SMP_RETURN_IF_ERROR(common::checkReduce(name, in, axes, out, reduced));
  if (out.numel() == 0)
    return Status::success();
  if (in.numel() == 0)
    return fillEmpty(op, out);
  Plan p = makePlan(in.shape, reduced);

  auto run = [&](auto tag) {
    using S = typename decltype(tag)::type;
    auto go = [&](const auto &ops) {
      if constexpr (std::is_same_v<std::decay_t<decltype(ops)>, FloatSum<S>>)
        if (leadingRows(p)) {
          reduceLeadingRows(p, in.as<S>(), out.as<S>(), ops);
          return;
        }
      if (blockedRuns(p))
        reduceBlockedRuns(p, in.as<S>(), out.as<S>(), ops);
      else
        reduceLoop(p, in.as<S>(), out.as<S>(), ops);
    };
    if (op == ReduceOp::Max)
      go(MaxOps<S>{});
    else
      go(SumOps<S>{op == ReduceOp::Mean, p.count});
    return Status::success();
  };
  if (smp::base::isFloat(in.dtype))
    return visitFloat(in.dtype, name, run);
  if (in.dtype == DType::Bool) {
    if (op != ReduceOp::Max)
      return unsupported(name, in.dtype);
    reduceLoop(p, in.as<uint8_t>(), out.as<uint8_t>(), IntMax<uint8_t>{});
    return Status::success();
  }
  return visitInt(in.dtype, name, run);
}

} // namespace smp::kernels::cpu

//===----------------------------------------------------------------------===//
// Cumulative sum
//===----------------------------------------------------------------------===//

namespace smp::kernels::cpu {
using namespace detail;
namespace {

/// Runs every line along the axis (outer x inner of them, elements `inner`
/// apart) in order; lines are independent and split over the threads.
/// Acc add(Acc, S) and S store(Acc) define the arithmetic.
template <class S, class Acc, class Add, class Store>
void scanLines(const S *x, S *y, int64_t outer, int64_t len, int64_t inner,
               bool exclusive, bool reverse, Add add, Store store) {
  int64_t lines = outer * inner;
  parallelFor(lines, grainFor(len), [&](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line) {
      int64_t o = line / inner, i = line % inner;
      const S *px = x + o * len * inner + i;
      S *py = y + o * len * inner + i;
      Acc acc{};
      for (int64_t step = 0; step < len; ++step) {
        int64_t j = (reverse ? len - 1 - step : step) * inner;
        S v = px[j]; // read before the write: may run in place
        if (exclusive) {
          py[j] = store(acc);
          acc = add(acc, v);
        } else {
          acc = add(acc, v);
          py[j] = store(acc);
        }
      }
    }
  });
}

} // namespace

Status cumsum(const TensorRef &in, int64_t axis, bool exclusive, bool reverse,
              const TensorRef &out) {
  const char *name = "cumsum";
  common::AxisSplit s;
  SMP_RETURN_IF_ERROR(common::checkCumSum(in, axis, out, s));
  if (out.numel() == 0)
    return Status::success();
  int64_t outer = s.outer, len = s.len, inner = s.inner;
  if (smp::base::isFloat(in.dtype))
    return visitFloat(in.dtype, name, [&](auto tag) {
      using S = typename decltype(tag)::type;
      using C = typename Float<S>::C;
      scanLines<S, double>(
          in.as<S>(), out.as<S>(), outer, len, inner, exclusive, reverse,
          [](double acc, S v) {
            return acc + static_cast<double>(Float<S>::load(v));
          },
          [](double acc) { return Float<S>::store(static_cast<C>(acc)); });
      return Status::success();
    });
  return visitInt(in.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using U = std::make_unsigned_t<T>;
    scanLines<T, uint64_t>(
        in.as<T>(), out.as<T>(), outer, len, inner, exclusive, reverse,
        [](uint64_t acc, T v) {
          return acc + static_cast<uint64_t>(static_cast<U>(v));
        },
        [](uint64_t acc) { return static_cast<T>(static_cast<U>(acc)); });
    return Status::success();
  });
}

} // namespace smp::kernels::cpu
