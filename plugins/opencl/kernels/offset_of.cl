
long offset_of(long flat, int rank, dims_t shape, dims_t st) {
  long o = 0;
  for (int d = rank - 1; d >= 0; --d) { o += (flat % shape.v[d]) * st.v[d]; flat /= shape.v[d]; }
  return o;
}
