//===- CudaDataMovementTest.cpp - CUDA data movement against the CPU -----===//
//
// copy, transpose, slice, expand, tile, trilu, copy_multi, concat, split
// and gather on the device against the CPU kernels' bytes.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include <memory>

namespace smp_cuda_test {
namespace {

TEST_F(Cuda, CopyTransposeSliceExpandTileTrilu) {
  unsigned seed = 170;
  for (DType t : {DType::F32, DType::F16, DType::I64, DType::Bool, DType::I8}) {
    SCOPED_TRACE(name(t));
    Host x = random(t, {2, 3, 4}, -50, 50, seed++);
    Dev dx(x);
    {
      Host want(t, {4, 6});
      ASSERT_OK(cpuk::copy(x, want));
      Dev d(t, {4, 6});
      ASSERT_OK(cuk::copy(dx, d));
      expectSameBytes(d, want);
    }
    for (std::vector<int64_t> perm :
         {std::vector<int64_t>{2, 0, 1}, {1, 0, 2}, {0, 2, 1}, {0, 1, 2}}) {
      std::vector<int64_t> shape{x.ref.shape[perm[0]], x.ref.shape[perm[1]],
                                 x.ref.shape[perm[2]]};
      Host want(t, shape);
      ASSERT_OK(cpuk::transpose(x, perm, want));
      Dev d(t, shape);
      ASSERT_OK(cuk::transpose(dx, perm, d));
      expectSameBytes(d, want);
    }
    {
      Host y = random(t, {5, 6}, -50, 50, seed++);
      Dev dy(y);
      Host want(t, {3, 3});
      ASSERT_OK(cpuk::slice(y, {4, 1}, {-2, 2}, want));
      Dev d(t, {3, 3});
      ASSERT_OK(cuk::slice(dy, {4, 1}, {-2, 2}, d));
      expectSameBytes(d, want);
      EXPECT_FALSE(cuk::slice(dy, {4, 1}, {2, 2}, d).ok()); // leaves the input
    }
    {
      Host y = random(t, {3, 1}, -50, 50, seed++);
      Dev dy(y);
      Host want(t, {2, 3, 4});
      ASSERT_OK(cpuk::expand(y, want));
      Dev d(t, {2, 3, 4});
      ASSERT_OK(cuk::expand(dy, d));
      expectSameBytes(d, want);
    }
    {
      Host want(t, {4, 3, 12});
      ASSERT_OK(cpuk::tile(x, {2, 1, 3}, want));
      Dev d(t, {4, 3, 12});
      ASSERT_OK(cuk::tile(dx, {2, 1, 3}, d));
      expectSameBytes(d, want);
    }
    for (bool upper : {false, true})
      for (int64_t k : {-1, 0, 2, 100}) {
        Host want(t, {2, 3, 4});
        ASSERT_OK(cpuk::trilu(x, upper, k, want));
        Dev d(t, {2, 3, 4});
        ASSERT_OK(cuk::trilu(dx, upper, k, d));
        expectSameBytes(d, want);
      }
  }
}

/// copy_multi (a data-parallel rank's chunks of the parameters, all_slice
/// of many): each pair's bytes, an empty one and one of several chunks
/// (kMultiChunk elements) among them; mixed dtypes are refused.
TEST_F(Cuda, CopyMultiIsEachCopy) {
  unsigned seed = 180;
  for (DType t : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(name(t));
    std::vector<std::vector<int64_t>> shapes{{5}, {0}, {3, 7}, {20000}, {1}};
    std::vector<Host> host;
    std::vector<std::unique_ptr<Dev>> in, out;
    std::vector<TensorRef> ins, outs;
    for (const std::vector<int64_t> &shape : shapes) {
      host.push_back(random(t, shape, -9, 9, seed++));
      in.push_back(std::make_unique<Dev>(host.back()));
      out.push_back(std::make_unique<Dev>(t, shape));
      ins.push_back(in.back()->ref());
      outs.push_back(out.back()->ref());
    }
    ASSERT_OK(cuk::copyMulti(ins, outs));
    for (size_t k = 0; k < shapes.size(); ++k)
      if (host[k].ref.numel() > 0)
        expectSameBytes(*out[k], host[k]);
  }
  Dev a(DType::F32, {4}), b(DType::BF16, {4});
  Status s = cuk::copyMulti({a.ref(), b.ref()}, {a.ref(), b.ref()});
  EXPECT_EQ(s.error.rfind("copy_multi: input #1", 0), 0u) << s.error;
}

TEST_F(Cuda, ConcatSplitGather) {
  unsigned seed = 190;
  for (DType t : {DType::F32, DType::BF16, DType::I64, DType::Bool}) {
    SCOPED_TRACE(name(t));
    for (int64_t axis : {0, 1, -1}) {
      std::vector<Host> parts;
      std::vector<int64_t> whole{3, 4, 5};
      int64_t a = axis < 0 ? axis + 3 : axis;
      int64_t sizes[] = {1, 0, 2};
      whole[a] = 3;
      for (int64_t s : sizes) {
        std::vector<int64_t> shape{3, 4, 5};
        shape[a] = s;
        parts.push_back(random(t, shape, -9, 9, seed++));
      }
      std::vector<TensorRef> refs;
      for (const Host &p : parts)
        refs.push_back(p.ref);
      Host want(t, whole);
      ASSERT_OK(cpuk::concat(refs, axis, want));
      Dev p0(parts[0]), p1(parts[1]), p2(parts[2]), d(t, whole);
      ASSERT_OK(cuk::concat({p0.ref(), p1.ref(), p2.ref()}, axis, d));
      expectSameBytes(d, want);
      // Split the concatenation back.
      Dev s0(t, parts[0].ref.shape), s1(t, parts[1].ref.shape),
          s2(t, parts[2].ref.shape);
      ASSERT_OK(cuk::split(d, axis, {s0.ref(), s1.ref(), s2.ref()}));
      expectSameBytes(s0, parts[0]);
      expectSameBytes(s2, parts[2]);
    }
    // More parts than a launch each: one multi-tensor launch (a gradient
    // bucket's concat), an empty part among them, parts of more than one
    // chunk (kMultiChunk elements) along the last axis.
    for (int64_t axis : {0, 1, -1}) {
      SCOPED_TRACE(axis);
      int64_t a = axis < 0 ? axis + 3 : axis;
      std::vector<int64_t> sizes{2, 0, 1, 3, 1, 4, 2};
      if (a == 2)
        sizes = {2, 0, 1, 5000, 1, 4, 7000};
      std::vector<Host> parts;
      std::vector<std::unique_ptr<Dev>> dev, back;
      std::vector<TensorRef> refs, devRefs, backRefs;
      std::vector<int64_t> whole{3, 2, 5};
      whole[a] = 0;
      for (int64_t size : sizes) {
        std::vector<int64_t> shape{3, 2, 5};
        shape[a] = size;
        whole[a] += size;
        parts.push_back(random(t, shape, -9, 9, seed++));
        dev.push_back(std::make_unique<Dev>(parts.back()));
        devRefs.push_back(dev.back()->ref());
        back.push_back(std::make_unique<Dev>(t, shape));
        backRefs.push_back(back.back()->ref());
      }
      for (const Host &p : parts) // after the vector's last move
        refs.push_back(p.ref);
      Host want(t, whole);
      ASSERT_OK(cpuk::concat(refs, axis, want));
      Dev d(t, whole);
      ASSERT_OK(cuk::concat(devRefs, axis, d));
      expectSameBytes(d, want);
      ASSERT_OK(cuk::split(d, axis, backRefs));
      for (size_t k = 0; k < parts.size(); ++k)
        if (sizes[k] > 0)
          expectSameBytes(*back[k], parts[k]);
    }
    Host data = random(t, {5, 4, 3}, -9, 9, seed++);
    Dev dd(data);
    for (DType it : {DType::I64, DType::I32, DType::U8})
      for (int64_t axis : {0, 1, -1}) {
        int64_t a = axis < 0 ? axis + 3 : axis, dim = data.ref.shape[a];
        Host idx = make(it, {2, 3},
                        {0, double(dim - 1), 1,
                         smp::base::isSignedInteger(it) ? -1.0 : 2.0, 0,
                         double(dim - 1)});
        std::vector<int64_t> shape(data.ref.shape.begin(),
                                   data.ref.shape.begin() + a);
        shape.insert(shape.end(), {2, 3});
        shape.insert(shape.end(), data.ref.shape.begin() + a + 1,
                     data.ref.shape.end());
        Host want(t, shape);
        ASSERT_OK(cpuk::gather(data, idx, axis, want));
        Dev di(idx), d(t, shape);
        ASSERT_OK(cuk::gather(dd, di, axis, d));
        expectSameBytes(d, want);
      }
  }
  Host data = random(DType::F32, {5, 2}, -1, 1, 3);
  Host idx = make(DType::I64, {3}, {0, 5, 1});
  Dev dd(data), di(idx), d(DType::F32, {3, 2});
  ASSERT_OK(cuk::gather(dd, di, 0, d));
  expectDeviceError(
      "gather: index 5 at position 1 is out of range for axis 0 of size 5");
}

} // namespace
} // namespace smp_cuda_test
