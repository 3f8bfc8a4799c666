//===- CudaOptimizerTest.cpp - CUDA optimizer updates vs the CPU ----------===//

#include "CudaTestUtil.h"

namespace smp_cuda_test {
namespace {

/// A multi-tensor update with a set skip flag (`update(skip)`) leaves every
/// tensor's bytes as they were (the stream synchronized before).
template <class F>
void expectSkipLeavesBytes(const std::vector<std::unique_ptr<Dev>> &keep,
                           F update) {
  std::vector<Host> before;
  for (const auto &d : keep)
    before.push_back(d->download());
  Host skip = make(DType::Bool, {}, {1});
  Dev dskip(skip);
  ASSERT_OK(update(dskip.ptr()));
  for (size_t i = 0; i < keep.size(); ++i)
    expectSameBytes(*keep[i], before[i]);
}

TEST_F(Cuda, SgdUpdate) {
  unsigned seed = 400;
  struct Opt {
    double momentum, dampening, wd;
    bool nesterov;
  };
  const Opt opts[] = {{0, 0, 0, false},
                      {0.9, 0, 1e-2, false},
                      {0.9, 0.1, 0, true},
                      {0.5, 0.2, 1e-3, false}};
  for (DType t : {DType::F32, DType::BF16})
    for (const Opt &o : opts)
      for (double step : {1.0, 3.0}) {
        SCOPED_TRACE(std::string(name(t)) + " momentum " +
                     std::to_string(o.momentum) + " step " +
                     std::to_string(step));
        cuk::SgdOptions go;
        go.momentum = o.momentum;
        go.dampening = o.dampening;
        go.weightDecay = o.wd;
        go.nesterov = o.nesterov;
        cpuk::SgdOptions co;
        co.momentum = o.momentum;
        co.dampening = o.dampening;
        co.weightDecay = o.wd;
        co.nesterov = o.nesterov;
        Host p = random(t, {300}, -1, 1, seed++),
             g = random(t, {300}, -1, 1, seed++);
        Host buf = random(DType::F32, {300}, -1, 1, seed++);
        Host np = p, nb = buf;
        ASSERT_OK(cpuk::sgdUpdate(p, g, buf, 0.05, step, co, np, nb));
        Host lr = make(DType::F64, {}, {0.05}),
             st = make(DType::I64, {}, {step});
        Dev dp(p), dg(g), dbuf(buf), dlr(lr), dst(st);
        Dev dnp(t, {300}), dnb(buf); // without momentum nb is not written
        ASSERT_OK(
            cuk::sgdUpdate(dp, dg, dbuf, dlr, dst, nullptr, go, dnp, dnb));
        expectTol(dnp, np);
        expectTol(dnb, nb);
        // In place, and skipped: param and buffer stay.
        Host skip = make(DType::Bool, {}, {1});
        Dev dskip(skip);
        ASSERT_OK(
            cuk::sgdUpdate(dp, dg, dbuf, dlr, dst, dskip.ptr(), go, dp, dbuf));
        expectSameBytes(dp, p);
        expectSameBytes(dbuf, buf);
      }
}

/// sgdUpdateMulti: each tensor as sgdUpdate on the CPU (sizes across
/// chunks, one element, a bf16 gradient of an f32 parameter, nesterov and
/// plain momentum, the first step and a later one), in place; skipped,
/// nothing changes.
TEST_F(Cuda, SgdUpdateMultiIsEachUpdate) {
  unsigned seed = 450;
  for (bool nesterov : {false, true})
    for (double step : {1.0, 4.0}) {
      SCOPED_TRACE(std::string(nesterov ? "nesterov" : "momentum") + " step " +
                   std::to_string(step));
      cuk::SgdOptions go;
      cpuk::SgdOptions co;
      go.momentum = co.momentum = 0.9;
      go.dampening = co.dampening = nesterov ? 0 : 0.1;
      go.weightDecay = co.weightDecay = 1e-2;
      go.nesterov = co.nesterov = nesterov;
      float lr32 = 0.05f;
      Host lr = make(DType::F32, {}, {lr32}), st = make(DType::I64, {}, {step});
      Dev dlr(lr), dst(st);
      const int64_t sizes[] = {10, 20000, 1, 8193};
      std::vector<Host> ps, gs, bs, nps, nbs;
      std::vector<std::unique_ptr<Dev>> keep;
      std::vector<cuk::SgdTensors> all;
      for (int64_t n : sizes) {
        ps.push_back(random(DType::F32, {n}, -1, 1, seed++));
        gs.push_back(
            random(n == 1 ? DType::F32 : DType::BF16, {n}, -1, 1, seed++));
        bs.push_back(random(DType::F32, {n}, -1, 1, seed++));
        nps.push_back(ps.back());
        nbs.push_back(bs.back());
        ASSERT_OK(cpuk::sgdUpdate(ps.back(), gs.back(), bs.back(), double(lr32),
                                  step, co, nps.back(), nbs.back()));
        for (const Host *h : {&ps.back(), &gs.back(), &bs.back()})
          keep.push_back(std::make_unique<Dev>(*h));
        size_t b = keep.size() - 3;
        all.push_back({keep[b]->ref(), keep[b + 1]->ref(), keep[b + 2]->ref(),
                       keep[b]->ref(), keep[b + 2]->ref()});
      }
      ASSERT_OK(cuk::sgdUpdateMulti(all, dlr, dst, nullptr, go));
      for (size_t i = 0; i < ps.size(); ++i) {
        SCOPED_TRACE("tensor " + std::to_string(i));
        expectTol(*keep[3 * i], nps[i]);
        expectTol(*keep[3 * i + 2], nbs[i]);
      }
      ASSERT_OK(sync());
      expectSkipLeavesBytes(keep, [&](const TensorRef *skip) {
        return cuk::sgdUpdateMulti(all, dlr, dst, skip, go);
      });
    }
}

/// smp-fuse-grad-casts: f32 states with a bf16 or f16 gradient (Adam and
/// SGD), against the CPU's.
TEST_F(Cuda, OptimizersReadASixteenBitGradient) {
  for (DType t : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(name(t));
    const int64_t n = 20000;
    Host p = random(DType::F32, {n}, -1, 1, 470),
         g = random(t, {n}, -1, 1, 471);
    Host m = random(DType::F32, {n}, -0.1, 0.1, 472);
    Host v = random(DType::F32, {n}, 0, 0.01, 473);
    float lr32 = 1e-3f;
    Host lr = make(DType::F32, {}, {lr32}), step = make(DType::I64, {}, {5});
    Host np(p), nm(m), nv(v);
    cpuk::AdamOptions co;
    co.weightDecay = 0.01;
    ASSERT_OK(cpuk::adamUpdate(p, g, m, v, double(lr32), 5.0, co, np, nm, nv));
    cuk::AdamOptions go;
    go.weightDecay = 0.01;
    Dev dp(p), dg(g), dm(m), dv(v), dlr(lr), dstep(step);
    ASSERT_OK(
        cuk::adamUpdate(dp, dg, dm, dv, dlr, dstep, nullptr, go, dp, dm, dv));
    expectTol(dp, np);
    expectTol(dm, nm);
    expectTol(dv, nv);
    cpuk::SgdOptions cs;
    cs.momentum = 0.9;
    cuk::SgdOptions gs;
    gs.momentum = 0.9;
    Host sp(p), sb(m);
    ASSERT_OK(cpuk::sgdUpdate(p, g, m, double(lr32), 5.0, cs, sp, sb));
    Dev ep(p), eb(m);
    ASSERT_OK(cuk::sgdUpdate(ep, dg, eb, dlr, dstep, nullptr, gs, ep, eb));
    expectTol(ep, sp);
    expectTol(eb, sb);
  }
}

/// Adam against the CPU; f32 parameters (with f32 or bf16 gradients) take
/// the multi-tensor kernel's four-element path (adamRangeF32x4).
TEST_F(Cuda, AdamUpdateAndMultiTensorAdam) {
  unsigned seed = 420;
  const std::pair<DType, DType> types[] = {{DType::F32, DType::F32},
                                           {DType::F32, DType::BF16},
                                           {DType::BF16, DType::BF16},
                                           {DType::F64, DType::F64}};
  for (bool decoupled : {true, false})
    for (auto [t, gt] : types) {
      SCOPED_TRACE(std::string(name(t)) + " grads " + name(gt) +
                   (decoupled ? " AdamW" : " Adam"));
      cuk::AdamOptions go;
      go.weightDecay = 0.01;
      go.decoupled = decoupled;
      cpuk::AdamOptions co;
      co.weightDecay = 0.01;
      co.decoupled = decoupled;
      // lr in f32: the CPU gets the same (rounded) value.
      float lr32 = 1e-3f;
      Host lr = make(DType::F32, {}, {lr32}), step = make(DType::I64, {}, {5});
      Dev dlr(lr), dstep(step);
      const int64_t sizes[] = {10, 20000, 1, 8193};
      std::vector<Host> ps, gs, ms, vs, nps, nms, nvs;
      for (int64_t n : sizes) {
        ps.push_back(random(t, {n}, -1, 1, seed++));
        gs.push_back(random(gt, {n}, -1, 1, seed++));
        ms.push_back(random(DType::F32, {n}, -0.1, 0.1, seed++));
        vs.push_back(random(DType::F32, {n}, 0, 0.01, seed++));
        nps.push_back(ps.back());
        nms.push_back(ms.back());
        nvs.push_back(vs.back());
        ASSERT_OK(cpuk::adamUpdate(ps.back(), gs.back(), ms.back(), vs.back(),
                                   double(lr32), 5.0, co, nps.back(),
                                   nms.back(), nvs.back()));
      }
      // One tensor at a time.
      {
        Dev p(ps[1]), g(gs[1]), m(ms[1]), v(vs[1]);
        Dev np(t, ps[1].ref.shape), nm(DType::F32, ms[1].ref.shape),
            nv(DType::F32, vs[1].ref.shape);
        ASSERT_OK(
            cuk::adamUpdate(p, g, m, v, dlr, dstep, nullptr, go, np, nm, nv));
        expectTol(np, nps[1]);
        expectTol(nm, nms[1]);
        expectTol(nv, nvs[1]);
      }
      // All at once, in place.
      std::vector<std::unique_ptr<Dev>> keep;
      std::vector<cuk::AdamTensors> all;
      for (size_t i = 0; i < ps.size(); ++i) {
        for (const Host *h : {&ps[i], &gs[i], &ms[i], &vs[i]})
          keep.push_back(std::make_unique<Dev>(*h));
        size_t b = keep.size() - 4;
        all.push_back({keep[b]->ref(), keep[b + 1]->ref(), keep[b + 2]->ref(),
                       keep[b + 3]->ref(), keep[b]->ref(), keep[b + 2]->ref(),
                       keep[b + 3]->ref()});
      }
      ASSERT_OK(cuk::adamUpdateMulti(all, dlr, dstep, nullptr, go));
      for (size_t i = 0; i < ps.size(); ++i) {
        SCOPED_TRACE("tensor " + std::to_string(i));
        expectTol(*keep[4 * i], nps[i]);
        expectTol(*keep[4 * i + 2], nms[i]);
        expectTol(*keep[4 * i + 3], nvs[i]);
      }
      // Skipped: nothing changes.
      ASSERT_OK(sync());
      expectSkipLeavesBytes(keep, [&](const TensorRef *skip) {
        return cuk::adamUpdateMulti(all, dlr, dstep, skip, go);
      });
      // A zero skip flag updates.
      Host noSkip = make(DType::Bool, {}, {0});
      Dev dnoSkip(noSkip);
      Dev p(ps[0]), g(gs[0]), m(ms[0]), v(vs[0]);
      ASSERT_OK(
          cuk::adamUpdate(p, g, m, v, dlr, dstep, dnoSkip.ptr(), go, p, m, v));
      expectTol(p, nps[0]);
    }
}

} // namespace
} // namespace smp_cuda_test
