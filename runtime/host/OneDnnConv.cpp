//===- OneDnnConv.cpp - host convolutions through oneDNN ------------------===//
//
// One oneDNN primitive per convolution shape and direction, made at the
// shape's first call and kept in the context (PlanCache.h) with the reorders
// between memopt's layouts (NCHW, [G]OIHW) and the blocked layouts the
// primitive chose. Every buffer a call needs (reordered operands, oneDNN's
// scratchpad) is host workspace, counted in the high-water mark like any
// other kernel's.
//
// A shape runs through oneDNN only when oneDNN chose a JIT kernel for it;
// its gemm- or reference-based fallbacks are no faster than memopt's own
// im2col + GEMM. MEMOPT_HOST_ONEDNN=0 in the environment
// when a context makes its first convolution turns oneDNN off for it.
//
// oneDNN runs on the calling thread. Debian's oneDNN is built on OpenMP,
// whose workers spin after each parallel region; beside the host runtime's
// threads (Parallel.h) and OpenBLAS's, which spin too, two OpenMP workers
// made the CNN at batch 64 slower on 2 cores (10.1 ms a step against 7.6
// with one; 2026-12-02). One thread also makes every direction's result
// independent of the thread count, the filter gradient's included.
//
//===----------------------------------------------------------------------===//

#include "OneDnnConv.h"

#include "memopt/runtime/PlanCache.h"

#include <dnnl.hpp>
#include <dnnl_debug.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>

// The OpenMP runtime oneDNN runs on (libgomp); memopt itself is not built
// with OpenMP.
extern "C" void omp_set_num_threads(int count);

using namespace memopt::host;
using dnnl::memory;

namespace {

enum Direction { Forward, GradInput, GradFilter };

/// The direction and every field of the shape.
using PlanKey = std::array<int64_t, 15>;

PlanKey keyOf(Direction direction, const ConvShape &g) {
  return {direction, g.n,  g.c,  g.h,  g.w,  g.o,  g.kh,    g.kw,
          g.sh,      g.sw, g.ph, g.pw, g.dh, g.dw, g.groups};
}

/// An operand in memopt's layout and in the primitive's, and the reorder
/// between them when they differ.
struct Operand {
  memory::desc user, inner;
  std::optional<dnnl::reorder> reorder;

  void init(const dnnl::engine &engine, const memory::desc &userDesc,
            const memory::desc &innerDesc, bool toUser) {
    user = userDesc;
    inner = innerDesc;
    if (user != inner)
      reorder = toUser ? dnnl::reorder(dnnl::reorder::primitive_desc(
                             engine, inner, engine, user))
                       : dnnl::reorder(dnnl::reorder::primitive_desc(
                             engine, user, engine, inner));
  }
};

struct Plan {
  /// Whether oneDNN has a JIT kernel for the shape (otherwise the caller
  /// computes it; remembered so that the next call does not ask again).
  bool usable = false;
  dnnl::primitive primitive;
  /// The two inputs and the output, with their oneDNN argument names.
  Operand a, b, out;
  int argA = 0, argB = 0, argOut = 0;
  memory::desc scratchpad;
};

memory::dims dims(std::initializer_list<int64_t> values) {
  return memory::dims(values.begin(), values.end());
}

/// The convolution's descriptors in memopt's layouts and as "any layout"
/// for the primitive to choose.
struct ConvDescs {
  explicit ConvDescs(const ConvShape &g)
      : src(dims({g.n, g.c, g.h, g.w}), memory::data_type::f32,
            memory::format_tag::nchw),
        dst(dims({g.n, g.o, g.oh, g.ow}), memory::data_type::f32,
            memory::format_tag::nchw),
        weights(g.groups == 1
                    ? memory::desc(dims({g.o, g.c, g.kh, g.kw}),
                                   memory::data_type::f32,
                                   memory::format_tag::oihw)
                    : memory::desc(dims({g.groups, g.og(), g.cg(), g.kh, g.kw}),
                                   memory::data_type::f32,
                                   memory::format_tag::goihw)),
        strides(dims({g.sh, g.sw})), dilations(dims({g.dh - 1, g.dw - 1})),
        padLeft(dims({g.ph, g.pw})),
        // memopt's output extents floor away what the last window would not
        // cover; oneDNN wants the right padding that gives the same extents.
        padRight(
            dims({(g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1 - g.h - g.ph,
                  (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1 - g.w - g.pw})) {}

  static memory::desc any(const memory::desc &desc) {
    return memory::desc(desc.dims(), memory::data_type::f32,
                        memory::format_tag::any);
  }

  dnnl::convolution_forward::primitive_desc
  forward(const dnnl::engine &engine, const dnnl::primitive_attr &attr) const {
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training,
                                         dnnl::algorithm::convolution_direct,
                                         any(src), any(weights), any(dst),
                                         strides, dilations, padLeft, padRight);
    return dnnl::convolution_forward::primitive_desc(desc, attr, engine);
  }

  memory::desc src, dst, weights;
  memory::dims strides, dilations, padLeft, padRight;
};

bool isJit(const char *impl) { return std::strncmp(impl, "jit", 3) == 0; }

/// Fills `plan` for the direction; throws dnnl::error when oneDNN rejects
/// the shape.
void makePlan(const dnnl::engine &engine, Direction direction,
              const ConvShape &g, Plan &plan) {
  ConvDescs d(g);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto forward = d.forward(engine, attr);
  if (direction == Forward) {
    plan.usable = isJit(forward.impl_info_str());
    plan.primitive = dnnl::convolution_forward(forward);
    plan.a.init(engine, d.src, forward.src_desc(), false);
    plan.b.init(engine, d.weights, forward.weights_desc(), false);
    plan.out.init(engine, d.dst, forward.dst_desc(), true);
    plan.argA = DNNL_ARG_SRC;
    plan.argB = DNNL_ARG_WEIGHTS;
    plan.argOut = DNNL_ARG_DST;
    plan.scratchpad = forward.scratchpad_desc();
  } else if (direction == GradInput) {
    dnnl::convolution_backward_data::desc desc(
        dnnl::algorithm::convolution_direct, ConvDescs::any(d.src),
        ConvDescs::any(d.weights), ConvDescs::any(d.dst), d.strides,
        d.dilations, d.padLeft, d.padRight);
    dnnl::convolution_backward_data::primitive_desc pd(desc, attr, engine,
                                                       forward);
    plan.usable = isJit(pd.impl_info_str());
    plan.primitive = dnnl::convolution_backward_data(pd);
    plan.a.init(engine, d.dst, pd.diff_dst_desc(), false);
    plan.b.init(engine, d.weights, pd.weights_desc(), false);
    plan.out.init(engine, d.src, pd.diff_src_desc(), true);
    plan.argA = DNNL_ARG_DIFF_DST;
    plan.argB = DNNL_ARG_WEIGHTS;
    plan.argOut = DNNL_ARG_DIFF_SRC;
    plan.scratchpad = pd.scratchpad_desc();
  } else {
    dnnl::convolution_backward_weights::desc desc(
        dnnl::algorithm::convolution_direct, ConvDescs::any(d.src),
        ConvDescs::any(d.weights), ConvDescs::any(d.dst), d.strides,
        d.dilations, d.padLeft, d.padRight);
    dnnl::convolution_backward_weights::primitive_desc pd(desc, attr, engine,
                                                          forward);
    plan.usable = isJit(pd.impl_info_str());
    plan.primitive = dnnl::convolution_backward_weights(pd);
    plan.a.init(engine, d.dst, pd.diff_dst_desc(), false);
    plan.b.init(engine, d.src, pd.src_desc(), false);
    plan.out.init(engine, d.weights, pd.diff_weights_desc(), true);
    plan.argA = DNNL_ARG_DIFF_DST;
    plan.argB = DNNL_ARG_SRC;
    plan.argOut = DNNL_ARG_DIFF_WEIGHTS;
    plan.scratchpad = pd.scratchpad_desc();
  }
}

/// Host workspace for a oneDNN memory of `desc` (empty when none is needed).
int64_t floatsFor(const memory::desc &desc) {
  return static_cast<int64_t>((desc.get_size() + sizeof(float) - 1) /
                              sizeof(float));
}

} // namespace

struct memopt::host::ConvPrimitives {
  bool enabled = true;
  dnnl::engine engine;
  dnnl::stream stream;
  memopt::runtime::PlanCache<PlanKey, Plan> plans;
  /// Plans whose shape runs through oneDNN.
  int64_t usable = 0;
  /// Shapes and directions that ran through im2col + GEMM.
  std::set<PlanKey> im2col;
};

void memopt::host::destroyConvPrimitives(ConvPrimitives *primitives) {
  delete primitives;
}

namespace {

ConvPrimitives *primitivesOf(memopt_context *ctx) {
  if (!ctx->convPrimitives) {
    auto *primitives = new ConvPrimitives();
    const char *flag = std::getenv("MEMOPT_HOST_ONEDNN");
    primitives->enabled = !(flag && std::strcmp(flag, "0") == 0);
    if (primitives->enabled) {
      primitives->engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
      primitives->stream = dnnl::stream(primitives->engine);
      omp_set_num_threads(1);
    }
    ctx->convPrimitives = primitives;
  }
  return ctx->convPrimitives;
}

/// Runs `plan` on memopt-layout operands a, b -> out.
void execute(memopt_context *ctx, ConvPrimitives &p, Plan &plan, const float *a,
             const float *b, float *out) {
  const dnnl::engine &engine = p.engine;
  // Reordered copies live in workspace for the call.
  Workspace aCopy(ctx, plan.a.reorder ? floatsFor(plan.a.inner) : 0, false);
  Workspace bCopy(ctx, plan.b.reorder ? floatsFor(plan.b.inner) : 0, false);
  Workspace outCopy(ctx, plan.out.reorder ? floatsFor(plan.out.inner) : 0,
                    false);
  Workspace scratch(ctx, floatsFor(plan.scratchpad), false);
  auto input = [&](Operand &operand, const float *data, Workspace &copy) {
    memory user(operand.user, engine, const_cast<float *>(data));
    if (!operand.reorder)
      return user;
    memory inner(operand.inner, engine, copy.get());
    operand.reorder->execute(p.stream, user, inner);
    return inner;
  };
  memory ma = input(plan.a, a, aCopy), mb = input(plan.b, b, bCopy);
  memory userOut(plan.out.user, engine, out);
  memory mOut = plan.out.reorder ? memory(plan.out.inner, engine, outCopy.get())
                                 : userOut;
  memory mScratch(plan.scratchpad, engine, scratch.get());
  plan.primitive.execute(p.stream, {{plan.argA, ma},
                                    {plan.argB, mb},
                                    {plan.argOut, mOut},
                                    {DNNL_ARG_SCRATCHPAD, mScratch}});
  if (plan.out.reorder)
    plan.out.reorder->execute(p.stream, mOut, userOut);
  p.stream.wait();
}

bool run(memopt_context *ctx, Direction direction, const ConvShape &g,
         const float *a, const float *b, float *out) {
  ConvPrimitives &p = *primitivesOf(ctx);
  if (!p.enabled || g.n <= 0 || g.c <= 0 || g.h <= 0 || g.w <= 0 || g.o <= 0 ||
      g.oh <= 0 || g.ow <= 0) {
    p.im2col.insert(keyOf(direction, g));
    return false;
  }
  bool done = false;
  try {
    Plan *plan = p.plans.get(keyOf(direction, g), [&](Plan &made) {
      try {
        makePlan(p.engine, direction, g, made);
      } catch (const dnnl::error &) {
        made.usable = false; // oneDNN does not take the shape
      }
      p.usable += made.usable;
      return true;
    });
    if (plan->usable) {
      execute(ctx, p, *plan, a, b, out);
      done = true;
    } else {
      p.im2col.insert(keyOf(direction, g));
    }
  } catch (const dnnl::error &error) {
    setError(ctx, MEMOPT_ERROR_DEVICE,
             direction == Forward     ? "memopt_conv2d"
             : direction == GradInput ? "memopt_conv2d_grad_input"
                                      : "memopt_conv2d_grad_filter",
             "oneDNN failed: %s (%s)", error.what(),
             dnnl_status2str(error.status));
    done = true;
  }
  return done;
}

} // namespace

int64_t memopt::host::oneDnnConvPlanCount(const memopt_context *ctx) {
  return ctx->convPrimitives ? ctx->convPrimitives->usable : 0;
}

int64_t memopt::host::im2colConvShapeCount(const memopt_context *ctx) {
  return ctx->convPrimitives
             ? static_cast<int64_t>(ctx->convPrimitives->im2col.size())
             : 0;
}

bool memopt::host::oneDnnConvForward(memopt_context *ctx, const ConvShape &g,
                                     const float *x, const float *w, float *y) {
  return run(ctx, Forward, g, x, w, y);
}

bool memopt::host::oneDnnConvGradInput(memopt_context *ctx, const ConvShape &g,
                                       const float *dy, const float *w,
                                       float *dx) {
  return run(ctx, GradInput, g, dy, w, dx);
}

bool memopt::host::oneDnnConvGradFilter(memopt_context *ctx, const ConvShape &g,
                                        const float *dy, const float *x,
                                        float *dw) {
  return run(ctx, GradFilter, g, dy, x, dw);
}
