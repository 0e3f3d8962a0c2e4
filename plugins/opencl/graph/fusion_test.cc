// The OpenCL graph compiler: elementwise chains (with a trailing reduction)
// fused into one kernel give what the same ops give launched one by one, on
// the OpenCL device and on the CPU plugin.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hal/runtime/graph.hpp"
#include "hal/runtime/runtime.hpp"
#include "hal/sdk/op_schema.hpp"
#include "hal/testing/test_util.hpp"

namespace {

using hal::Attr;
using hal::Graph;
using hal::TensorView;

std::shared_ptr<hal::Runtime> runtime() {
  static std::shared_ptr<hal::Runtime> rt = hal::testing::load_only({HAL_TEST_OPENCL_PLUGIN, HAL_TEST_CPU_PLUGIN});
  return rt;
}
std::shared_ptr<hal::Device> opencl() { return runtime()->device("opencl:0"); }
std::shared_ptr<hal::Device> cpu() { return runtime()->device("cpu:0"); }

std::vector<float> data(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) * 4.0f - 2.0f;
  }
  return v;
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// A device tensor holding host data.
struct DTensor {
  hal::Buffer buffer;
  TensorView view;
  DTensor(hal::Device& d, hal_dtype_e dtype, std::vector<int64_t> shape, const void* host = nullptr)
      : buffer(d.allocate(std::max<uint64_t>(1, static_cast<uint64_t>(numel(shape)) * hal::sdk::dtype_size(dtype)))) {
    if (host) buffer.copy_from_host(host, static_cast<uint64_t>(numel(shape)) * hal::sdk::dtype_size(dtype));
    view = TensorView(buffer, dtype, std::move(shape));
  }
  template <class T>
  std::vector<T> read() {
    std::vector<T> v(static_cast<size_t>(view.numel()));
    buffer.copy_to_host(v.data(), v.size() * sizeof(T));
    return v;
  }
};

// Runs GRAPH's nodes one by one through OpRunner on DEVICE (INPUTS: host
// data per graph input); returns every value's data as float. A node the
// device does not implement runs on HOST_FALLBACK's device when given.
std::map<uint32_t, std::vector<float>> op_by_op(const Graph& g, std::shared_ptr<hal::Device> device,
                                                const std::vector<const void*>& inputs,
                                                std::shared_ptr<hal::Device> fallback = nullptr) {
  std::map<uint32_t, std::unique_ptr<DTensor>> t;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const hal::ValueSpec& v = g.values()[g.inputs()[i]];
    t[g.inputs()[i]] = std::make_unique<DTensor>(*device, v.dtype, v.shape, inputs[i]);
  }
  for (const Graph::Node& n : g.nodes()) {
    std::shared_ptr<hal::Device> dev = device;
    try {
      hal::OpRunner probe(device, n.op);
    } catch (const hal::Error&) {
      REQUIRE(fallback != nullptr);
      dev = fallback;
    }
    hal::OpRunner runner(dev, n.op);
    std::vector<std::unique_ptr<DTensor>> moved_in;
    std::vector<const TensorView*> in, out;
    for (uint32_t v : n.inputs) {
      if (dev != device) {  // copy through the host
        const hal::ValueSpec& s = g.values()[v];
        std::vector<char> bytes(static_cast<size_t>(numel(s.shape)) * hal::sdk::dtype_size(s.dtype));
        t[v]->buffer.copy_to_host(bytes.data(), bytes.size());
        moved_in.push_back(std::make_unique<DTensor>(*dev, s.dtype, s.shape, bytes.data()));
        in.push_back(&moved_in.back()->view);
      } else {
        in.push_back(&t[v]->view);
      }
    }
    for (uint32_t v : n.outputs) {
      const hal::ValueSpec& s = g.values()[v];
      t[v] = std::make_unique<DTensor>(*dev, s.dtype, s.shape);
      out.push_back(&t[v]->view);
    }
    runner.launch(in, out, n.attrs);
    if (dev != device)
      for (uint32_t v : n.outputs) {
        const hal::ValueSpec& s = g.values()[v];
        std::vector<char> bytes(static_cast<size_t>(numel(s.shape)) * hal::sdk::dtype_size(s.dtype));
        t[v]->buffer.copy_to_host(bytes.data(), bytes.size());
        t[v] = std::make_unique<DTensor>(*device, s.dtype, s.shape, bytes.data());
      }
  }
  std::map<uint32_t, std::vector<float>> result;
  for (auto& [id, tensor] : t) {
    const hal::ValueSpec& s = g.values()[id];
    std::vector<float> f;
    if (s.dtype == HAL_DTYPE_FLOAT32) f = tensor->read<float>();
    else if (s.dtype == HAL_DTYPE_INT32)
      for (int32_t x : tensor->read<int32_t>()) f.push_back(static_cast<float>(x));
    result[id] = f;
  }
  return result;
}

// Compiles G on the OpenCL device and runs it; returns the outputs (float32).
std::vector<std::vector<float>> run_compiled(const hal::CompiledGraph& c, const Graph& g,
                                             const std::vector<const void*>& inputs) {
  hal::Device& d = c.device();
  std::vector<std::unique_ptr<DTensor>> ins, outs;
  std::vector<const TensorView*> in, out;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const hal::ValueSpec& v = g.values()[g.inputs()[i]];
    ins.push_back(std::make_unique<DTensor>(d, v.dtype, v.shape, inputs[i]));
    in.push_back(&ins.back()->view);
  }
  for (uint32_t id : g.outputs()) {
    const hal::ValueSpec& v = g.values()[id];
    outs.push_back(std::make_unique<DTensor>(d, v.dtype, v.shape));
    out.push_back(&outs.back()->view);
  }
  c.run(in, out);
  std::vector<std::vector<float>> result;
  for (auto& o : outs) result.push_back(o->read<float>());
  return result;
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && !(std::isnan(got[i]) && std::isnan(want[i])) &&  // equal infinities, both NaN
        !(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      if (bad++ < 5) INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
      CHECK(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]));
    }
  CHECK(bad == 0);
}

// y = gelu(x * w + b) * scale; outputs: sum(y) (and y when WITH_Y).
struct Chain {
  Graph g;
  Graph::Value x, w, b, scale, y, s;
  std::vector<float> xd = data(64 * 256, 1), wd = data(256, 2), bd = data(256, 3), sd = {0.75f};
  explicit Chain(bool with_y, const std::vector<int64_t>& x_shape = {64, 256}) {
    const hal_dtype_e f = HAL_DTYPE_FLOAT32;
    x = g.input(f, x_shape);
    w = g.input(f, {256});
    b = g.input(f, {256});
    scale = g.input(f, {});
    auto t1 = g.add_op("mul", {x, w}, {f, x_shape});
    auto t2 = g.add_op("add", {t1, b}, {f, x_shape});
    auto t3 = g.add_op("gelu", {t2}, {f, x_shape});
    y = g.add_op("mul", {t3, scale}, {f, x_shape});
    s = g.add_op("sum", {y}, {f, {}});
    if (with_y) g.mark_output(y);
    g.mark_output(s);
  }
  std::vector<const void*> inputs() const { return {xd.data(), wd.data(), bd.data(), sd.data()}; }
};

}  // namespace

TEST_CASE("opencl graph: gelu(x * w + b) * scale -> sum is one kernel, as op by op on OpenCL and the CPU") {
  Chain c(false);
  hal::CompiledGraph compiled = hal::compile(*opencl(), c.g);
  CHECK(compiled.stats().groups == 1);
  CHECK(compiled.stats().kernel_count == 1);
  CHECK(compiled.stats().op_nodes == 0);
  REQUIRE(compiled.stats().descriptions.size() == 1);
  CHECK(compiled.stats().descriptions[0] == "fused: mul, add, gelu, mul -> sum (1 kernel)");
  std::vector<float> got = run_compiled(compiled, c.g, c.inputs()).at(0);
  auto on_cl = op_by_op(c.g, opencl(), c.inputs(), cpu());  // sum on the CPU if OpenCL has none yet
  auto on_cpu = op_by_op(c.g, cpu(), c.inputs());
  check_close(got, on_cl.at(c.s.id), 1e-5, 1e-3);
  check_close(got, on_cpu.at(c.s.id), 1e-5, 1e-3);
  // Run again: the same executable, the same result.
  check_close(run_compiled(compiled, c.g, c.inputs()).at(0), got, 0, 0);
}

TEST_CASE("opencl graph: an intermediate read outside the group is written - reductions over some dims") {
  const hal_dtype_e f = HAL_DTYPE_FLOAT32;
  for (const char* op : {"sum", "mean", "amax", "amin"})
    for (std::vector<int64_t> dims : {std::vector<int64_t>{0}, {1}, {-1, 0}})
      for (bool keep : {false, true}) {
        CAPTURE(op);
        CAPTURE(dims.size());
        CAPTURE(keep);
        Graph g;
        auto x = g.input(f, {-1, 300});  // symbolic rows
        auto w = g.input(f, {300});
        auto t = g.add_op("sub", {x, w}, {f, {-1, 300}}, {Attr::scalar("alpha", 0.5)});
        auto y = g.add_op("tanh", {t}, {f, {-1, 300}});
        std::vector<int64_t> out_shape;
        std::vector<int64_t> full = {-1, 300};
        for (int d = 0; d < 2; ++d) {
          bool reduced = false;
          for (int64_t r : dims) reduced = reduced || (r < 0 ? r + 2 : r) == d;
          if (!reduced) out_shape.push_back(full[d]);
          else if (keep) out_shape.push_back(1);
        }
        auto r = g.add_op(op, {y}, {f, out_shape}, {Attr::ints("dim", dims), Attr::b("keepdim", keep)});
        g.mark_output(y);
        g.mark_output(r);
        hal::CompiledGraph compiled = hal::compile(*opencl(), g);
        CHECK(compiled.stats().groups == 1);
        CHECK(compiled.stats().kernel_count == 1);
        CHECK(compiled.stats().op_nodes == 0);
        // Bind the symbol: 700 rows (concrete shapes for the references).
        Graph concrete;
        auto cx = concrete.input(f, {700, 300});
        auto cw = concrete.input(f, {300});
        auto ct = concrete.add_op("sub", {cx, cw}, {f, {700, 300}}, {Attr::scalar("alpha", 0.5)});
        auto cy = concrete.add_op("tanh", {ct}, {f, {700, 300}});
        for (int64_t& d : out_shape)
          if (d < 0) d = 700;
        auto cr = concrete.add_op(op, {cy}, {f, out_shape}, {Attr::ints("dim", dims), Attr::b("keepdim", keep)});
        std::vector<float> xd = data(700 * 300, 7), wd = data(300, 8);
        hal::Device& d = *opencl();
        DTensor tx(d, f, {700, 300}, xd.data()), tw(d, f, {300}, wd.data()), ty(d, f, {700, 300}),
            tr(d, f, out_shape);
        compiled.run({&tx.view, &tw.view}, {&ty.view, &tr.view});
        auto want = op_by_op(concrete, cpu(), {xd.data(), wd.data()});
        check_close(ty.read<float>(), want.at(cy.id), 1e-6, 1e-6);
        check_close(tr.read<float>(), want.at(cr.id), 1e-5, 1e-4);
      }
}

TEST_CASE("opencl graph: a chain around an unclaimed op gives the op-by-op result") {
  const hal_dtype_e f = HAL_DTYPE_FLOAT32;
  Graph g;
  auto a = g.input(f, {8, 16});
  auto b = g.input(f, {16, 4});
  auto e = g.add_op("exp", {a}, {f, {8, 16}});
  auto m = g.add_op("mul", {e, a}, {f, {8, 16}});
  auto mm = g.add_op("matmul", {m, b}, {f, {8, 4}});  // never fused
  auto r = g.add_op("relu", {mm}, {f, {8, 4}});
  auto s = g.add_op("add", {r, mm}, {f, {8, 4}});
  g.mark_output(m);
  g.mark_output(s);
  std::vector<float> ad = data(8 * 16, 11), bd = data(16 * 4, 12);
  // matmul runs op by op: on OpenCL when the plugin has it, else the
  // compile says so (the runtime does not fall back yet).
  bool has_matmul = true;
  try {
    hal::OpRunner probe(opencl(), "matmul");
  } catch (const hal::Error&) {
    has_matmul = false;
  }
  if (!has_matmul) {
    CHECK_THROWS_WITH_AS(hal::compile(*opencl(), g), doctest::Contains("matmul"), hal::Error);
    // The partition alone: matmul unclaimed, the chains on both sides claimed.
    Graph h;
    auto ha = h.input(f, {8, 16});
    auto he = h.add_op("exp", {ha}, {f, {8, 16}});
    auto hm = h.add_op("mul", {he, ha}, {f, {8, 16}});
    auto hs = h.add_op("sum", {hm}, {f, {16}}, {Attr::ints("dim", {0})});
    auto hr = h.add_op("relu", {hs}, {f, {16}});
    h.mark_output(hr);
    hal::CompiledGraph c = hal::compile(*opencl(), h);
    CHECK(c.stats().groups == 2);  // exp, mul -> sum; relu
    CHECK(c.stats().kernel_count == 2);
    auto got = run_compiled(c, h, {ad.data()});
    auto want = op_by_op(h, cpu(), {ad.data()});
    check_close(got.at(0), want.at(hr.id), 1e-5, 1e-5);
    return;
  }
  hal::CompiledGraph c = hal::compile(*opencl(), g);
  CHECK(c.stats().groups == 2);
  CHECK(c.stats().op_nodes == 1);
  auto got = run_compiled(c, g, {ad.data(), bd.data()});
  auto want = op_by_op(g, cpu(), {ad.data(), bd.data()});
  check_close(got.at(0), want.at(m.id), 1e-6, 1e-6);
  check_close(got.at(1), want.at(s.id), 1e-5, 1e-5);
}

TEST_CASE("opencl graph: an int32 input promoted into a float chain") {
  const hal_dtype_e f = HAL_DTYPE_FLOAT32;
  Graph g;
  auto i = g.input(HAL_DTYPE_INT32, {32, 10});
  auto x = g.input(f, {10});
  auto p = g.add_op("mul", {i, x}, {f, {32, 10}});           // int32 * float32 -> float32
  auto q = g.add_op("add", {i, i}, {HAL_DTYPE_INT32, {32, 10}});  // stays int32
  auto c = g.add_op("copy", {q}, {f, {32, 10}});             // int32 -> float32 cast
  auto z = g.add_op("maximum", {p, c}, {f, {32, 10}});
  auto m = g.add_op("amax", {z}, {f, {10}}, {Attr::ints("dim", {0})});
  g.mark_output(z);
  g.mark_output(m);
  std::vector<int32_t> id(32 * 10);
  for (size_t k = 0; k < id.size(); ++k) id[k] = static_cast<int32_t>(k * 37 % 101) - 50;
  std::vector<float> xd = data(10, 5);
  hal::CompiledGraph compiled = hal::compile(*opencl(), g);
  CHECK(compiled.stats().groups == 1);
  CHECK(compiled.stats().kernel_count == 1);
  auto got = run_compiled(compiled, g, {id.data(), xd.data()});
  auto want = op_by_op(g, cpu(), {id.data(), xd.data()});
  check_close(got.at(0), want.at(z.id), 0, 0);
  check_close(got.at(1), want.at(m.id), 0, 0);
}

TEST_CASE("opencl graph: HAL_OPENCL_DUMP_DIR gets the fused kernel's source") {
  hal::testing::TempDir dir;
  Chain c(true);
  setenv("HAL_OPENCL_DUMP_DIR", dir.path().c_str(), 1);
  hal::CompiledGraph compiled = hal::compile(*opencl(), c.g);
  unsetenv("HAL_OPENCL_DUMP_DIR");
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files.push_back(e.path().filename().string());
  REQUIRE(files.size() == 1);
  CHECK(files[0].rfind("fused_mul_add_gelu_mul_sum_", 0) == 0);
  std::ifstream in(dir.path() + "/" + files[0]);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.find("__kernel") != std::string::npos);
  CHECK(text.find("gelu_erf_float(") != std::string::npos);
  // With y read outside too: still one kernel, y written by it.
  auto got = run_compiled(compiled, c.g, c.inputs());
  auto want = op_by_op(c.g, cpu(), c.inputs());
  check_close(got.at(0), want.at(c.y.id), 1e-6, 1e-6);
  check_close(got.at(1), want.at(c.s.id), 1e-5, 1e-3);
}

TEST_CASE("opencl graph: a wrong input shape at run is refused, naming the value") {
  Chain c(false, {-1, 256});
  hal::CompiledGraph compiled = hal::compile(*opencl(), c.g);
  hal::Device& d = *opencl();
  DTensor x(d, HAL_DTYPE_FLOAT32, {4, 256}), w(d, HAL_DTYPE_FLOAT32, {255}), b(d, HAL_DTYPE_FLOAT32, {256}),
      s(d, HAL_DTYPE_FLOAT32, {}), out(d, HAL_DTYPE_FLOAT32, {});
  CHECK_THROWS_WITH_AS(compiled.run({&x.view, &w.view, &b.view, &s.view}, {&out.view}),
                       doctest::Contains("input 1 (value 1)"), hal::Error);
}

namespace {

// s = x + r; (out, mean, rstd) = layer_norm(s, w, b) over NS (the trailing
// dims of [ROWS, 6, 40]); z = relu(out) * rstd: a residual add, its norm and
// an epilogue reading a statistic. Outputs s, z, mean, rstd.
struct NormBlock {
  Graph g;
  Graph::Value s, z, mean, rstd;
  NormBlock(const std::vector<int64_t>& ns, bool symbolic) {
    const hal_dtype_e f = HAL_DTYPE_FLOAT32;
    std::vector<int64_t> shape = {symbolic ? g.symbol("rows") : 37, 6, 40};
    auto x = g.input(f, shape), r = g.input(f, shape), w = g.input(f, ns), b = g.input(f, ns);
    s = g.add_op("add", {x, r});
    auto ln = g.add_node("layer_norm", {s, w, b}, {Attr::ints("normalized_shape", ns), Attr::f("eps", 1e-3)}, 3);
    mean = ln[1];
    rstd = ln[2];
    z = g.add_op("mul", {g.add_op("relu", {ln[0]}), rstd});
    for (auto v : {s, z, mean, rstd}) g.mark_output(v);
  }
  static std::vector<std::vector<float>> data_for(const std::vector<int64_t>& ns) {
    size_t n = 1;
    for (int64_t d : ns) n *= static_cast<size_t>(d);
    return {data(37 * 6 * 40, 11), data(37 * 6 * 40, 12), data(n, 13), data(n, 14)};
  }
};

std::vector<const void*> pointers(const std::vector<std::vector<float>>& d) {
  std::vector<const void*> p;
  for (const auto& v : d) p.push_back(v.data());
  return p;
}

}  // namespace

TEST_CASE("opencl graph: a residual add, its layer_norm and an epilogue are one kernel, as op by op on the CPU") {
  for (std::vector<int64_t> ns : {std::vector<int64_t>{40}, {6, 40}}) {
    CAPTURE(ns.size());
    NormBlock sym(ns, true), concrete(ns, false);
    hal::CompiledGraph compiled = hal::compile(*opencl(), sym.g);
    CHECK(compiled.stats().groups == 1);
    CHECK(compiled.stats().kernel_count == 1);
    CHECK(compiled.stats().op_nodes == 0);
    REQUIRE(compiled.stats().descriptions.size() == 1);
    CHECK(compiled.stats().descriptions[0] == "fused: add -> layer_norm -> relu, mul (1 kernel)");
    auto in = NormBlock::data_for(ns);
    auto got = run_compiled(compiled, concrete.g, pointers(in));  // 37 rows bind the symbol
    auto want = op_by_op(concrete.g, cpu(), pointers(in));
    check_close(got.at(0), want.at(concrete.s.id), 0, 0);
    check_close(got.at(1), want.at(concrete.z.id), 1e-5, 1e-5);
    check_close(got.at(2), want.at(concrete.mean.id), 1e-5, 1e-6);
    check_close(got.at(3), want.at(concrete.rstd.id), 1e-5, 1e-5);
  }
}

TEST_CASE("opencl graph: an attention block's scale and mask fuse with softmax / log_softmax over any dim") {
  const hal_dtype_e f = HAL_DTYPE_FLOAT32;
  for (const char* op : {"softmax", "log_softmax"})
    for (int64_t dim : {-1, 2, 0}) {
      CAPTURE(op);
      CAPTURE(dim);
      Graph g;
      auto x = g.input(f, {3, 4, 10, 24}), mask = g.input(f, {10, 24}), scale = g.input(f, {});
      auto q = g.add_op("add", {g.add_op("mul", {x, scale}), mask});
      auto p = g.add_op(op, {q}, {Attr::i("dim", dim)});
      g.mark_output(p);
      hal::CompiledGraph compiled = hal::compile(*opencl(), g);
      CHECK(compiled.stats().groups == 1);
      CHECK(compiled.stats().kernel_count == 1);
      CHECK(compiled.stats().op_nodes == 0);
      std::vector<float> xd = data(3 * 4 * 10 * 24, 21), md = data(10 * 24, 22), sd = {0.35f};
      md[5] = -INFINITY;  // a masked position
      auto got = run_compiled(compiled, g, {xd.data(), md.data(), sd.data()});
      auto want = op_by_op(g, cpu(), {xd.data(), md.data(), sd.data()});
      check_close(got.at(0), want.at(p.id), 1e-5, 1e-6);
    }
}

TEST_CASE("opencl graph: rms_norm with its default eps and an epilogue - a row op alone stays op by op") {
  const hal_dtype_e f = HAL_DTYPE_FLOAT32;
  Graph g;
  auto x = g.input(f, {16, 70}), w = g.input(f, {70});
  auto rn = g.add_node("rms_norm", {x, w}, {Attr::ints("normalized_shape", {70})}, 2);
  auto y = g.add_op("silu", {rn[0]});
  g.mark_output(y);
  g.mark_output(rn[1]);
  hal::CompiledGraph compiled = hal::compile(*opencl(), g);
  CHECK(compiled.stats().groups == 1);
  CHECK(compiled.stats().kernel_count == 1);
  REQUIRE(compiled.stats().descriptions.size() == 1);
  CHECK(compiled.stats().descriptions[0] == "fused: rms_norm -> silu (1 kernel)");
  std::vector<float> xd = data(16 * 70, 31), wd = data(70, 32);
  auto got = run_compiled(compiled, g, {xd.data(), wd.data()});
  auto want = op_by_op(g, cpu(), {xd.data(), wd.data()});
  check_close(got.at(0), want.at(y.id), 1e-5, 1e-6);
  check_close(got.at(1), want.at(rn[1].id), 1e-5, 1e-6);

  Graph alone;
  auto a = alone.input(f, {16, 70});
  alone.mark_output(alone.add_op("softmax", {a}, {Attr::i("dim", 1)}));
  hal::CompiledGraph c2 = hal::compile(*opencl(), alone);
  CHECK(c2.stats().groups == 0);
  CHECK(c2.stats().op_nodes == 1);
}

TEST_CASE("opencl graph: a fused row kernel read back from the disk cache gives the same result") {
  hal::testing::TempDir dir;
  NormBlock sym({40}, true), concrete({40}, false);
  hal::CompileOptions o;
  o.devices = {opencl()};
  o.cache_dir = dir / "cache";
  hal::clear_compile_cache();
  hal::CompiledGraph first = hal::compile(sym.g, o);
  CHECK(first.stats().compiled == 1);
  hal::clear_compile_cache();  // as a new process starts
  hal::CompiledGraph second = hal::compile(sym.g, o);
  CHECK(second.stats().compiled == 0);
  CHECK(second.stats().deserialized == 1);
  CHECK(second.stats().descriptions == first.stats().descriptions);
  auto in = NormBlock::data_for({40});
  CHECK(run_compiled(second, concrete.g, pointers(in)) == run_compiled(first, concrete.g, pointers(in)));
}
