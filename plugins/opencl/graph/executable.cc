// OpenCL plugin, graph compiler: the fused executable. See executable.hpp.
#include "executable.hpp"

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <map>

#include "../cl_device.hpp"
#include "../ops/cl_kernel.hpp"
#include "codegen.hpp"
#include "hal/sdk/kernel/strided.hpp"

namespace hal::opencl {
namespace {

using sdk::Graph;
using fusion::GeoLayout;
using fusion::Plan;
using fusion::Reduce;

// Work-group size of every fused kernel (fixed: PoCL compiles per size).
constexpr size_t kGroup = 64;

class FusedExecutable final : public sdk::Executable {
 public:
  FusedExecutable(ClDevice& device, const Graph& g, Plan plan) : device_(device), graph_(g), plan_(std::move(plan)) {}
  void execute(const std::vector<Tensor>& in, const std::vector<Tensor>& out, sdk::Stream* stream) override;
  uint32_t kernel_count() const override { return 1; }
  std::string description() const override { return plan_.description; }
  std::vector<uint8_t> serialize() const override;

 private:
  ClDevice& device_;
  Graph graph_;
  Plan plan_;
};

// Geometry buffer contents (GeoLayout) and the sizes execute derives from it.
struct Geo {
  std::vector<cl_long> words;
  int64_t outs = 1, red = 1;
  int64_t inner = 1;  // size of the innermost reduced dim (1: none)
};

// SHAPE iterated with OPERANDS' element strides (broadcast; ROUT: the
// reduction output's strides over the kept dims, or none) split into kept
// and reduced dims (MASK), size-1 dims dropped and neighbours merged.
Geo make_geo(const std::vector<int64_t>& shape, const std::vector<std::vector<int64_t>>& strides, uint32_t mask) {
  const size_t n = strides.size();
  struct Dim {
    int64_t size;
    std::vector<int64_t> st;
  };
  std::vector<Dim> kept, red;
  for (size_t d = 0; d < shape.size(); ++d) {
    Dim dim{shape[d], {}};
    for (size_t k = 0; k < n; ++k) dim.st.push_back(strides[k][d]);
    std::vector<Dim>& list = (mask >> d) & 1u ? red : kept;
    if (shape[d] == 1) continue;
    if (!list.empty() && shape[d] != 0 && list.back().size != 0) {
      bool merge = true;
      for (size_t k = 0; k < n && merge; ++k) merge = list.back().st[k] == dim.st[k] * dim.size;
      if (merge) {
        list.back().size *= dim.size;
        list.back().st = dim.st;
        continue;
      }
    }
    list.push_back(dim);
  }
  Geo geo;
  using L = GeoLayout;
  geo.words.assign(L::words(n), 0);
  geo.words[L::kKeptRank] = static_cast<cl_long>(kept.size());
  geo.words[L::kReducedRank] = static_cast<cl_long>(red.size());
  for (size_t d = 0; d < kept.size(); ++d) {
    geo.words[L::kKeptSizes + d] = kept[d].size;
    geo.outs *= kept[d].size;
    for (size_t k = 0; k < n; ++k) geo.words[L::kKeptStrides + k * L::kOperandWords + d] = kept[d].st[k];
  }
  if (!red.empty()) geo.inner = red.back().size;
  for (size_t d = 0; d < red.size(); ++d) {
    geo.words[L::kReducedSizes + d] = red[d].size;
    geo.red *= red[d].size;
    for (size_t k = 0; k < n; ++k) geo.words[L::kReducedStrides + k * L::kOperandWords + d] = red[d].st[k];
  }
  return geo;
}

cl_mem host_copy(ClDevice& device, const void* data, size_t bytes) {
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(device.context(), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, const_cast<void*>(data),
                            &err);
  cl_check(err, "clCreateBuffer", " (", bytes, " bytes of kernel geometry)");
  return m;
}

struct MemGuard {
  cl_mem m = nullptr;
  ~MemGuard() {
    if (m) clReleaseMemObject(m);
  }
};

void FusedExecutable::execute(const std::vector<Tensor>& in, const std::vector<Tensor>& out, sdk::Stream* stream) {
  const Graph& g = graph_;
  // Symbols bound by the tensors (the SDK checked they agree).
  std::map<int64_t, int64_t> symbols;
  auto bind = [&](uint32_t v, const Tensor& t) {
    for (int d = 0; d < t.rank; ++d)
      if (g.values[v].shape[d] < 0) symbols[g.values[v].shape[d]] = t.shape[d];
  };
  for (size_t i = 0; i < in.size(); ++i) bind(g.inputs[i], in[i]);
  for (size_t i = 0; i < out.size(); ++i) bind(g.outputs[i], out[i]);
  auto concrete = [&](uint32_t v) {
    std::vector<int64_t> s = g.values[v].shape;
    for (int64_t& d : s)
      if (d < 0) {
        auto it = symbols.find(d);
        if (it == symbols.end())
          sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "value ", v, ": symbol ", d, " is bound by no input or output");
        d = it->second;
      }
    return s;
  };
  std::vector<int64_t> shape = plan_.shape;
  for (int64_t& d : shape)
    if (d < 0) {
      auto it = symbols.find(d);
      if (it == symbols.end())
        sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "the group's shape has symbol ", d, ", bound by no input or output");
      d = it->second;
    }
  const int rank = static_cast<int>(shape.size());
  // The catalog's shape rules, for what compile could not check (symbols).
  for (const Plan::Check& c : plan_.checks) {
    std::vector<int64_t> result(shape.size(), 1);
    for (uint32_t v : c.inputs) {
      std::vector<int64_t> s = concrete(v);
      bool ok = s.size() <= shape.size();
      for (size_t d = 0; d < s.size() && ok; ++d) {
        int64_t want = shape[shape.size() - s.size() + d];
        ok = s[d] == want || (c.broadcast && s[d] == 1);
        if (s[d] != 1) result[shape.size() - s.size() + d] = s[d];
      }
      if (!c.broadcast) ok = ok && s.size() == shape.size();
      if (!ok)
        sdk::fail(HAL_STATUS_INVALID_ARGUMENT, c.op, ": value ", v, " with shape ",
                  sdk::shape_string(s.data(), static_cast<int>(s.size())), " does not ",
                  c.broadcast ? "broadcast to" : "match", " the result shape ",
                  sdk::shape_string(shape.data(), rank));
    }
    if (c.broadcast && c.op != "copy")
      for (int d = 0; d < rank; ++d)
        if (result[d] != shape[d] && !(shape[d] == 1))
          sdk::fail(HAL_STATUS_INVALID_ARGUMENT, c.op, ": the inputs broadcast to dim ", d, " = ", result[d],
                    " but the result shape is ", sdk::shape_string(shape.data(), rank));
  }

  // Operands: element strides over SHAPE.
  std::vector<const Tensor*> ops;
  for (size_t j : plan_.ew_outputs) ops.push_back(&out[j]);
  for (const Tensor& t : in) ops.push_back(&t);
  // Statistics: one element per row (broadcast strides 0 over the row).
  for (size_t j : plan_.stat_outputs) ops.push_back(&out[j]);
  std::vector<std::vector<int64_t>> strides;
  for (const Tensor* t : ops) {
    int64_t b[HAL_TENSOR_MAX_RANK] = {};
    sdk::kernel::broadcast_byte_strides(*t, rank, shape.data(), b);
    std::vector<int64_t> s(b, b + rank);
    for (int64_t& x : s) x /= static_cast<int64_t>(t->element_size());
    strides.push_back(std::move(s));
  }
  uint32_t mask = plan_.has_reduction ? plan_.red.mask
                  : plan_.has_row     ? plan_.row.mask
                                      : (rank == 0 ? 0 : (1u << rank) - 1);
  const Tensor* rout = plan_.has_reduction && plan_.reduction_written ? &out[plan_.reduction_output] : nullptr;
  if (plan_.has_reduction) {  // the reduction output's strides over the kept dims
    std::vector<int64_t> s(rank, 0);
    if (rout) {
      bool keepdim = rout->rank == rank;
      int od = 0;
      for (int d = 0; d < rank; ++d) {
        bool reduced = (mask >> d) & 1u;
        if (!reduced) s[d] = rout->strides[od];
        if (!reduced || keepdim) ++od;
      }
    }
    strides.push_back(std::move(s));
  }
  Geo geo = make_geo(shape, strides, mask);
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (plan_.has_reduction && (plan_.red.reduce == Reduce::kMax || plan_.red.reduce == Reduce::kMin) &&
      geo.red == 0 && geo.outs > 0)
    sdk::fail(HAL_STATUS_INVALID_ARGUMENT, g.nodes.back().op(), ": reducing a dim of size 0 (there is no identity)");
  if (plan_.has_reduction || plan_.has_row ? geo.outs == 0 : numel == 0) return;

  const size_t operands = ops.size();
  std::string kernel = "fused";
  // Tiles: SEG elements of a row of the innermost reduced dim; a
  // work-group takes CHUNK tiles (of one output, with a reduction).
  const int64_t seg = 1024;
  const int64_t tiles = geo.inner == 0 ? 0 : geo.red / geo.inner * ((geo.inner + seg - 1) / seg);
  int64_t chunk = 1, parts = 1;
  size_t global = 0;
  if (plan_.has_row) {  // a work-group per row
    kernel = "fused_row";
    global = static_cast<size_t>(geo.outs) * kGroup;
  } else if (!plan_.has_reduction) {
    chunk = std::max<int64_t>(1, (tiles + 255) / 256);
    global = static_cast<size_t>((tiles + chunk - 1) / chunk) * kGroup;
  } else if (geo.outs >= 512 || geo.red < 256) {
    kernel = "fused_rows";
    global = global_1d(geo.outs);
  } else {
    kernel = "fused_split";
    parts = std::max<int64_t>(1, std::min<int64_t>((64 + geo.outs - 1) / geo.outs, tiles));
    chunk = (tiles + parts - 1) / parts;
    global = static_cast<size_t>(geo.outs * parts) * kGroup;
  }
  MemGuard geo_mem{host_copy(device_, geo.words.data(), geo.words.size() * sizeof(cl_long))};
  MemGuard part_mem, counter_mem, rout_mem;
  if (plan_.has_reduction && !rout)  // nobody reads the reduction: somewhere to put it
    rout_mem.m = device_.scratch(static_cast<uint64_t>(geo.outs) * sdk::dtype_size(plan_.red.out));
  if (parts > 1) {
    part_mem.m = device_.scratch(static_cast<uint64_t>(geo.outs * parts) * sdk::dtype_size(plan_.acc));
    std::vector<cl_int> zeros(static_cast<size_t>(geo.outs), 0);
    counter_mem.m = host_copy(device_, zeros.data(), zeros.size() * sizeof(cl_int));
  }
  device_.submit(stream, [&](const Queue& q) {
    Launch l(device_, plan_.source, kernel);
    for (const Tensor* t : ops) l.tensor(*t);
    l.mem(geo_mem.m).value<cl_long>(geo.outs).value<cl_long>(geo.red).value<cl_long>(chunk).value<cl_long>(seg);
    for (const auto& [dtype, v] : plan_.scalars) l.scalar(dtype, v);
    if (plan_.has_reduction) {
      if (rout) l.tensor(*rout);
      else l.mem(rout_mem.m).value<cl_long>(0);
      l.mem(part_mem.m ? part_mem.m : geo_mem.m).mem(counter_mem.m ? counter_mem.m : geo_mem.m).value<cl_long>(parts);
    }
    l.enqueue(q, global, kGroup);
  });
  (void)operands;
}

// The plan as bytes (native byte order: a cache entry never leaves the
// machine). Reader throws INVALID_ARGUMENT on truncated or inconsistent bytes.
constexpr const char* kPlanFormat = "hal-opencl fused plan 2";

class PlanWriter {
 public:
  void u64(uint64_t v) { raw(&v, sizeof(v)); }
  void i64(int64_t v) { raw(&v, sizeof(v)); }
  void f64(double v) { raw(&v, sizeof(v)); }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  template <class T>
  void list(const std::vector<T>& v) {
    u64(v.size());
    for (const T& x : v) i64(static_cast<int64_t>(x));
  }
  std::vector<uint8_t> bytes;

 private:
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
};

class PlanReader {
 public:
  explicit PlanReader(const std::vector<uint8_t>& b) : b_(b) {}
  uint64_t u64() { return take<uint64_t>(); }
  int64_t i64() { return take<int64_t>(); }
  double f64() { return take<double>(); }
  std::string str() {
    uint64_t n = count(1);
    std::string s(reinterpret_cast<const char*>(b_.data() + at_), n);
    at_ += n;
    return s;
  }
  template <class T>
  std::vector<T> list() {
    std::vector<T> v(count(sizeof(int64_t)));
    for (T& x : v) x = static_cast<T>(i64());
    return v;
  }
  // A count of elements of SIZE bytes each that must fit what is left.
  uint64_t count(size_t size) {
    uint64_t n = u64();
    if (n > (b_.size() - at_) / size)
      sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "serialised fused plan truncated (a count of ", n, " at byte ", at_,
                " of ", b_.size(), ")");
    return n;
  }
  bool done() const { return at_ == b_.size(); }

 private:
  template <class T>
  T take() {
    if (b_.size() - at_ < sizeof(T))
      sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "serialised fused plan truncated at byte ", at_, " of ", b_.size());
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  const std::vector<uint8_t>& b_;
  size_t at_ = 0;
};

std::vector<uint8_t> FusedExecutable::serialize() const {
  const Plan& p = plan_;
  PlanWriter w;
  w.str(kPlanFormat);
  w.str(device_.properties().name);
  w.list(p.shape);
  w.list(p.ew_outputs);
  w.u64(p.has_reduction);
  w.u64(p.reduction_written);
  w.u64(p.reduction_output);
  w.u64(static_cast<uint64_t>(p.red.reduce));
  w.u64(p.red.mask);
  w.u64(p.red.in);
  w.u64(p.red.out);
  w.u64(p.acc);
  w.u64(p.has_row);
  w.u64(static_cast<uint64_t>(p.row.row));
  w.u64(p.row.mask);
  w.u64(p.row.in);
  w.list(p.stat_outputs);
  w.u64(p.scalars.size());
  for (const auto& [dtype, v] : p.scalars) {
    w.u64(dtype);
    w.u64(v.is_integral());
    w.i64(v.to_int());
    w.f64(v.to_double());
  }
  w.str(p.source);
  w.str(p.description);
  w.str(p.file_stem);
  w.u64(p.checks.size());
  for (const Plan::Check& c : p.checks) {
    w.str(c.op);
    w.u64(c.broadcast);
    w.list(c.inputs);
  }
  return std::move(w.bytes);
}

hal_dtype_e read_dtype(PlanReader& r, const char* what) {
  uint64_t d = r.u64();
  if (d >= HAL_DTYPE_COUNT_ || sdk::dtype_size(static_cast<hal_dtype_e>(d)) == 0) {
    if (d == HAL_DTYPE_INVALID) return HAL_DTYPE_INVALID;
    sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "serialised fused plan: ", what, " has unknown dtype value ", d);
  }
  return static_cast<hal_dtype_e>(d);
}

Plan read_plan(ClDevice& device, const Graph& g, const std::vector<uint8_t>& bytes) {
  PlanReader r(bytes);
  if (std::string f = r.str(); f != kPlanFormat)
    sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "serialised fused plan has format '", f, "', this plugin reads '",
              kPlanFormat, "'");
  if (std::string d = r.str(); d != device.properties().name)
    sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "serialised fused plan is for device '", d, "', this is '",
              device.properties().name, "'");
  Plan p;
  p.shape = r.list<int64_t>();
  p.ew_outputs = r.list<size_t>();
  p.has_reduction = r.u64() != 0;
  p.reduction_written = r.u64() != 0;
  p.reduction_output = r.u64();
  uint64_t reduce = r.u64();
  if (reduce > static_cast<uint64_t>(Reduce::kMin))
    sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "serialised fused plan: unknown reduction ", reduce);
  p.red.reduce = static_cast<Reduce>(reduce);
  p.red.mask = static_cast<uint32_t>(r.u64());
  p.red.in = read_dtype(r, "the reduction input");
  p.red.out = read_dtype(r, "the reduction output");
  p.acc = read_dtype(r, "the accumulator");
  p.has_row = r.u64() != 0;
  uint64_t row = r.u64();
  if (row > static_cast<uint64_t>(fusion::RowOp::kRmsNorm))
    sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "serialised fused plan: unknown row op ", row);
  p.row.row = static_cast<fusion::RowOp>(row);
  p.row.mask = static_cast<uint32_t>(r.u64());
  p.row.in = p.row.out = read_dtype(r, "the row op");
  p.stat_outputs = r.list<size_t>();
  for (uint64_t n = r.count(32), i = 0; i < n; ++i) {
    hal_dtype_e dtype = read_dtype(r, "a scalar");
    bool integral = r.u64() != 0;
    int64_t iv = r.i64();
    double fv = r.f64();
    p.scalars.emplace_back(dtype, integral ? sdk::Scalar::from_int(iv) : sdk::Scalar::from_float(fv));
  }
  p.source = r.str();
  p.description = r.str();
  p.file_stem = r.str();
  for (uint64_t n = r.count(24), i = 0; i < n; ++i) {
    Plan::Check c;
    c.op = r.str();
    c.broadcast = r.u64() != 0;
    c.inputs = r.list<uint32_t>();
    for (uint32_t v : c.inputs)
      if (v >= g.values.size())
        sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "serialised fused plan: check of ", c.op, " reads value ", v,
                  " but the graph has ", g.values.size());
    p.checks.push_back(std::move(c));
  }
  if (!r.done()) sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "serialised fused plan has trailing bytes");
  // Indices execute trusts: they must fit this graph.
  bool ok = p.shape.size() <= fusion::GeoLayout::kMaxDims &&
            (!p.has_reduction || !p.reduction_written || p.reduction_output < g.outputs.size()) &&
            p.ew_outputs.size() + g.inputs.size() + p.stat_outputs.size() <= fusion::kMaxFusedOperands &&
            (p.row.mask >> p.shape.size()) == 0 && !(p.has_row && p.has_reduction);
  for (size_t j : p.ew_outputs) ok = ok && j < g.outputs.size();
  for (size_t j : p.stat_outputs) ok = ok && j < g.outputs.size();
  if (!ok)
    sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "serialised fused plan does not fit the graph (", g.inputs.size(),
              " inputs, ", g.outputs.size(), " outputs)");
  return p;
}

}  // namespace

std::unique_ptr<sdk::Executable> deserialize_fused(ClDevice& device, const Graph& graph,
                                                   const std::vector<uint8_t>& bytes) {
  Plan plan = read_plan(device, graph, bytes);
  // Build (or find in the program cache) now, as compile_fused does.
  device.programs().kernel(plan.source, plan.entry());
  return std::make_unique<FusedExecutable>(device, graph, std::move(plan));
}

std::unique_ptr<sdk::Executable> compile_fused(ClDevice& device, const Graph& graph) {
  Plan plan = fusion::plan_group(device, graph);
  if (const char* dir = std::getenv("HAL_OPENCL_DUMP_DIR"); dir && *dir) {
    std::ofstream f(std::string(dir) + "/" + plan.file_stem + ".cl");
    f << "// " << plan.description << "\n" << plan.source;
  }
  // Build now: a compiler error surfaces at compile, and execute only looks up.
  device.programs().kernel(plan.source, plan.entry());
  return std::make_unique<FusedExecutable>(device, graph, std::move(plan));
}

}  // namespace hal::opencl
