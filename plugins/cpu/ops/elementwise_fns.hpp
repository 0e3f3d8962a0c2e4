// CPU plugin: the element functions of the unary ops that both their
// kernels (elementwise.cc) and the graph compiler's fused loops
// (graph/elementwise_fusion.cc) compute, written once so the two agree.
//
// HAL_CPU_SHARED_UNARY(X) calls X(NAME, TYPES, EXPR) per op: EXPR computes
// the result from `x` of type `V` (the computing type: float, double, or an
// integer for the kNumeric ones); TYPES names which storage types the
// kernel is made for (kFloat or kNumeric, elementwise.cc's). EXPR may use
// <cmath> and vmath:: (vector_math.hpp), which the including file provides.
#ifndef HAL_PLUGINS_CPU_OPS_ELEMENTWISE_FNS_HPP_
#define HAL_PLUGINS_CPU_OPS_ELEMENTWISE_FNS_HPP_

#define HAL_CPU_SHARED_UNARY(X)                                                \
  X(abs, kNumeric, x < V(0) ? V(-x) : x)                                       \
  X(neg, kNumeric, V(-x))                                                      \
  X(exp, kFloat, vmath::exp(x))                                                \
  X(log, kFloat, std::log(x))                                                  \
  X(log1p, kFloat, std::log1p(x))                                              \
  X(expm1, kFloat, std::expm1(x))                                              \
  X(sqrt, kFloat, std::sqrt(x))                                                \
  X(rsqrt, kFloat, V(1) / std::sqrt(x))                                        \
  X(reciprocal, kFloat, V(1) / x)                                              \
  X(sin, kFloat, std::sin(x))                                                  \
  X(cos, kFloat, std::cos(x))                                                  \
  X(tanh, kFloat, vmath::tanh(x))                                              \
  X(sigmoid, kFloat, vmath::sigmoid(x))                                        \
  X(relu, kNumeric, x < V(0) ? V(0) : x) /* NaN propagates, as clamp_min */   \
  X(silu, kFloat, vmath::silu(x))                                              \
  X(erf, kFloat, vmath::erf(x))                                                \
  X(tan, kFloat, std::tan(x))                                                  \
  X(asin, kFloat, std::asin(x))                                                \
  X(acos, kFloat, std::acos(x))                                                \
  X(atan, kFloat, std::atan(x))                                                \
  X(sinh, kFloat, std::sinh(x))                                                \
  X(cosh, kFloat, std::cosh(x))                                                \
  X(asinh, kFloat, std::asinh(x))                                              \
  X(acosh, kFloat, std::acosh(x))                                              \
  X(atanh, kFloat, std::atanh(x))                                              \
  X(log2, kFloat, std::log2(x))                                                \
  X(log10, kFloat, std::log10(x))                                              \
  X(exp2, kFloat, std::exp2(x))                                                \
  X(erfc, kFloat, std::erfc(x))

#endif  // HAL_PLUGINS_CPU_OPS_ELEMENTWISE_FNS_HPP_
