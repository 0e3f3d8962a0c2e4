// erf as x·P(x²)/Q(x²) on [-4, 4] for float (the CPU plugin's rational
// approximation, plugins/cpu/ops/vector_math.hpp): straight-line code PoCL vectorises
// across work-items, where its scalar builtin erf blocked it. Double keeps
// the builtin (sizeof folds at compile time).
C erf_(C x) {
  if (sizeof(C) != 4) return erf(x);
  C xc = clamp(x, (C)-4, (C)4);
  C z = xc * xc;
  C p = (C)-2.72614225801306e-10;
  p = p * z + (C)2.77068142495902e-08;
  p = p * z - (C)2.10102402082508e-06;
  p = p * z - (C)5.69250639462346e-05;
  p = p * z - (C)7.34990630326855e-04;
  p = p * z - (C)2.95459980854025e-03;
  p = p * z - (C)1.60960333262415e-02;
  C q = (C)-1.45660718464996e-05;
  q = q * z - (C)2.13374055278905e-04;
  q = q * z - (C)1.68282697438203e-03;
  q = q * z - (C)7.37332916720468e-03;
  q = q * z - (C)1.42647390514189e-02;
  return isnan(x) ? x : xc * p / q;
}
C gelu_tanh(C x) { return (C)0.5 * x * ((C)1 + tanh((C)0.7978845608028654 * (x + (C)0.044715 * x * x * x))); }
C gelu_erf(C x) { return (C)0.5 * x * ((C)1 + erf_(x * (C)0.7071067811865476)); }
C gelu_erf_grad(C x) {
  C cdf = (C)0.5 * ((C)1 + erf_(x * (C)0.7071067811865476));
  C pdf = exp((C)-0.5 * x * x) * (C)0.3989422804014327;
  return cdf + x * pdf;
}
C gelu_tanh_grad(C x) {
  C k = (C)0.7978845608028654, c = (C)0.044715;
  C t = tanh(k * (x + c * x * x * x));
  return (C)0.5 * ((C)1 + t) + (C)0.5 * x * ((C)1 - t * t) * k * ((C)1 + (C)3 * c * x * x);
}
