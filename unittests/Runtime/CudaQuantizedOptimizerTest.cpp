//===- CudaQuantizedOptimizerTest.cpp - 8-bit AdamW on the device ---------===//
//
// memopt_adamw8bit_update on the device against the host runtime's update
// (runtime/host/Optimizer.cpp: QuantizeMath.h's adamw8bitBlock over each
// block), byte for byte: the parameters' bits, every code and every
// absmax. QuantizedOptimizerTest.cpp checks the host's update against an
// independent reference; here the two runtimes must agree exactly, since
// they share the formulas and an absmax is a max (the order of the
// device's reduction does not change it). They need a device and skip
// without one.
//
//===----------------------------------------------------------------------===//

#include "CudaTestFixture.h"
#include "QuantizedStateTestUtil.h"
#include "memopt/runtime/OptimizerMath.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

using memopt::test::bitsOf;
using memopt::test::CudaTest;
using memopt::test::Packed;
using memopt::test::spreadGradient;

namespace {

namespace rt = memopt::runtime;

struct Hyper {
  double lr, beta1, beta2, eps, weightDecay;
};

/// The host runtime's memopt_adamw8bit_update of f32 tensors, not skipped,
/// at `lrScale`: the loop of runtime/host/Optimizer.cpp.
void hostUpdate(const Hyper &h, int64_t step, double lrScale,
                const std::vector<float> &param, const std::vector<float> &grad,
                const Packed &m, const Packed &v, std::vector<float> &newParam,
                Packed &newM, Packed &newV) {
  static const float signedCode[256] = MEMOPT_DYNAMIC_SIGNED_CODE;
  static const float unsignedCode[256] = MEMOPT_DYNAMIC_UNSIGNED_CODE;
  int64_t n = static_cast<int64_t>(param.size());
  rt::AdamWCoefficients c = rt::adamwCoefficients(
      h.lr * lrScale, h.beta1, h.beta2, h.eps, h.weightDecay, step);
  newParam.resize(n);
  float mScratch[rt::kQuantBlock], vScratch[rt::kQuantBlock];
  for (int64_t b = 0; b < m.blocks(); ++b) {
    int64_t begin = b * rt::kQuantBlock;
    int64_t count = std::min(rt::kQuantBlock, n - begin);
    float mAbsmax, vAbsmax;
    rt::adamw8bitBlock(
        c, signedCode, unsignedCode, param.data() + begin, grad.data() + begin,
        rt::quantizedCodes(m.data(), b), m.absmax(b),
        rt::quantizedCodes(v.data(), b), v.absmax(b), count,
        newParam.data() + begin, mScratch, vScratch, newM.codes(b), mAbsmax,
        newV.codes(b), vAbsmax);
    newM.setAbsmax(b, mAbsmax);
    newV.setAbsmax(b, vAbsmax);
    // Past n: the code of 0.
    for (int64_t j = count; j < rt::kQuantBlock; ++j) {
      newM.codes(b)[j] = rt::nearestCode(signedCode, 0.0f);
      newV.codes(b)[j] = rt::nearestCode(unsignedCode, 0.0f);
    }
  }
}

/// The parameters' bits, the codes and the absmaxes of a device update
/// against the host's, naming the first difference and counting all.
void expectSameBytes(const std::vector<float> &param, const Packed &m,
                     const Packed &v, const std::vector<float> &hostParam,
                     const Packed &hostM, const Packed &hostV) {
  int64_t n = static_cast<int64_t>(param.size());
  int64_t differing = 0, first = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (bitsOf(param[i]) != bitsOf(hostParam[i])) {
      ++differing;
      if (first < 0)
        first = i;
    }
  }
  EXPECT_EQ(differing, 0) << "parameters differ, the first at " << first << ": "
                          << (first < 0 ? 0.0f : param[first])
                          << " on the device, "
                          << (first < 0 ? 0.0f : hostParam[first])
                          << " on the host";
  auto compare = [&](const Packed &got, const Packed &want, const char *what) {
    const std::vector<uint8_t> &a = got.bytes, &b = want.bytes;
    auto mismatch = std::mismatch(a.begin(), a.end(), b.begin());
    EXPECT_TRUE(mismatch.first == a.end())
        << what << " differs at byte " << (mismatch.first - a.begin()) << " of "
        << a.size() << " (records of an absmax and "
        << memopt::runtime::kQuantBlock << " codes)";
  };
  compare(m, hostM, "exp_avg");
  compare(v, hostV, "exp_avg_sq");
}

class CudaAdamw8bitTest : public CudaTest {
protected:
  /// Device copies of one update's inputs and outputs.
  struct Buffers {
    float *param, *grad, *newParam;
    uint8_t *m, *v, *newM, *newV;
  };

  /// Uploads the inputs; the outputs' packed states hold 0x5A bytes.
  Buffers place(const std::vector<float> &param, const std::vector<float> &grad,
                const Packed &m, const Packed &v) {
    int64_t n = static_cast<int64_t>(param.size());
    Buffers d;
    d.param = upload(param);
    d.grad = upload(grad);
    d.m = upload(m.bytes);
    d.v = upload(v.bytes);
    d.newParam = static_cast<float *>(alloc(4 * n));
    d.newM = upload(Packed(n, 0x5A).bytes);
    d.newV = upload(Packed(n, 0x5A).bytes);
    return d;
  }

  /// The update of f32 tensors on the device; `step` and `skip` live there.
  void run(const Hyper &h, const int64_t *step, const uint8_t *skip,
           const float *param, const float *grad, const uint8_t *m,
           const uint8_t *v, float *newParam, uint8_t *newM, uint8_t *newV,
           int64_t n) {
    memopt_adamw8bit_update(ctx, MEMOPT_F32, param, grad, m, v, step, skip,
                            newParam, newM, newV, n, h.lr, h.beta1, h.beta2,
                            h.eps, h.weightDecay);
  }

  /// A packed moment of `n` elements, read back whole.
  Packed downloadPacked(const uint8_t *p, int64_t n) {
    Packed packed(n);
    packed.bytes = download<uint8_t>(p, packed.bytes.size());
    return packed;
  }
};

/// One full block and a partial one (n = 300), and 274 blocks, the last
/// partial (n = 70000): a first step from zero state, a second from the
/// first's state out of place, a third in place (and at an lr scale), each
/// equal to the host's update of the same inputs.
TEST_F(CudaAdamw8bitTest, MatchesTheHostByteForByte) {
  const Hyper h{1e-2, 0.9, 0.999, 1e-8, 0.01};
  for (int64_t n : {int64_t(300), int64_t(70000)}) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> param = random(n);
    Packed m(n), v(n);
    std::vector<float> hostParam;
    Packed hostM(n), hostV(n);
    for (int64_t step : {1, 2}) {
      SCOPED_TRACE("step " + std::to_string(step));
      std::vector<float> grad = spreadGradient(rng, n);
      Buffers d = place(param, grad, m, v);
      run(h, upload(std::vector<int64_t>{step}), nullptr, d.param, d.grad, d.m,
          d.v, d.newParam, d.newM, d.newV, n);
      std::vector<float> gotParam = download<float>(d.newParam, n);
      Packed gotM = downloadPacked(d.newM, n), gotV = downloadPacked(d.newV, n);
      ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK)
          << memopt_get_error_message(ctx);
      hostUpdate(h, step, 1.0, param, grad, m, v, hostParam, hostM, hostV);
      expectSameBytes(gotParam, gotM, gotV, hostParam, hostM, hostV);
      // The inputs are untouched.
      EXPECT_EQ(download<uint8_t>(d.m, m.bytes.size()), m.bytes);
      EXPECT_EQ(download<float>(d.param, n), param);
      // The next step starts from the device's state.
      param = gotParam;
      m = gotM;
      v = gotV;
    }

    // In place, at lr scale 0.5.
    const int64_t step = 3;
    std::vector<float> grad = spreadGradient(rng, n);
    Buffers d = place(param, grad, m, v);
    memopt_set_lr_scale(ctx, 0.5);
    run(h, upload(std::vector<int64_t>{step}), nullptr, d.param, d.grad, d.m,
        d.v, d.param, d.m, d.v, n);
    memopt_set_lr_scale(ctx, 1.0);
    std::vector<float> gotParam = download<float>(d.param, n);
    Packed gotM = downloadPacked(d.m, n), gotV = downloadPacked(d.v, n);
    ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
    hostUpdate(h, step, 0.5, param, grad, m, v, hostParam, hostM, hostV);
    expectSameBytes(gotParam, gotM, gotV, hostParam, hostM, hostV);
  }
}

/// A skipped step copies every input to its output, the packed states
/// whole, before it reads the step (0 here: no error); in place it leaves
/// everything as it was.
TEST_F(CudaAdamw8bitTest, SkippedStepLeavesEverythingUnchanged) {
  const Hyper h{1e-2, 0.9, 0.999, 1e-8, 0.01};
  for (int64_t n : {int64_t(300), int64_t(70000)}) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> param = random(n), grad = spreadGradient(rng, n);
    Packed m(n), v(n);
    std::vector<float> stateParam;
    Packed stateM(n), stateV(n);
    hostUpdate(h, 1, 1.0, param, spreadGradient(rng, n), m, v, stateParam,
               stateM, stateV);
    Buffers d = place(stateParam, grad, stateM, stateV);
    const int64_t *step = upload(std::vector<int64_t>{0});
    const uint8_t *skip = upload(std::vector<uint8_t>{1});
    run(h, step, skip, d.param, d.grad, d.m, d.v, d.newParam, d.newM, d.newV,
        n);
    EXPECT_EQ(download<float>(d.newParam, n), stateParam);
    EXPECT_EQ(download<uint8_t>(d.newM, stateM.bytes.size()), stateM.bytes);
    EXPECT_EQ(download<uint8_t>(d.newV, stateV.bytes.size()), stateV.bytes);
    run(h, step, skip, d.param, d.grad, d.m, d.v, d.param, d.m, d.v, n);
    EXPECT_EQ(download<float>(d.param, n), stateParam);
    EXPECT_EQ(download<uint8_t>(d.m, stateM.bytes.size()), stateM.bytes);
    EXPECT_EQ(download<uint8_t>(d.v, stateV.bytes.size()), stateV.bytes);
    EXPECT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
  }
}

/// A step below 1 is the host's error, under this entry's name, and writes
/// nothing.
TEST_F(CudaAdamw8bitTest, StepBelowOneIsReportedUnderItsEntry) {
  const Hyper h{1e-2, 0.9, 0.999, 1e-8, 0.01};
  const int64_t n = 300;
  std::vector<float> param = random(n), grad = random(n);
  Buffers d = place(param, grad, Packed(n), Packed(n));
  std::vector<float> before = download<float>(d.newParam, n);
  expectError = true;
  run(h, upload(std::vector<int64_t>{0}), nullptr, d.param, d.grad, d.m, d.v,
      d.newParam, d.newM, d.newV, n);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(memopt_get_error_message(ctx),
               "memopt_adamw8bit_update: step 0 is not a 1-based update "
               "count");
  memopt_clear_error(ctx);
  EXPECT_EQ(download<uint8_t>(d.newM, Packed(n).bytes.size()),
            Packed(n, 0x5A).bytes);
  std::vector<float> after = download<float>(d.newParam, n);
  EXPECT_EQ(std::memcmp(after.data(), before.data(), 4 * n), 0);
}

} // namespace
