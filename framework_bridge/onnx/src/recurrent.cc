// RNN, GRU and LSTM (7..22), unrolled over the sequence (its length known at
// load): the input projection of the whole sequence is one matmul per
// direction; each step is one matmul of the hidden state and the cell. With
// the default activations and no clip, peepholes or coupled gates, an LSTM
// step is the catalog's lstm_cell and a GRU with linear_before_reset its
// gru_cell (the ops the PyTorch bridge's RNNs run; ONNX's gate order iofc /
// zrh is permuted once into PyTorch's ifgo / rzn); otherwise the step is
// composed from the equations of the operator's definition. sequence_lens
// (known at load or bound per run) masks each batch entry's steps past its
// length: its state stops there and Y is zero there; a reverse direction
// runs every sequence reversed within its own length.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "converters.hpp"
#include "hal/common/dtype.hpp"
#include "tensor_proto.hpp"

namespace hal::onnx::detail {

namespace {

using V = Graph::Value;

enum class Cell { kRnn, kGru, kLstm };

struct RnnSpec {
  Cell cell = Cell::kRnn;
  int64_t gates = 1;  // 1, 3 or 4 blocks of H rows in W and R
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool layout1 = false;
  std::vector<std::string> activations;  // per direction: f, g(, h)
  double clip = 0;                        // 0: none
  std::vector<int64_t> lens;              // per batch entry; empty: every step of every entry
};

// ONNX's activations for RNNs that take no alpha/beta.
V activate(Translator& t, const std::string& name, V x, double clip) {
  if (clip > 0) {
    const hal_dtype_e dt = t.spec(x).dtype;
    x = t.emit1("clamp", {x, scalar(t, dt, -clip), scalar(t, dt, clip)});
  }
  if (name == "Sigmoid") return t.emit1("sigmoid", {x});
  if (name == "Tanh") return t.emit1("tanh", {x});
  if (name == "Relu") return t.emit1("relu", {x});
  const hal_dtype_e dt = t.spec(x).dtype;
  if (name == "Softsign") return t.emit1("div", {x, t.emit1("add", {t.emit1("abs", {x}), scalar(t, dt, 1)})});
  if (name == "Softplus") return t.emit1("log1p", {t.emit1("exp", {x})});
  t.unimplemented("activation " + name + " (Sigmoid, Tanh, Relu, Softsign, Softplus)");
}

RnnSpec rnn_spec(Translator& t, Cell cell) {
  RnnSpec s;
  s.cell = cell;
  s.gates = cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 3 : 4;
  const std::string direction = t.attr_string("direction", "forward");
  if (direction == "bidirectional") s.dirs = 2;
  else if (direction != "forward" && direction != "reverse")
    t.invalid("direction '" + direction + "' (forward, reverse or bidirectional)");
  s.layout1 = t.attr_int("layout", 0) != 0;
  const std::vector<int64_t>& x = t.in(0).spec.shape;
  const std::vector<int64_t>& w = t.in(1).spec.shape;
  const std::vector<int64_t>& r = t.in(2).spec.shape;
  if (x.size() != 3) t.invalid("X has rank " + std::to_string(x.size()) + " (3: sequence, batch, input)");
  s.seq = s.layout1 ? x[1] : x[0];
  s.batch = s.layout1 ? x[0] : x[1];
  s.input = x[2];
  if (s.seq < 0) t.unimplemented("a sequence length only known at run time (the recurrence is unrolled)");
  if (r.size() != 3) t.invalid("R has rank " + std::to_string(r.size()) + " (3)");
  s.hidden = t.attr_int("hidden_size", r[2]);
  const int64_t gh = s.gates * s.hidden;
  if (w != std::vector<int64_t>{s.dirs, gh, s.input})
    t.invalid("W has shape " + shape_text(w) + "; expected " + shape_text({s.dirs, gh, s.input}));
  if (r != std::vector<int64_t>{s.dirs, gh, s.hidden})
    t.invalid("R has shape " + shape_text(r) + "; expected " + shape_text({s.dirs, gh, s.hidden}));
  if (t.has_input(3) && t.in(3).spec.shape != std::vector<int64_t>{s.dirs, 2 * gh})
    t.invalid("B has shape " + shape_text(t.in(3).spec.shape) + "; expected " + shape_text({s.dirs, 2 * gh}));
  if (t.attr("activation_alpha") || t.attr("activation_beta"))
    t.unimplemented("activation_alpha / activation_beta (activations without parameters only)");
  std::vector<std::string> acts;
  if (const auto* a = t.attr("activations"))
    for (const std::string& name : a->strings()) acts.push_back(name);
  const size_t per_dir = cell == Cell::kLstm ? 3 : cell == Cell::kGru ? 2 : 1;
  if (acts.empty()) {
    for (int64_t d = 0; d < s.dirs; ++d) {
      if (cell == Cell::kRnn) acts.push_back("Tanh");
      else acts.insert(acts.end(), {"Sigmoid", "Tanh"});
      if (cell == Cell::kLstm) acts.push_back("Tanh");
    }
  }
  if (acts.size() != per_dir * static_cast<size_t>(s.dirs))
    t.invalid("activations lists " + std::to_string(acts.size()) + " functions; " + std::to_string(per_dir * s.dirs) +
              " expected (" + std::to_string(per_dir) + " per direction)");
  s.activations = acts;
  s.clip = t.attr_float("clip", 0.0f);
  if (t.attr("clip") && s.clip <= 0) t.invalid("clip " + std::to_string(s.clip) + " is not positive");
  if (t.has_input(4)) {
    const std::vector<int64_t> lens = t.const_ints(4, "sequence_lens");
    if (s.batch < 0) t.unimplemented("sequence_lens with a batch size only known at run time");
    if (static_cast<int64_t>(lens.size()) != s.batch)
      t.invalid("sequence_lens has " + std::to_string(lens.size()) + " entries for a batch of " + std::to_string(s.batch));
    bool all_full = true;
    for (int64_t d : lens) {
      if (d < 0 || d > s.seq)
        t.invalid("sequence_lens holds " + std::to_string(d) + ", outside [0, " + std::to_string(s.seq) + "]");
      s.lens.push_back(d);
      all_full = all_full && d == s.seq;
    }
    if (all_full) s.lens.clear();
  }
  return s;
}

// Rows of a [G*H, ...] value (or a [G*H] vector) reordered block-wise: block
// ORDER[k] of the source becomes block k.
V reorder_blocks(Translator& t, V v, const std::vector<int64_t>& order, int64_t hidden) {
  std::vector<int64_t> idx;
  for (int64_t b : order)
    for (int64_t i = 0; i < hidden; ++i) idx.push_back(b * hidden + i);
  V index = t.constant(int_tensor(HAL_DTYPE_INT64, idx, {static_cast<int64_t>(idx.size())}));
  return t.emit1("index_select", {v, index}, {Attr::i("dim", 0)});
}

// The per-entry reversal within each sequence's length on [S, B, ...]:
// entry (s, b) <- (len_b - 1 - s, b) for s < len_b, itself past it (an
// involution, so it also maps the results back). Without lengths: a flip.
V reverse_sequences(Translator& t, V v, const RnnSpec& s) {
  if (s.lens.empty()) return t.emit1("flip", {v}, {Attr::ints("dims", {0})});
  std::vector<int64_t> shape = t.spec(v).shape, flat_shape = shape;
  flat_shape[1] = s.seq * s.batch;
  flat_shape.erase(flat_shape.begin());
  std::vector<int64_t> idx;
  for (int64_t step = 0; step < s.seq; ++step)
    for (int64_t b = 0; b < s.batch; ++b) {
      const int64_t len = s.lens[static_cast<size_t>(b)];
      idx.push_back((step < len ? len - 1 - step : step) * s.batch + b);
    }
  V index = t.constant(int_tensor(HAL_DTYPE_INT64, idx, {static_cast<int64_t>(idx.size())}));
  V flat = reshape_to(t, v, flat_shape);
  return reshape_to(t, t.emit1("index_select", {flat, index}, {Attr::i("dim", 0)}), shape);
}

// Initial state input I ([D, B, H]; layout 1: [B, D, H]) for direction D, or zeros.
V initial_state(Translator& t, size_t i, const RnnSpec& s, int64_t d, hal_dtype_e dt) {
  if (!t.has_input(i)) return t.emit_as("fill", {}, {Attr::scalar("value", 0.0)}, {dt, {s.batch, s.hidden}});
  V v = t.value(i);
  const std::vector<int64_t> want = s.layout1 ? std::vector<int64_t>{s.batch, s.dirs, s.hidden}
                                              : std::vector<int64_t>{s.dirs, s.batch, s.hidden};
  if (t.spec(v).shape != want)
    t.invalid(std::string(i == 5 ? "initial_h" : "initial_c") + " has shape " + shape_text(t.spec(v).shape) +
              "; expected " + shape_text(want));
  if (s.layout1) v = permuted(t, v, {1, 0, 2});
  return take(t, v, 0, d);
}

// GATES's block K of H columns ([B, G*H] -> [B, H]).
std::vector<V> split_gates(Translator& t, V gates, const RnnSpec& s) {
  return t.emit("split", {gates}, {Attr::i("dim", 1), Attr::i("split_size", s.hidden)}, static_cast<size_t>(s.gates));
}

void recurrent(Translator& t, Cell cell) {
  const RnnSpec s = rnn_spec(t, cell);
  const hal_dtype_e dt = t.in(0).spec.dtype;
  if (!is_float(dt)) t.invalid("X of dtype " + std::string(common::dtype_name(dt)) + " (a floating dtype)");
  const int64_t gh = s.gates * s.hidden;
  const bool linear_before_reset = cell == Cell::kGru && t.attr_int("linear_before_reset", 0) != 0;
  const bool input_forget = cell == Cell::kLstm && t.attr_int("input_forget", 0) != 0;
  const bool peepholes = cell == Cell::kLstm && t.has_input(7);
  if (peepholes && t.in(7).spec.shape != std::vector<int64_t>{s.dirs, 3 * s.hidden})
    t.invalid("P has shape " + shape_text(t.in(7).spec.shape) + "; expected " + shape_text({s.dirs, 3 * s.hidden}));
  V x = t.value(0);
  if (s.layout1) x = permuted(t, x, {1, 0, 2});  // [S, B, I]
  const std::string direction = t.attr_string("direction", "forward");
  std::vector<V> ys, hs, cs;
  for (int64_t d = 0; d < s.dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const size_t a0 = static_cast<size_t>(d) * (cell == Cell::kLstm ? 3 : cell == Cell::kGru ? 2 : 1);
    const std::string& f = s.activations[a0];
    const std::string g = cell == Cell::kRnn ? "" : s.activations[a0 + 1];
    const std::string h = cell == Cell::kLstm ? s.activations[a0 + 2] : "";
    const bool fused = s.clip == 0 && !input_forget && !peepholes && f == "Sigmoid" && g == "Tanh" &&
                       (cell == Cell::kLstm ? h == "Tanh" : cell == Cell::kGru && linear_before_reset);
    // PyTorch's gate order for the fused cells: LSTM iofc -> ifco, GRU zrh -> rzh.
    const std::vector<int64_t> order = !fused ? std::vector<int64_t>{}
                                       : cell == Cell::kLstm ? std::vector<int64_t>{0, 2, 3, 1}
                                                             : std::vector<int64_t>{1, 0, 2};
    V w = take(t, t.value(1), 0, d), r = take(t, t.value(2), 0, d);
    V wb, rb;
    if (t.has_input(3)) {
      std::vector<V> halves = t.emit("split", {take(t, t.value(3), 0, d)},
                                     {Attr::i("dim", 0), Attr::i("split_size", gh)}, 2);
      wb = halves[0];
      rb = halves[1];
    }
    if (!order.empty()) {
      w = reorder_blocks(t, w, order, s.hidden);
      r = reorder_blocks(t, r, order, s.hidden);
      if (wb.valid()) wb = reorder_blocks(t, wb, order, s.hidden);
      if (rb.valid()) rb = reorder_blocks(t, rb, order, s.hidden);
    }
    V xd = reverse ? reverse_sequences(t, x, s) : x;
    V xw = t.emit1("matmul", {xd, transpose2d(t, w)});  // [S, B, G*H]
    if (wb.valid() && !fused) xw = t.emit1("add", {xw, wb});
    std::vector<V> steps = t.emit("split", {xw}, {Attr::i("dim", 0), Attr::i("split_size", 1)}, static_cast<size_t>(s.seq));
    // A GRU without linear_before_reset multiplies r * h by the h block of R
    // on its own: the step's state product takes only the z and r blocks.
    const bool split_r = cell == Cell::kGru && !fused && !linear_before_reset;
    V rt = transpose2d(t, split_r ? reorder_blocks(t, r, {0, 1}, s.hidden) : r);
    V rh_t = split_r ? transpose2d(t, reorder_blocks(t, r, {2}, s.hidden)) : V{};
    std::vector<V> peep;
    if (peepholes)
      peep = t.emit("split", {take(t, t.value(7), 0, d)}, {Attr::i("dim", 0), Attr::i("split_size", s.hidden)}, 3);
    V hstate = initial_state(t, 5, s, d, dt);
    V cstate = cell == Cell::kLstm ? initial_state(t, 6, s, d, dt) : V{};
    std::vector<V> outs;
    for (int64_t k = 0; k < s.seq; ++k) {
      V xg = reshape_to(t, steps[static_cast<size_t>(k)], {s.batch, gh});
      V hr = t.emit1("matmul", {hstate, rt});
      V hnew, cnew;
      if (fused && cell == Cell::kLstm) {
        std::vector<V> o = t.emit("lstm_cell", {xg, hr, cstate, wb, rb}, {}, 3);
        hnew = o[0];
        cnew = o[1];
      } else if (fused) {
        hnew = t.emit("gru_cell", {xg, hr, hstate, wb, rb}, {}, 2)[0];
      } else if (cell == Cell::kRnn) {
        V pre = t.emit1("add", {xg, hr});
        if (rb.valid()) pre = t.emit1("add", {pre, rb});
        hnew = activate(t, f, pre, s.clip);
      } else if (cell == Cell::kGru) {
        std::vector<V> xs = split_gates(t, xg, s);  // z, r, h (input projection + Wb)
        std::vector<V> rbs;
        if (rb.valid()) rbs = t.emit("split", {rb}, {Attr::i("dim", 0), Attr::i("split_size", s.hidden)}, 3);
        std::vector<V> hrs = t.emit("split", {hr}, {Attr::i("dim", 1), Attr::i("split_size", s.hidden)}, split_r ? 2 : 3);
        auto plus_rb = [&](V v, size_t k2) { return rbs.empty() ? v : t.emit1("add", {v, rbs[k2]}); };
        V z = activate(t, f, t.emit1("add", {xs[0], plus_rb(hrs[0], 0)}), s.clip);
        V rg = activate(t, f, t.emit1("add", {xs[1], plus_rb(hrs[1], 1)}), s.clip);
        V cand;
        if (linear_before_reset) {
          cand = t.emit1("add", {xs[2], t.emit1("mul", {rg, plus_rb(hrs[2], 2)})});
        } else {
          V rh = t.emit1("mul", {rg, hstate});
          V rh_r = t.emit1("matmul", {rh, rh_t});
          cand = t.emit1("add", {xs[2], plus_rb(rh_r, 2)});
        }
        V n = activate(t, g, cand, s.clip);
        // (1 - z) * n + z * h = n + z * (h - n)
        hnew = t.emit1("add", {n, t.emit1("mul", {z, t.emit1("sub", {hstate, n})})});
      } else {
        V pre = t.emit1("add", {xg, hr});
        if (rb.valid()) pre = t.emit1("add", {pre, rb});
        std::vector<V> gs = split_gates(t, pre, s);  // i, o, f, c
        if (peepholes) {
          gs[0] = t.emit1("add", {gs[0], t.emit1("mul", {peep[0], cstate})});
          gs[2] = t.emit1("add", {gs[2], t.emit1("mul", {peep[2], cstate})});
        }
        V i = activate(t, f, gs[0], s.clip);
        V fg = input_forget ? t.emit1("sub", {scalar(t, dt, 1), i}) : activate(t, f, gs[2], s.clip);
        V c = activate(t, g, gs[3], s.clip);
        cnew = t.emit1("add", {t.emit1("mul", {fg, cstate}), t.emit1("mul", {i, c})});
        V og = gs[1];
        if (peepholes) og = t.emit1("add", {og, t.emit1("mul", {peep[1], cnew})});
        hnew = t.emit1("mul", {activate(t, f, og, s.clip), activate(t, h, cnew, 0)});
      }
      if (s.lens.empty()) {
        hstate = hnew;
        if (cnew.valid()) cstate = cnew;
        outs.push_back(hnew);
        continue;
      }
      std::vector<uint8_t> live(static_cast<size_t>(s.batch));
      for (int64_t b = 0; b < s.batch; ++b) live[static_cast<size_t>(b)] = k < s.lens[static_cast<size_t>(b)];
      HostTensor mask_host{HAL_DTYPE_BOOL, {s.batch, 1}, live};
      V mask = t.constant(mask_host);
      hstate = t.emit1("where", {mask, hnew, hstate});
      if (cnew.valid()) cstate = t.emit1("where", {mask, cnew, cstate});
      outs.push_back(t.emit1("where", {mask, hnew, scalar(t, dt, 0)}));
    }
    V y = s.seq == 0 ? t.emit_as("fill", {}, {Attr::scalar("value", 0.0)}, {dt, {0, s.batch, s.hidden}})
                     : t.emit1("stack", outs, {Attr::i("dim", 0)});  // [S, B, H]
    if (reverse && s.seq > 0) y = reverse_sequences(t, y, s);
    ys.push_back(y);
    hs.push_back(hstate);
    if (cstate.valid()) cs.push_back(cstate);
  }
  V y = t.emit1("stack", ys, {Attr::i("dim", 1)});  // [S, D, B, H]
  V yh = t.emit1("stack", hs, {Attr::i("dim", 0)});  // [D, B, H]
  if (s.layout1) {
    y = permuted(t, y, {2, 0, 1, 3});
    yh = permuted(t, yh, {1, 0, 2});
  }
  t.set_output(0, y);
  t.set_output(1, yh);
  if (cell == Cell::kLstm) {
    V yc = t.emit1("stack", cs, {Attr::i("dim", 0)});
    t.set_output(2, s.layout1 ? permuted(t, yc, {1, 0, 2}) : yc);
  }
}

void rnn(Translator& t, const OpRule&) { recurrent(t, Cell::kRnn); }
void gru(Translator& t, const OpRule&) { recurrent(t, Cell::kGru); }
void lstm(Translator& t, const OpRule&) { recurrent(t, Cell::kLstm); }

}  // namespace

const std::vector<OpRule>& recurrent_rows() {
  static const std::vector<OpRule> rows = {
      {"RNN", 7, 22, "matmul+split+add+tanh|sigmoid|relu+where+stack", rnn,
       "sequence length known at load; activations without alpha/beta"},
      {"GRU", 7, 22, "matmul+split+gru_cell|sigmoid+tanh+mul+add+where+stack", gru,
       "sequence length known at load; activations without alpha/beta"},
      {"LSTM", 7, 22, "matmul+split+lstm_cell|sigmoid+tanh+mul+add+where+stack", lstm,
       "sequence length known at load; activations without alpha/beta"},
  };
  return rows;
}

}  // namespace hal::onnx::detail
