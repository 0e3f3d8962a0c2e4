// Special functions of catalog 1.4/1.5 in the compute type C (float or double), by
// the algorithms of the SDK's kernel/special.hpp (which the CPU plugin runs in
// double): digamma by recurrence and its asymptotic series; the modified Bessel
// functions I0/I1 (and e^-|x| scaled) by their power series up to |x| = 30 and the
// asymptotic series beyond; j0 = sin x / x with its series near 0.
C digamma_(C x) {
  if (isnan(x)) return x;
  if (x == (C)0) return copysign((C)INFINITY, -x);
  C acc = (C)0;
  if (x < (C)0) {
    if (x == trunc(x)) return (C)NAN;
    // ψ(x) = ψ(1 - x) - π / tan(πx), with the fraction of x for an accurate tan
    acc = -(C)3.14159265358979323846 / tan((C)3.14159265358979323846 * (x - trunc(x)));
    x = (C)1 - x;
  }
  while (x < (C)10) {
    acc -= (C)1 / x;
    x += (C)1;
  }
  C z = (C)1 / (x * x);
  C series = z * ((C)(1.0 / 12) + z * ((C)(-1.0 / 120) + z * ((C)(1.0 / 252) + z * ((C)(-1.0 / 240) +
             z * ((C)(1.0 / 132) + z * ((C)(-691.0 / 32760) + z * (C)(1.0 / 12)))))));
  return acc + log(x) - (C)0.5 / x - series;
}

// e^-|x|·I_nu(|x|) for nu = 0, 1.
C bessel_i_scaled_abs(int nu, C ax) {
  if (ax <= (C)30) {
    C y = ax * ax / (C)4, term = nu == 0 ? (C)1 : ax / (C)2, sum = term;
    for (int k = 1; k < 200; ++k) {
      term *= y / ((C)k * (C)(k + nu));
      sum += term;
      if (term < (C)1e-17 * sum) break;
    }
    return sum * exp(-ax);
  }
  C mu = (C)(4 * nu * nu), term = (C)1, sum = (C)1;
  for (int k = 1; k < 60; ++k) {
    C odd = (C)(2 * k - 1);
    term *= -(mu - odd * odd) / ((C)k * (C)8 * ax);
    sum += term;
    if (fabs(term) < (C)1e-17 * fabs(sum)) break;
  }
  return sum / sqrt((C)6.28318530717958647692 * ax);
}
C i0e_(C x) { return isnan(x) ? x : bessel_i_scaled_abs(0, fabs(x)); }
C i1e_(C x) { return isnan(x) ? x : copysign(bessel_i_scaled_abs(1, fabs(x)), x); }
// I0, I1: the scaled value times e^|x| in two halves, so the product overflows only when I does.
C i0_(C x) { C h = exp(fabs(x) / (C)2); return isnan(x) ? x : bessel_i_scaled_abs(0, fabs(x)) * h * h; }
C i1_(C x) {
  C h = exp(fabs(x) / (C)2);
  return isnan(x) ? x : copysign(bessel_i_scaled_abs(1, fabs(x)) * h * h, x);
}

C spherical_j0_(C x) {
  if (isnan(x)) return x;
  if (isinf(x)) return (C)0;
  if (fabs(x) < (C)0.5) {
    C y = x * x;
    return (C)1 - y / (C)6 * ((C)1 - y / (C)20 * ((C)1 - y / (C)42 * ((C)1 - y / (C)72 * ((C)1 - y / (C)110 *
           ((C)1 - y / (C)156)))));
  }
  return sin(x) / x;
}
