
C gelu_tanh(C x) { return (C)0.5 * x * ((C)1 + tanh((C)0.7978845608028654 * (x + (C)0.044715 * x * x * x))); }
C gelu_erf(C x) { return (C)0.5 * x * ((C)1 + erf(x * (C)0.7071067811865476)); }
C gelu_erf_grad(C x) {
  C cdf = (C)0.5 * ((C)1 + erf(x * (C)0.7071067811865476));
  C pdf = exp((C)-0.5 * x * x) * (C)0.3989422804014327;
  return cdf + x * pdf;
}
C gelu_tanh_grad(C x) {
  C k = (C)0.7978845608028654, c = (C)0.044715;
  C t = tanh(k * (x + c * x * x * x));
  return (C)0.5 * ((C)1 + t) + (C)0.5 * x * ((C)1 - t * t) * k * ((C)1 + (C)3 * c * x * x);
}
