// HAL C++ SDK, kernel helpers: special functions of the op catalog that the
// C++ standard library lacks (digamma, polygamma, Hurwitz zeta, the modified
// Bessel functions I0/I1/K0/K1 and their scaled forms, the regularized incomplete
// gamma functions, erfcx, erfinv, ndtri, the spherical Bessel j0), for
// any plugin to use. Computed in double, to about 1e-15 relative; the
// special points (poles, ±1 of erfinv, 0 and 1 of ndtri, NaN) give PyTorch's
// values. Header-only, pure functions: safe from any thread, no errno.
#ifndef HAL_SDK_KERNEL_SPECIAL_HPP_
#define HAL_SDK_KERNEL_SPECIAL_HPP_

#include <algorithm>
#include <cmath>
#include <limits>

namespace hal::sdk::kernel::special {

inline constexpr double kPi = 3.14159265358979323846;
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ln|Γ(x)|; glibc's lgamma writes the global signgam, lgamma_r does not.
inline double lgamma(double x) {
#if defined(__GLIBC__)
  int sign;
  return ::lgamma_r(x, &sign);
#else
  return std::lgamma(x);
#endif
}

// ψ(x): recurrence up to x >= 10, then the asymptotic series
// ln x - 1/(2x) - Σ B_2k/(2k x^2k); reflection below 0.
inline double digamma(double x) {
  if (std::isnan(x)) return x;
  if (x == 0) return std::copysign(kInf, -x);  // -inf at +0, +inf at -0
  if (x < 0) {
    if (x == std::trunc(x)) return kNaN;
    double r = x - std::trunc(x);  // exact: keeps tan(πx) accurate for large |x|
    return digamma(1 - x) - kPi / std::tan(kPi * r);
  }
  double acc = 0;
  while (x < 10) {
    acc -= 1 / x;
    x += 1;
  }
  double z = 1 / (x * x);
  // B2/2, B4/4, ..., B14/14 (Horner in z).
  double series = z * (1.0 / 12 + z * (-1.0 / 120 + z * (1.0 / 252 + z * (-1.0 / 240 + z * (1.0 / 132 +
                  z * (-691.0 / 32760 + z * (1.0 / 12)))))));
  return acc + std::log(x) - 0.5 / x - series;
}

// ψ'(x): reflection π²/sin²(πx) - ψ'(1-x) below 1/2, recurrence up to
// x >= 20, then 1/x + 1/(2x²) + Σ B_2k/x^(2k+1).
inline double trigamma(double x) {
  if (std::isnan(x)) return x;
  if (x <= 0 && x == std::floor(x)) return kInf;  // the poles (sin(πx) rounds to a tiny non-zero)
  double sign = 1, acc = 0;
  if (x < 0.5) {
    double s = std::sin(kPi * x);
    acc = -(kPi * kPi) / (s * s);  // ±inf at the poles
    sign = -1;
    x = 1 - x;
  }
  while (x < 20) {
    acc += 1 / (x * x);
    x += 1;
  }
  double ix = 1 / x, z = ix * ix;
  double series = ix * (1 + ix * (0.5 + ix * (1.0 / 6 + z * (-1.0 / 30 + z * (1.0 / 42 + z * (-1.0 / 30 +
                  z * (5.0 / 66 + z * (-691.0 / 2730 + z * (7.0 / 6)))))))));
  return sign * (acc + series);
}

// Hurwitz ζ(s, q) = Σ_k (k + q)^-s: direct terms until q + k >= 9 (at least
// nine), then the Euler–Maclaurin tail. s = 1 is +inf, s < 1 NaN; q at a
// pole (0, -1, ...) +inf; q < 0 with non-integer s NaN (as PyTorch).
inline double zeta(double s, double q) {
  if (std::isnan(s) || std::isnan(q)) return kNaN;
  if (s == 1) return kInf;
  if (s < 1) return kNaN;
  if (q <= 0) {
    if (q == std::floor(q)) return kInf;
    if (s != std::floor(s)) return kNaN;
  }
  const double eps = 1.1102230246251565e-16;
  double sum = std::pow(q, -s), a = q, term = 0;
  for (int i = 0; i < 9 || a <= 9.0; ++i) {
    a += 1;
    term = std::pow(a, -s);
    sum += term;
    if (std::fabs(term) < eps * std::fabs(sum)) return sum;
  }
  // Tail from a: ∫ + the half term + Σ B_2j/(2j)! · s(s+1)···(s+2j-2) · a^(-s-2j+1).
  // B_2j/(2j)! for j = 1..12.
  static constexpr double kB2jOverFact[] = {
      1.0 / 12, -1.0 / 720, 1.0 / 30240, -1.0 / 1209600, 1.0 / 47900160, -691.0 / 1307674368000.0,
      7.0 / (6.0 * 87178291200.0), -3617.0 / (510.0 * 20922789888000.0), 43867.0 / (798.0 * 6402373705728000.0),
      -174611.0 / (330.0 * 2432902008176640000.0), 854513.0 / (138.0 * 1124000727777607680000.0),
      -236364091.0 / (2730.0 * 620448401733239439360000.0)};
  sum += term * a / (s - 1) - 0.5 * term;  // the loop added a's term whole; Euler–Maclaurin takes half
  double rising = s, power = term / a;     // s(s+1)···(s+2j-2) and a^(-s-2j+1) for j = 1
  for (int j = 0; j < 12; ++j) {
    double t = kB2jOverFact[j] * rising * power;
    sum += t;
    if (std::fabs(t) < eps * std::fabs(sum)) break;
    rising *= (s + 2 * j + 1) * (s + 2 * j + 2);
    power /= a * a;
  }
  return sum;
}

// ψ⁽ⁿ⁾(x) for n >= 0: digamma, trigamma, else (-1)^(n+1)·n!·ζ(n+1, x)
// (so the poles give +inf for odd n, -inf for even n >= 2, as PyTorch).
inline double polygamma(long n, double x) {
  if (n == 0) return digamma(x);
  if (n == 1) return trigamma(x);
  return ((n % 2) ? 1.0 : -1.0) * std::exp(lgamma(n + 1.0)) * zeta(n + 1.0, x);
}

// e^(-|x|)·I_ν(|x|) for ν = 0, 1: the power series (positive terms, no
// cancellation) up to |x| = 30, the asymptotic series in 1/x beyond.
inline double bessel_i_scaled_abs(int nu, double ax) {
  if (ax <= 30) {
    double y = ax * ax / 4, term = nu == 0 ? 1.0 : ax / 2, sum = term;
    for (int k = 1; k < 500; ++k) {
      term *= y / (k * double(k + nu));
      sum += term;
      if (term < 1e-17 * sum) break;
    }
    return sum * std::exp(-ax);
  }
  double mu = 4.0 * nu * nu, term = 1, sum = 1;
  for (int k = 1; k < 60; ++k) {
    double odd = 2.0 * k - 1;
    term *= -(mu - odd * odd) / (k * 8.0 * ax);
    sum += term;
    if (std::fabs(term) < 1e-17 * std::fabs(sum)) break;
  }
  return sum / std::sqrt(2 * kPi * ax);
}

inline double i0e(double x) { return std::isnan(x) ? x : bessel_i_scaled_abs(0, std::fabs(x)); }
inline double i1e(double x) {
  if (std::isnan(x)) return x;
  return std::copysign(bessel_i_scaled_abs(1, std::fabs(x)), x);
}
inline double i0(double x) {
  double ax = std::fabs(x);
  if (std::isnan(x)) return x;
  if (ax > 713) return kInf;  // beyond double's range (e^x alone overflows at 709.8)
  if (ax > 700) return bessel_i_scaled_abs(0, ax) * std::exp(ax / 2) * std::exp(ax / 2);
  return bessel_i_scaled_abs(0, ax) * std::exp(ax);
}
inline double i1(double x) {
  double ax = std::fabs(x);
  if (std::isnan(x)) return x;
  if (ax > 713) return std::copysign(kInf, x);
  double v = ax > 700 ? bessel_i_scaled_abs(1, ax) * std::exp(ax / 2) * std::exp(ax / 2)
                      : bessel_i_scaled_abs(1, ax) * std::exp(ax);
  return std::copysign(v, x);
}

// erfcx(x) = e^(x²)·erfc(x): directly below 4 (relative error ~16 ulp at
// most), the continued fraction of erfc beyond; x < 0 through
// erfcx(x) = 2e^(x²) - erfcx(-x) (+inf once e^(x²) overflows).
inline double erfcx(double x) {
  if (std::isnan(x)) return x;
  if (x < 0) {
    if (x < -26.7) return kInf;
    return 2 * std::exp(x * x) - erfcx(-x);
  }
  if (x < 4) return std::exp(x * x) * std::erfc(x);
  if (x > 1e8) return 1 / (std::sqrt(kPi) * x);  // the fraction's first term; the rest is below 1e-16
  // erfc(x)·e^(x²)·√π = 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), evaluated from depth 80 up.
  double f = x;
  for (int k = 80; k >= 1; --k) f = x + (k / 2.0) / f;
  return 1 / (std::sqrt(kPi) * f);
}

// x ≥ 0 with erfc(x) = z for z in (0, 1]: Newton on ln erfc(x) - ln z
// (ln erfc is concave, so the steps converge from any start here).
inline double erfcinv_upper(double z) {
  if (z == 1) return 0;
  double lz = std::log(z);
  double x = z > 0.5 ? (1 - z) * 0.886226925452758 : std::sqrt(-lz);  // √π/2·(1-z): erfc's slope at 0
  for (int i = 0; i < 100; ++i) {
    double e = erfcx(x);
    double h = std::log(e) - x * x - lz;    // ln erfc(x) - ln z
    double step = h * std::sqrt(kPi) * e / 2;  // h / (d/dx ln erfc(x)) with the sign folded in
    x += step;
    if (x < 0) x = 0;
    if (std::fabs(step) <= 1e-16 * std::fabs(x) + 1e-300) break;
  }
  return x;
}

// erf(out) = y: ±inf at ±1, NaN outside [-1, 1].
inline double erfinv(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return kNaN;
  double ay = std::fabs(y);
  if (ay == 1) return std::copysign(kInf, y);
  if (ay >= 0.5) return std::copysign(erfcinv_upper(1 - ay), y);  // 1 - |y| is exact here
  // |y| < 1/2: Halley steps on erf(x) - y from erf's slope at 0 (converges in 4).
  double x = y * 0.886226925452758;
  for (int i = 0; i < 8; ++i) {
    double f = std::erf(x) - y;
    double df = 1.1283791670955126 * std::exp(-x * x);
    double step = f / df / (1 + x * f / df);
    x -= step;
    if (std::fabs(step) <= 1e-17 * std::fabs(x)) break;
  }
  return x;
}

// erfc(out) = z: +inf at 0, -inf at 2, NaN outside [0, 2].
inline double erfcinv(double z) {
  if (std::isnan(z) || z < 0 || z > 2) return kNaN;
  if (z == 0) return kInf;
  if (z == 2) return -kInf;
  if (z >= 0.5 && z <= 1.5) return erfinv(1 - z);  // exact difference; Newton on erf is better conditioned here
  return z <= 1 ? erfcinv_upper(z) : -erfcinv_upper(2 - z);  // 2 - z is exact for z in [1, 2]
}

// Φ(out) = p for the standard normal CDF Φ: -inf at 0, +inf at 1, NaN
// outside [0, 1].
inline double ndtri(double p) {
  if (std::isnan(p) || p < 0 || p > 1) return kNaN;
  const double kSqrt2 = 1.4142135623730951;
  if (p >= 0.25 && p <= 0.75) return kSqrt2 * erfinv(2 * p - 1);  // 2p - 1 is exact here
  if (p < 0.5) return -kSqrt2 * erfcinv(2 * p);
  return kSqrt2 * erfcinv(2 * (1 - p));  // 1 - p is exact for p in [1/2, 1]
}

// e^x·K_ν(x) for ν = 0, 1 and x > 0, from K_ν(x) = ∫₀^∞ e^(-x·cosh t)·cosh(νt) dt by the
// trapezoidal rule: the integrand is analytic in a strip around the real axis, so the rule
// converges geometrically; a step of 1/10, and of half the peak's width 1/√x for large x, keeps
// the error below double's precision.
inline double bessel_k_scaled(int nu, double x) {
  const double h = std::min(0.1, 0.5 / std::sqrt(x));
  double sum = 0.5;  // t = 0: e^0·cosh 0, halved
  for (int k = 1; k < 100000; ++k) {
    double t = k * h, e = std::exp(-x * (std::cosh(t) - 1));
    double term = nu == 0 ? e : e * std::cosh(t);
    sum += term;
    if (term < 1e-18 * sum) break;
  }
  return sum * h;
}

// K_ν(x) (ν = 0, 1): +inf at 0, NaN below, 0 at +inf.
inline double bessel_k(int nu, double x, bool scaled) {
  if (std::isnan(x) || x < 0) return kNaN;
  if (x == 0) return kInf;
  if (x == kInf) return 0;
  double v = bessel_k_scaled(nu, x);
  return scaled ? v : v * std::exp(-x);
}

// The regularized lower incomplete gamma P(a, x) and upper Q(a, x) = 1 - P, with PyTorch's
// special values (a or x below 0: NaN; a = 0: P = 1 for x > 0; x = 0: P = 0; a = inf: P = 0
// unless x = inf, NaN; x = inf: P = 1). Series for x < a + 1, Lentz's continued fraction beyond.
inline double incomplete_gamma(double a, double x, bool upper) {
  if (std::isnan(a) || std::isnan(x) || a < 0 || x < 0) return kNaN;
  double p;
  if (a == 0) {
    if (x == 0) return kNaN;
    p = 1;
  } else if (x == 0) {
    p = 0;
  } else if (std::isinf(a)) {
    if (std::isinf(x)) return kNaN;
    p = 0;
  } else if (std::isinf(x)) {
    p = 1;
  } else {
    double log_prefactor = a * std::log(x) - x - lgamma(a);
    if (x < a + 1) {
      double term = 1 / a, sum = term;
      for (int n = 1; n < 100000; ++n) {
        term *= x / (a + n);
        sum += term;
        if (std::fabs(term) < std::fabs(sum) * 1e-17) break;
      }
      p = sum * std::exp(log_prefactor);
    } else {
      const double tiny = 1e-300;
      double b = x + 1 - a, c = 1 / tiny, d = 1 / b, f = d;
      for (int n = 1; n < 100000; ++n) {
        double an = -n * (n - a);
        b += 2;
        d = an * d + b;
        if (std::fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (std::fabs(c) < tiny) c = tiny;
        d = 1 / d;
        double delta = d * c;
        f *= delta;
        if (std::fabs(delta - 1) < 1e-16) break;
      }
      double q = std::exp(log_prefactor) * f;
      return upper ? q : 1 - q;
    }
  }
  return upper ? 1 - p : p;
}

// sin(x)/x, 1 at 0 (its series below 1/2 keeps full precision), 0 at ±inf.
inline double spherical_bessel_j0(double x) {
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return 0;
  if (std::fabs(x) < 0.5) {
    double y = x * x;
    return 1 - y / 6 * (1 - y / 20 * (1 - y / 42 * (1 - y / 72 * (1 - y / 110 * (1 - y / 156)))));
  }
  return std::sin(x) / x;
}

}  // namespace hal::sdk::kernel::special

#endif  // HAL_SDK_KERNEL_SPECIAL_HPP_
