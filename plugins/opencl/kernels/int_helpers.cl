
C floor_div(C a, C b) { if (b == 0) return 0; C q = a / b; if ((a % b != 0) && ((a < 0) != (b < 0))) --q; return q; }
C py_mod(C a, C b) { if (b == 0) return 0; C r = a % b; if (r != 0 && ((r < 0) != (b < 0))) r += b; return r; }
C ipow(C base, C e) {
  if (e < 0) return base == 1 ? (C)1 : base == (C)-1 ? (C)((e & 1) ? -1 : 1) : (C)0;
  C r = 1;
  while (e) { if (e & 1) r = (C)(r * base); base = (C)(base * base); e >>= 1; }
  return r;
}
