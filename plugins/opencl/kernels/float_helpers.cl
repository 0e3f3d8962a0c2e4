
C py_fmod(C a, C b) { C r = fmod(a, b); if (r != (C)0 && ((r < (C)0) != (b < (C)0))) r += b; return r; }
C lerp_(C a, C b, C w) { return w < (C)0.5 ? a + w * (b - a) : b - (b - a) * ((C)1 - w); }
