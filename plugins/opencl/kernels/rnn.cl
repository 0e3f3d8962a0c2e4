// The "rnn" group's kernels (ops/rnn.cc): LSTM / GRU cells, formulas and
// workspace layouts as sdk/catalog/ops/rnn.toml. Prepended: T, A
// (nn::row_prelude). One item per (row, hidden unit); operands dense
// row-major; an absent optional operand has offset -1.

A rnn_sigmoid(A x) { return (A)1 / ((A)1 + exp(-x)); }

__kernel void rnn_lstm_cell(__global const T* ig, long igo, __global const T* hg, long hgo, __global const T* cx,
                            long cxo, __global const T* ib, long ibo, __global const T* hb, long hbo, __global T* hy,
                            long hyo, __global T* cy, long cyo, __global T* ws, long wso, long B, long H) {
  long id = get_global_id(0);
  if (id >= B * H) return;
  long r = id / H, j = id % H;
  A g[4];
  for (int k = 0; k < 4; ++k) {
    long e = r * 4 * H + k * H + j;
    g[k] = (A)ig[igo + e] + (A)hg[hgo + e];
    if (ibo >= 0) g[k] += (A)ib[ibo + k * H + j] + (A)hb[hbo + k * H + j];
  }
  A i = rnn_sigmoid(g[0]), f = rnn_sigmoid(g[1]), c = tanh(g[2]), o = rnn_sigmoid(g[3]);
  A cn = f * (A)cx[cxo + id] + i * c;
  cy[cyo + id] = (T)cn;
  hy[hyo + id] = (T)(o * tanh(cn));
  long w = wso + r * 4 * H + j;
  ws[w] = (T)i;
  ws[w + H] = (T)f;
  ws[w + 2 * H] = (T)c;
  ws[w + 3 * H] = (T)o;
}

__kernel void rnn_lstm_cell_backward(__global const T* cx, long cxo, __global const T* cy, long cyo,
                                     __global const T* ws, long wso, __global const T* ghy, long ghyo,
                                     __global const T* gcy, long gcyo, __global T* gg, long ggo, __global T* gcx,
                                     long gcxo, long B, long H) {
  long id = get_global_id(0);
  if (id >= B * H) return;
  long r = id / H, j = id % H;
  long w = wso + r * 4 * H + j;
  A i = (A)ws[w], f = (A)ws[w + H], c = (A)ws[w + 2 * H], o = (A)ws[w + 3 * H];
  A dh = ghyo >= 0 ? (A)ghy[ghyo + id] : (A)0;
  A t = tanh((A)cy[cyo + id]);
  A dc = dh * o * ((A)1 - t * t) + (gcyo >= 0 ? (A)gcy[gcyo + id] : (A)0);
  long d = ggo + r * 4 * H + j;
  gg[d] = (T)(dc * c * i * ((A)1 - i));
  gg[d + H] = (T)(dc * (A)cx[cxo + id] * f * ((A)1 - f));
  gg[d + 2 * H] = (T)(dc * i * ((A)1 - c * c));
  gg[d + 3 * H] = (T)(dh * t * o * ((A)1 - o));
  gcx[gcxo + id] = (T)(dc * f);
}

__kernel void rnn_gru_cell(__global const T* ig, long igo, __global const T* hg, long hgo, __global const T* hx,
                           long hxo, __global const T* ib, long ibo, __global const T* hb, long hbo, __global T* hy,
                           long hyo, __global T* ws, long wso, long B, long H) {
  long id = get_global_id(0);
  if (id >= B * H) return;
  long r = id / H, j = id % H;
  A xi[3], xh[3];
  for (int k = 0; k < 3; ++k) {
    long e = r * 3 * H + k * H + j;
    xi[k] = (A)ig[igo + e] + (ibo >= 0 ? (A)ib[ibo + k * H + j] : (A)0);
    xh[k] = (A)hg[hgo + e] + (hbo >= 0 ? (A)hb[hbo + k * H + j] : (A)0);
  }
  A rg = rnn_sigmoid(xi[0] + xh[0]), z = rnn_sigmoid(xi[1] + xh[1]);
  A n = tanh(xi[2] + rg * xh[2]);
  A hp = (A)hx[hxo + id];
  hy[hyo + id] = (T)(((A)1 - z) * n + z * hp);
  long w = wso + r * 5 * H + j;
  ws[w] = (T)rg;
  ws[w + H] = (T)z;
  ws[w + 2 * H] = (T)n;
  ws[w + 3 * H] = (T)xh[2];
  ws[w + 4 * H] = (T)hp;
}

__kernel void rnn_gru_cell_backward(__global const T* ghy, long ghyo, __global const T* ws, long wso,
                                    __global T* gi, long gio, __global T* gh, long gho, __global T* ghx, long ghxo,
                                    long B, long H) {
  long id = get_global_id(0);
  if (id >= B * H) return;
  long r = id / H, j = id % H;
  long w = wso + r * 5 * H + j;
  A rg = (A)ws[w], z = (A)ws[w + H], n = (A)ws[w + 2 * H], hn = (A)ws[w + 3 * H], hp = (A)ws[w + 4 * H];
  A go = (A)ghy[ghyo + id];
  A dn = go * ((A)1 - z) * ((A)1 - n * n);
  A dz = go * (hp - n) * z * ((A)1 - z);
  A dr = dn * hn * rg * ((A)1 - rg);
  long d = r * 3 * H + j;
  gi[gio + d] = (T)dr;
  gi[gio + d + H] = (T)dz;
  gi[gio + d + 2 * H] = (T)dn;
  gh[gho + d] = (T)dr;
  gh[gho + d + H] = (T)dz;
  gh[gho + d + 2 * H] = (T)(dn * rg);
  ghx[ghxo + id] = (T)(go * z);
}
