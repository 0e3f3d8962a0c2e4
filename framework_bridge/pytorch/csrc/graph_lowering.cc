// torch_hal's torch.compile lowering (graph_lowering.hpp): a segment under
// construction (SegmentBuilder) and its compiled form (Segment).
//
// A node lowers through the same RowConversion the eager kernel runs, on
// meta tensors carrying the FX node's shapes (Call::lowering). Where the
// conversion declines, or the catalog's own shape rule disagrees with
// PyTorch's result, the node is not added and the reason goes back to the
// caller, who runs the node eagerly: a lowering never fails the compile.
#include "graph_lowering.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "backend.hpp"
#include "hal/runtime/graph_passes.hpp"
#include "llm_ops.hpp"
#include "mapping.hpp"
#include "row_conversion.hpp"

namespace py = pybind11;

namespace torch_hal {

Segment::Segment(hal::Graph graph, hal::CompiledGraph compiled, std::vector<c10::ScalarType> out_dtypes,
                 c10::DeviceIndex dev, std::vector<std::pair<size_t, size_t>> output_aliases)
    : graph_(std::move(graph)),
      compiled_(make(std::move(compiled))),
      out_dtypes_(std::move(out_dtypes)),
      dev_(dev),
      output_aliases_(std::move(output_aliases)) {}

hal::CompileOptions segment_compile_options(const std::shared_ptr<hal::Device>& home) {
  hal::CompileOptions co;
  co.devices.push_back(home);
  for (const auto& d : runtime().devices())
    if (d.get() != home.get()) co.devices.push_back(d);  // compile() leaves the lost ones out
  co.fallback = runtime().fallback_device();
  return co;
}

std::shared_ptr<const Segment::Compiled> Segment::make(hal::CompiledGraph graph) const {
  auto c = std::make_shared<Compiled>(Compiled{std::move(graph), {}, {}});
  for (size_t i = 0; i < graph_.inputs().size(); ++i) c->strided_ok.push_back(c->graph.accepts_strided_input(i));
  c->alias_input.assign(graph_.outputs().size(), -1);
  for (const auto& [o, i] : c->graph.output_aliases()) c->alias_input[o] = static_cast<int64_t>(i);
  return c;
}

std::shared_ptr<const Segment::Compiled> Segment::current() const {
  std::lock_guard<std::mutex> lock(compiled_mu_);
  return compiled_;
}

std::vector<std::string> Segment::failovers() const {
  std::lock_guard<std::mutex> lock(compiled_mu_);
  return failovers_;
}

bool Segment::fail_over(const std::shared_ptr<const Compiled>& at) const {
  const std::shared_ptr<hal::Device>& home = device(dev_);
  if (home->state() != hal::DeviceState::kOk) return false;
  std::string gone;
  for (const auto& d : at->graph.lost_devices()) gone += (gone.empty() ? "" : ", ") + d->id();
  if (gone.empty()) return false;  // not a device of this partition: nothing to route around
  std::lock_guard<std::mutex> lock(compiled_mu_);
  if (compiled_ != at) return true;  // another run failed over already
  hal::CompileOptions co = segment_compile_options(home);
  co.output_aliases = output_aliases_;
  std::shared_ptr<const Compiled> next = make(hal::compile(graph_, co));
  std::string now;
  for (const hal::DevicePartStats& part : next->graph.stats().devices) now += (now.empty() ? "" : ", ") + part.device;
  failovers_.push_back("device " + gone + " lost: re-partitioned onto " + now);
  std::fprintf(stderr, "torch_hal: compiled segment failover: %s\n", failovers_.back().c_str());
  retired_.push_back(std::move(compiled_));
  compiled_ = std::move(next);
  return true;
}

std::shared_ptr<const std::vector<std::vector<int64_t>>> Segment::output_shapes(
    const std::vector<at::Tensor>& ins) const {
  {
    std::lock_guard<std::mutex> lock(shapes_mu_);
    bool same = last_out_ != nullptr && last_in_.size() == ins.size();
    for (size_t i = 0; same && i < ins.size(); ++i) same = ins[i].sizes() == c10::IntArrayRef(last_in_[i]);
    if (same) return last_out_;
  }
  std::vector<std::vector<int64_t>> in;
  in.reserve(ins.size());
  for (const at::Tensor& t : ins) in.push_back(t.sizes().vec());
  // The graph's own inference binds the symbols (it names a bad input).
  const std::vector<std::vector<int64_t>> all = hal::infer_shapes(graph_, in);
  auto out = std::make_shared<std::vector<std::vector<int64_t>>>();
  for (uint32_t id : graph_.outputs()) out->push_back(all[id]);
  std::lock_guard<std::mutex> lock(shapes_mu_);
  last_in_ = in;
  last_out_ = out;
  return out;
}

std::vector<at::Tensor> Segment::run(const std::vector<at::Tensor>& inputs,
                                     const std::vector<at::Tensor>& write_back) const {
  TORCH_CHECK(write_back.size() == write_backs_.size(), "torch_hal: a segment run got ", write_back.size(),
              " write-back tensors for ", write_backs_.size(), " write-backs");
  for (size_t attempt = 0;; ++attempt) {
    const std::shared_ptr<const Compiled> at = current();
    try {
      return run_on(*at, inputs, write_back);
    } catch (const hal::Error& e) {
      if (e.code() != HAL_STATUS_DEVICE_LOST || attempt >= 4 || !fail_over(at)) throw;
    }
  }
}

namespace {

// A contiguous tensor of DTYPE and SIZES in BLOCK's bytes from BYTE_OFFSET
// (a multiple of the element size): made directly, no dispatcher call.
at::Tensor typed_part(const at::Tensor& block, int64_t byte_offset, c10::ScalarType dtype, c10::IntArrayRef sizes) {
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(block.storage()), block.key_set(),
                                                          c10::scalarTypeToTypeMeta(dtype));
  t.unsafeGetTensorImpl()->set_storage_offset(byte_offset / static_cast<int64_t>(c10::elementSize(dtype)));
  t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  return t;
}

// SELF's bytes seen with SIZES and STRIDES from its own storage offset:
// not an autograd view and no dispatcher call (inductor's
// reinterpret_tensor), but sharing SELF's version counter, so autograd's
// check of a saved tensor still sees an in-place change of either, as it
// would through an eager view.
at::Tensor restrided(const at::Tensor& self, c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(self.storage()), self.key_set(), self.dtype());
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  impl->set_sizes_and_strides(sizes, strides, self.storage_offset());
  // Made under inference mode, T is an inference tensor (no counter to share).
  if (!impl->is_inference()) impl->set_version_counter(self.unsafeGetTensorImpl()->version_counter());
  return t;
}

// SELF.permute(DIMS) as restrided makes it.
at::Tensor permuted(const at::Tensor& self, const std::vector<int64_t>& dims) {
  TORCH_CHECK(static_cast<int64_t>(dims.size()) == self.dim(), "torch_hal: a permutation of ", dims.size(),
              " dims for an input of ", self.dim());
  c10::DimVector sizes(dims.size()), strides(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    const int64_t from = c10::maybe_wrap_dim(dims[d], self.dim());
    sizes[d] = self.size(from);
    strides[d] = self.stride(from);
  }
  return restrided(self, sizes, strides);
}

constexpr int64_t kPartAlign = 64;

int64_t aligned(int64_t bytes) { return (bytes + kPartAlign - 1) / kPartAlign * kPartAlign; }

// Whether T is a plain 0-dim CPU tensor (an optimizer's step counter): its
// bytes are its value.
bool host_scalar(const at::Tensor& t) {
  return t.device().is_cpu() && t.dim() == 0 && t.layout() == at::kStrided && !t.is_conj() && !t.is_neg();
}

// Whether DST is a plain dense tensor of DTYPE and SIZES on DEV: bytes
// copied into it from a contiguous source are its value.
bool plain_dense(const at::Tensor& dst, c10::Device dev, c10::ScalarType dtype, c10::IntArrayRef sizes) {
  return dst.device() == dev && dst.scalar_type() == dtype && dst.sizes() == sizes && dst.layout() == at::kStrided &&
         dst.is_contiguous() && !dst.is_conj() && !dst.is_neg();
}

// The 0-dim CPU tensors among INPUTS (an optimizer's step counters) on DEV,
// uploaded in one copy into one device block, returned; OFFSET[i] is input
// i's byte offset in it, -1 for the others. Fewer than two: nothing is
// uploaded (each is moved as it is) and the block is undefined. KEPT (may
// be null; only for a run on the default, synchronous stream) is the block
// kept from the last run and HOST its contents: reused, and uploaded only
// when a value differs.
at::Tensor upload_host_scalars(const std::vector<at::Tensor>& inputs, c10::Device dev, std::vector<int64_t>& offset,
                               at::Tensor* kept, std::vector<uint8_t>* host) {
  offset.assign(inputs.size(), -1);
  int64_t bytes = 0;
  constexpr int64_t kSlot = 16;  // one slot per scalar: any dtype's bytes, aligned
  for (size_t i = 0; i < inputs.size(); ++i)
    if (host_scalar(inputs[i]) && c10::elementSize(inputs[i].scalar_type()) <= 16) {
      offset[i] = bytes;
      bytes += kSlot;
    }
  if (bytes < 2 * kSlot) {
    offset.assign(inputs.size(), -1);
    return at::Tensor();
  }
  if (kept != nullptr) {
    bool dirty = !kept->defined() || host->size() != static_cast<size_t>(bytes);
    if (dirty) {
      *kept = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(dev));
      host->assign(static_cast<size_t>(bytes), 0);
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (offset[i] < 0) continue;
      uint8_t* slot = host->data() + offset[i];
      const size_t size = inputs[i].element_size();
      if (std::memcmp(slot, inputs[i].const_data_ptr(), size) == 0) continue;
      std::memcpy(slot, inputs[i].const_data_ptr(), size);
      dirty = true;
    }
    if (dirty) {
      const hal::TensorRef ref = ref_of(*kept);
      buffer_of(*kept).copy_from_host(host->data(), host->size(), ref.byte_offset, nullptr);
    }
    return *kept;
  }
  at::Tensor staging = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
  auto* data = staging.data_ptr<uint8_t>();
  for (size_t i = 0; i < inputs.size(); ++i)
    if (offset[i] >= 0) std::memcpy(data + offset[i], inputs[i].const_data_ptr(), inputs[i].element_size());
  at::Tensor block = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(dev));
  upload(staging, block);
  return block;
}

// VIEW of the DTYPE, SHAPE contiguous part of BLOCK (REF: ref_of(BLOCK))
// from byte OFFSET: no tensor made.
void part_view(hal::TensorView& view, const hal::TensorRef& ref, int64_t offset, c10::ScalarType dtype,
               c10::IntArrayRef shape) {
  view.buffer = ref.buffer;
  view.buffer_bytes = ref.buffer_bytes;
  view.byte_offset = ref.byte_offset + static_cast<uint64_t>(offset);
  view.dtype = to_hal_dtype(dtype);
  view.shape.assign(shape.begin(), shape.end());
  view.strides.clear();  // contiguous
}

// Copies SRC (a fresh output, contiguous) into DST, a write-back tensor:
// on the device without the dispatcher where both are plain dense tensors
// of one dtype and shape there (bumping DST's version, as copy_ does),
// else through copy_.
void write_back_into(const at::Tensor& src, at::Tensor& dst) {
  if (plain_dense(dst, src.device(), src.scalar_type(), src.sizes())) {
    device_copy(src, dst);
    dst.unsafeGetTensorImpl()->bump_version();
    return;
  }
  dst.copy_(src);
}

}  // namespace

std::vector<at::Tensor> Segment::run_on(const Compiled& compiled, const std::vector<at::Tensor>& inputs,
                                        const std::vector<at::Tensor>& write_back) const {
  const c10::Device dev(at::kPrivateUse1, dev_);
  std::vector<at::Tensor> ins, viewed(view_outputs_.size());
  ins.reserve(inputs.size());
  std::unique_lock<std::mutex> keep(views_mu_, std::try_to_lock);
  // The kept scalar block: a run that holds the views, on the synchronous
  // default stream (nothing of an earlier run can still read the block).
  const bool kept = keep.owns_lock() && current_hal_stream(dev_) == nullptr;
  std::vector<int64_t> scalar_at;  // per input: its offset in SCALARS, or -1
  const at::Tensor scalars = upload_host_scalars(inputs, dev, scalar_at, kept ? &scalars_.block : nullptr,
                                                 kept ? &scalars_.host : nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    if (scalar_at[i] >= 0) {  // read from SCALARS; T itself stands for its (0-dim) shape
      ins.push_back(t);
      continue;
    }
    at::Tensor on = t.device() == dev ? t : t.to(dev);
    if (i < permutes_.size() && !permutes_[i].empty()) {
      on = permuted(on, permutes_[i]);
      for (size_t k = 0; k < view_outputs_.size(); ++k)
        if (view_outputs_[k] == i) viewed[k] = on;
    }
    // Op-by-op nodes take strided views (a weight's transpose) as eager
    // kernels do: no copy; a compiled group's input is made contiguous.
    if (i >= compiled.strided_ok.size() || !compiled.strided_ok[i]) on = on.contiguous();
    ins.push_back(std::move(on));
  }
  const auto out_shapes = output_shapes(ins);
  std::vector<at::Tensor> outs;
  outs.reserve(out_shapes->size());
  Views own;
  Views& v = keep.owns_lock() ? views_ : own;
  v.all.resize(ins.size() + out_shapes->size());
  v.in.clear();
  v.out.clear();
  const hal::TensorRef scalars_ref = scalars.defined() ? ref_of(scalars) : hal::TensorRef{};
  for (size_t i = 0; i < ins.size(); ++i) {
    if (scalar_at[i] >= 0)
      part_view(v.all[i], scalars_ref, scalar_at[i], ins[i].scalar_type(), {});
    else
      assign_view(v.all[i], ins[i]);
    v.in.push_back(&v.all[i]);
  }
  // Transient outputs the run writes into their inputs' tensors (a
  // parameter updated in place): the write-back is the run itself. A step
  // counter (a 0-dim CPU input) is so written into the kept block and
  // downloaded from it after the run (its next upload finds the same value).
  std::vector<bool> done(write_back.size(), false);
  std::vector<int64_t> into(out_shapes->size(), -1);  // per output: the write-back it is written into
  std::vector<std::pair<size_t, int64_t>> in_block;   // (write-back, its offset in the kept block)
  std::vector<const c10::StorageImpl*> storages;        // per input (scalars: none), made when needed
  std::vector<const c10::StorageImpl*> sorted;          // STORAGES sorted: counted by binary search
  for (size_t k = 0; k < write_back.size(); ++k) {
    const size_t j = write_backs_[k];
    const int64_t i = j < compiled.alias_input.size() ? compiled.alias_input[j] : -1;
    if (i < 0 || into[j] >= 0 || j >= transient_.size() || !transient_[j]) continue;
    const at::Tensor& dst = write_back[k];
    const int64_t at_scalar = scalar_at[static_cast<size_t>(i)];
    if (at_scalar >= 0) {
      const at::Tensor& in = inputs[static_cast<size_t>(i)];
      if (!kept || !host_scalar(dst) || dst.scalar_type() != out_dtypes_[j] || dst.scalar_type() != in.scalar_type() ||
          dst.const_data_ptr() != in.const_data_ptr())
        continue;
      in_block.emplace_back(k, at_scalar);
    } else {
      if (!plain_dense(dst, dev, out_dtypes_[j], (*out_shapes)[j])) continue;
      const at::Tensor& in = ins[static_cast<size_t>(i)];
      if (in.data_ptr() != dst.data_ptr() || in.sizes() != dst.sizes() || !in.is_contiguous()) continue;
      // Another input reading the same storage would see the update early.
      if (storages.empty())
        for (size_t x = 0; x < ins.size(); ++x) {
          const c10::TensorImpl* impl = ins[x].unsafeGetTensorImpl();
          storages.push_back(scalar_at[x] < 0 && impl->has_storage() ? impl->storage().unsafeGetStorageImpl() : nullptr);
        }
      if (sorted.empty()) {
        sorted = storages;
        std::sort(sorted.begin(), sorted.end(), std::less<const c10::StorageImpl*>());
      }
      const c10::StorageImpl* storage = storages[static_cast<size_t>(i)];
      const auto same = std::equal_range(sorted.begin(), sorted.end(), storage, std::less<const c10::StorageImpl*>());
      if (same.second - same.first != 1) continue;
    }
    into[j] = static_cast<int64_t>(k);
    done[k] = true;
  }
  if (const auto n = std::count_if(into.begin(), into.end(), [](int64_t k) { return k >= 0; }); n > 0)
    in_place_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  // Transient outputs share one buffer: one allocation for all of them.
  // Those written back into 0-dim CPU tensors (an optimizer's step
  // counters) come first, so that one download brings them all.
  std::vector<size_t> to_host;  // write-backs (index into WRITE_BACK) done by that download
  for (size_t k = 0; k < write_back.size(); ++k) {
    const size_t j = write_backs_[k];
    const at::Tensor& dst = write_back[k];
    if (j < transient_.size() && transient_[j] && into[j] < 0 && host_scalar(dst) && dst.scalar_type() == out_dtypes_[j] &&
        std::none_of(to_host.begin(), to_host.end(), [&](size_t m) { return write_backs_[m] == j; }))
      to_host.push_back(k);
  }
  if (to_host.size() < 2) to_host.clear();  // one is as cheap through copy_
  int64_t transient_bytes = 0;
  std::vector<int64_t> offsets(out_shapes->size(), -1);
  for (size_t k : to_host) {
    offsets[write_backs_[k]] = transient_bytes;
    transient_bytes += kPartAlign;  // a 0-dim value: one slot
  }
  const int64_t host_bytes = transient_bytes;
  for (size_t j = 0; j < out_shapes->size(); ++j) {
    if (j >= transient_.size() || !transient_[j] || offsets[j] >= 0 || into[j] >= 0) continue;
    offsets[j] = transient_bytes;
    transient_bytes += aligned(c10::multiply_integers((*out_shapes)[j]) *
                               static_cast<int64_t>(c10::elementSize(out_dtypes_[j])));
  }
  const at::Tensor block =
      transient_bytes > 0 ? at::empty({transient_bytes}, at::TensorOptions().dtype(at::kByte).device(dev)) : at::Tensor();
  // A transient output is a part of BLOCK: a view for the run, no tensor.
  const hal::TensorRef block_ref = block.defined() ? ref_of(block) : hal::TensorRef{};
  for (size_t j = 0; j < out_shapes->size(); ++j) {
    hal::TensorView& view = v.all[ins.size() + j];
    if (into[j] >= 0) {  // the input's own view: the same buffer, offset and shape
      outs.emplace_back();
      view = v.all[static_cast<size_t>(compiled.alias_input[j])];
    } else if (offsets[j] >= 0) {
      outs.emplace_back();
      part_view(view, block_ref, offsets[j], out_dtypes_[j], (*out_shapes)[j]);
    } else {
      outs.push_back(at::empty((*out_shapes)[j], at::TensorOptions().dtype(out_dtypes_[j]).device(dev)));
      assign_view(view, outs.back());
    }
    v.out.push_back(&view);
  }
  if (!in_block.empty()) scalars_.host.clear();  // unknown until downloaded: the run writes the block (or fails midway)
  compiled.graph.run(v.in, v.out, current_hal_stream(dev_));
  if (!in_block.empty()) {
    scalars_.host.resize(static_cast<size_t>(scalars_.block.nbytes()));
    buffer_of(scalars_.block)
        .copy_to_host(scalars_.host.data(), scalars_.host.size(), ref_of(scalars_.block).byte_offset, nullptr);
    for (const auto& [k, offset] : in_block) {
      const at::Tensor& dst = write_back[k];
      std::memcpy(dst.data_ptr(), scalars_.host.data() + offset, dst.element_size());
      dst.unsafeGetTensorImpl()->bump_version();
    }
  }
  keep = {};
  // Stream order puts the copies after every read of the old values. They
  // are mutations AOTAutograd kept in the graph because autograd need not
  // see them (its rule): below autograd, the version counter still moves.
  const at::AutoDispatchBelowAutograd below_autograd;
  for (size_t j = 0; j < into.size(); ++j)
    if (into[j] >= 0) write_back[static_cast<size_t>(into[j])].unsafeGetTensorImpl()->bump_version();
  if (!to_host.empty()) {  // one download, after the run
    std::vector<uint8_t> staged(static_cast<size_t>(host_bytes));
    const hal::Stream* stream = current_hal_stream(dev_);
    buffer_of(block).copy_to_host(staged.data(), staged.size(), block_ref.byte_offset, stream);
    if (stream != nullptr) synchronize_stream(current_stream(dev_));
    for (size_t k : to_host) {
      at::Tensor dst = write_back[k];
      std::memcpy(dst.data_ptr(), staged.data() + offsets[write_backs_[k]], dst.element_size());
      dst.unsafeGetTensorImpl()->bump_version();
      done[k] = true;
    }
  }
  for (size_t k = 0; k < write_back.size(); ++k) {
    if (done[k]) continue;
    const size_t j = write_backs_[k];
    at::Tensor dst = write_back[k];
    if (outs[j].defined()) {
      write_back_into(outs[j], dst);
    } else if (plain_dense(dst, dev, out_dtypes_[j], (*out_shapes)[j]) && !dst.storage().is_alias_of(block.storage())) {
      // A transient source into a plain dense tensor: a copy between the buffers, no tensor made.
      buffer_of(dst).copy_from(buffer_of(block), dst.nbytes(), dst.storage_offset() * dst.element_size(),
                               block_ref.byte_offset + static_cast<uint64_t>(offsets[j]), current_hal_stream(dev_));
      dst.unsafeGetTensorImpl()->bump_version();
    } else {
      write_back_into(typed_part(block, offsets[j], out_dtypes_[j], (*out_shapes)[j]), dst);
    }
  }
  if (any_transient_) {  // not returned
    size_t kept = 0;
    for (size_t j = 0; j < outs.size(); ++j)
      if (j >= transient_.size() || !transient_[j]) outs[kept++] = std::move(outs[j]);
    outs.resize(kept);
  }
  outs.insert(outs.end(), viewed.begin(), viewed.end());
  return outs;
}

void Segment::set_view_outputs(std::vector<size_t> inputs) {
  for (size_t i : inputs)
    TORCH_CHECK(i < permutes_.size() && !permutes_[i].empty(), "torch_hal: input ", i,
                " of a segment is not a permuted input; its view cannot be an output");
  view_outputs_ = std::move(inputs);
}

void Segment::set_write_backs(std::vector<size_t> outputs) {
  for (size_t j : outputs)
    TORCH_CHECK(j < out_dtypes_.size(), "torch_hal: write-back of output ", j, " of a segment with ",
                out_dtypes_.size(), " outputs");
  write_backs_ = std::move(outputs);
}

void Segment::set_transient_outputs(std::vector<size_t> outputs) {
  std::vector<bool> transient(out_dtypes_.size(), false);
  for (size_t j : outputs) {
    TORCH_CHECK(std::find(write_backs_.begin(), write_backs_.end(), j) != write_backs_.end(), "torch_hal: output ", j,
                " of a segment is not a write-back's source; it cannot be transient");
    transient[j] = true;
  }
  transient_ = std::move(transient);
  any_transient_ = !outputs.empty();
}

void Segment::set_input_permutes(std::vector<std::vector<int64_t>> permutes) {
  TORCH_CHECK(permutes.size() <= graph_.inputs().size(), "torch_hal: ", permutes.size(),
              " input permutations for a segment of ", graph_.inputs().size(), " inputs");
  permutes_ = std::move(permutes);
}

namespace {

const RowConversion& conversion_for(const Mapping& row, const std::string& name, const c10::OperatorHandle& op) {
  static std::mutex mu;
  static auto* made = new std::unordered_map<std::string, std::unique_ptr<RowConversion>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*made)[name];
  if (!slot) slot = std::make_unique<RowConversion>(row, name, op.schema());
  return *slot;
}

// A segment under construction. Values are known by the meta tensors that
// stand for them (the lowering's results, or tensors declared as segment
// inputs, which become graph inputs when a lowered node first reads them).
class SegmentBuilder {
 public:
  explicit SegmentBuilder(int dev) : dev_(static_cast<c10::DeviceIndex>(dev)) {}

  void declare(const at::Tensor& meta, const std::vector<SymDim>& sizes, const std::string& name) {
    TORCH_CHECK(meta.is_meta(), "torch_hal: declare() takes meta tensors");
    pending_[meta.unsafeGetTensorImpl()] = Pending{meta, sizes, name};
  }

  // Makes META stand for a graph constant holding VALUE's bytes (a frozen
  // parameter; VALUE is a CPU tensor, copied).
  void constant(const at::Tensor& meta, const at::Tensor& value, const std::string& name) {
    TORCH_CHECK(meta.is_meta() && value.is_cpu(), "torch_hal: constant() takes a meta and a CPU tensor");
    const at::Tensor c = value.contiguous();
    std::vector<uint8_t> bytes(c.nbytes());
    std::memcpy(bytes.data(), c.data_ptr(), bytes.size());
    values_[meta.unsafeGetTensorImpl()] =
        graph_.constant(to_hal_dtype(c.scalar_type()), c.sizes().vec(), std::move(bytes), name);
    keep_.push_back(meta);
  }

  // Lowers aten overload NAME on ARGS/KWARGS (meta tensors for values);
  // OUT_SIZES are the FX node's output sizes with symbols by name. Returns
  // the meta tensors of the node's tensor returns (None for undefined ones
  // and for the row's side returns, which are not catalog outputs), or a
  // str: why the node does not lower.
  py::object lower(const std::string& name, const py::tuple& args, const py::dict& kwargs,
                   const std::vector<std::vector<SymDim>>& out_sizes) {
    if (name.rfind("hal::", 0) == 0) return lower_hal_op(name, args, kwargs, out_sizes);
    const Mapping* row = find_mapping(name);
    if (row == nullptr) return py::str("no mapping-table row for aten::" + name);
    const auto dot = name.find('.');
    auto op = c10::Dispatcher::singleton().findSchema(
        {"aten::" + name.substr(0, dot), dot == std::string::npos ? "" : name.substr(dot + 1)});
    if (!op) return py::str("no such aten op");
    const RowConversion& conv = conversion_for(*row, name, *op);
    for (int a : conv.return_args())
      if (a >= 0) return py::str("writes its argument in place");
    torch::jit::Stack stack = torch::jit::createStackForSchema(
        op->schema(), args, py::reinterpret_borrow<py::kwargs>(kwargs), std::nullopt);
    for (const c10::IValue& v : stack) {
      if (v.isTensor() && v.toTensor().defined() && !hal_dtype_of(v.toTensor().scalar_type()))
        return py::str(std::string("dtype ") + c10::toString(v.toTensor().scalar_type()) + " has no HAL dtype");
      if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_complex())
        return py::str("complex dtype");
    }
    if (row->after != nullptr) return py::str("checks its results after the launch (eager only)");
    Call call(*row, op->schema(), stack, dev_);
    call.lowering = true;
    try {
      conv.convert(*op, call);
    } catch (const Decline& d) {
      return py::str(std::string("catalog op ") + call.catalog + " declined: " + d.reason);
    } catch (const c10::Error& e) {
      return py::str("conversion failed: " + std::string(e.what_without_backtrace()));
    }
    // Every return the row gives the catalog op must be one of its outputs.
    // The rest (mapping.hpp: returns_to_catalog) are what PyTorch's Meta
    // kernel makes, in eager too (SDPA's max_q, max_k, philox seed): None
    // here, and the caller takes them from the FX node's value.
    const size_t to_catalog =
        row->returns_to_catalog < 0 ? call.returns.size() : static_cast<size_t>(row->returns_to_catalog);
    std::vector<int> return_output(call.returns.size(), -1);
    for (size_t r = 0; r < call.returns.size(); ++r) {
      const bool side = r >= to_catalog;
      if (r < call.other_returns.size() && !call.other_returns[r].isNone()) {
        if (side) continue;
        return py::str("returns a non-tensor");
      }
      if (!call.returns[r].defined()) continue;
      for (size_t k = 0; k < call.outputs.size(); ++k)
        if (call.outputs[k].is_same(call.returns[r])) return_output[r] = static_cast<int>(k);
      if (return_output[r] < 0 && !side) return py::str("return " + std::to_string(r) + " is not a catalog output");
    }
    return add(call.catalog, call.inputs, call.attrs, call.outputs, call.returns, return_output, out_sizes);
  }

  // A torch.ops.hal op (llm_ops.cc) NAME ("hal::silu_and_mul") on ARGS/KWARGS:
  // its catalog op as one node (dlinfer's graph mode). Output metas from the
  // op's fake kernel. In-place ops stay eager.
  py::object lower_hal_op(const std::string& name, const py::tuple& args, const py::dict& kwargs,
                          const std::vector<std::vector<SymDim>>& out_sizes) {
    auto op = c10::Dispatcher::singleton().findSchema({name, ""});
    if (!op) return py::str("no such op " + name);
    for (const c10::Argument& a : op->schema().arguments())
      if (a.alias_info() != nullptr && a.alias_info()->isWrite()) return py::str("writes its argument in place");
    torch::jit::Stack stack = torch::jit::createStackForSchema(
        op->schema(), args, py::reinterpret_borrow<py::kwargs>(kwargs), std::nullopt);
    HalOpCall call = hal_op_call(*op, stack);
    for (const at::Tensor& t : call.inputs)
      if (t.defined() && !t.is_meta()) return py::str("a tensor argument is not a graph value");
    op->callBoxed(&stack);  // the fake kernel on the metas: the outputs
    std::vector<at::Tensor> outputs;
    std::vector<int> return_output;
    for (const c10::IValue& v : stack) {
      if (!v.isTensor()) return py::str("returns a non-tensor");
      return_output.push_back(static_cast<int>(outputs.size()));
      outputs.push_back(v.toTensor());
    }
    return add(call.catalog, call.inputs, std::move(call.attrs), outputs, outputs, return_output, out_sizes);
  }

  // Adds catalog op CATALOG on INPUTS (meta tensors standing for values,
  // declared tensors, or CPU constants; undefined = absent) and ATTRS, whose
  // outputs are the metas OUTPUTS; returns RETURNS' metas (RETURN_OUTPUT[r]:
  // which output return r is, -1 none) or a str: why it does not lower.
  py::object add(const std::string& catalog, c10::ArrayRef<at::Tensor> inputs, std::vector<hal::Attr> attrs,
                 c10::ArrayRef<at::Tensor> outputs, c10::ArrayRef<at::Tensor> returns,
                 const std::vector<int>& return_output, const std::vector<std::vector<SymDim>>& out_sizes) {
    for (const at::Tensor& out : outputs)
      if (out.defined() && !out.is_meta()) return py::str("an output is not a new tensor");
    // Inputs: known values, declared tensors (new graph inputs), constants.
    std::vector<hal::Graph::Value> ins;
    std::vector<const hal::ValueSpec*> in_specs;
    for (const at::Tensor& t : inputs) {
      if (!t.defined()) {
        ins.emplace_back();
        continue;
      }
      if (!t.is_meta()) {  // a Scalar input (0-dim CPU tensor): a constant
        const at::Tensor c = t.contiguous();
        std::vector<uint8_t> bytes(c.nbytes());
        std::memcpy(bytes.data(), c.data_ptr(), bytes.size());
        ins.push_back(graph_.constant(to_hal_dtype(c.scalar_type()), c.sizes().vec(), std::move(bytes)));
        continue;
      }
      auto known = values_.find(t.unsafeGetTensorImpl());
      if (known != values_.end()) {
        ins.push_back(known->second);
        continue;
      }
      auto p = pending_.find(t.unsafeGetTensorImpl());
      if (p == pending_.end()) return py::str("reads a tensor that is not a value of the graph");
      const hal::Graph::Value v = graph_.input(to_hal_dtype(t.scalar_type()), symbolic(p->second.sizes), p->second.name);
      input_names_.push_back(p->second.name);
      keep_.push_back(p->second.tensor);
      values_[t.unsafeGetTensorImpl()] = v;
      ins.push_back(v);
    }
    for (const auto& v : ins) in_specs.push_back(v.valid() ? &graph_.values()[v.id] : nullptr);
    if (catalog == "reshape" && !reshape_attrs(attrs, in_specs[0], out_sizes.at(0)))
      return py::str("a reshape to more than one size only known at run time");
    // The catalog's rules for the outputs (declared for copy, whose output is
    // the caller's choice), checked against PyTorch's.
    std::vector<hal::ValueSpec> specs;
    try {
      if (catalog == "copy") {
        specs.push_back({to_hal_dtype(outputs[0].scalar_type()), symbolic(out_sizes.at(0))});
        std::vector<const hal::ValueSpec*> given{&specs[0]};
        hal::infer_node("copy", in_specs, attrs, 1, {}, given);
      } else {
        hal::InferContext ctx;
        const size_t node = graph_.nodes().size();
        ctx.fresh_symbol = [&](size_t o, size_t d) {
          return graph_.symbol("node" + std::to_string(node) + "_o" + std::to_string(o) + "_d" + std::to_string(d));
        };
        specs = hal::infer_node(catalog, in_specs, attrs, outputs.size(), ctx);
      }
    } catch (const hal::Error& e) {
      return py::str("catalog op " + catalog + " refused: " + e.what());
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      const at::Tensor& o = outputs[k];
      bool same = specs[k].dtype == to_hal_dtype(o.scalar_type()) && specs[k].shape.size() == size_t(o.dim());
      for (size_t d = 0; same && d < specs[k].shape.size(); ++d) {
        const bool torch_symbolic = k < out_sizes.size() && d < out_sizes[k].size() &&
                                    std::holds_alternative<std::string>(out_sizes[k][d]);
        same = torch_symbolic ? specs[k].shape[d] < 0 : specs[k].shape[d] == o.size(static_cast<int64_t>(d));
      }
      if (!same)
        return py::str("catalog op " + catalog + " gives output " + std::to_string(k) + " " +
                       graph_.shape_string(specs[k].shape) + " where PyTorch gives " + c10::str(o.sizes()) + " " +
                       c10::toString(o.scalar_type()));
    }
    const std::vector<hal::Graph::Value> outs = graph_.add_node(catalog, ins, attrs, specs);
    py::list result;
    for (size_t r = 0; r < returns.size(); ++r) {
      if (return_output[r] < 0) {
        result.append(py::none());
        continue;
      }
      const at::Tensor& t = returns[r];
      values_[t.unsafeGetTensorImpl()] = outs[return_output[r]];
      keep_.push_back(t);
      result.append(py::cast(t));
    }
    ++nodes_;
    return result;
  }

  // Makes META stand for the value OF stands for (a clone only read: graph
  // values are contiguous and never written, so it needs no node).
  void same_value(const at::Tensor& meta, const at::Tensor& of) {
    auto it = values_.find(of.unsafeGetTensorImpl());
    TORCH_CHECK(meta.is_meta() && it != values_.end(), "torch_hal: same_value of a tensor that is not a value of the segment");
    values_[meta.unsafeGetTensorImpl()] = it->second;
    keep_.push_back(meta);
  }

  void mark_output(const at::Tensor& t) {
    auto it = values_.find(t.unsafeGetTensorImpl());
    TORCH_CHECK(it != values_.end(), "torch_hal: mark_output of a tensor that is not a value of the segment");
    graph_.mark_output(it->second);
    out_dtypes_.push_back(t.scalar_type());
  }

  // OUTPUT_ALIASES: (output index, input index) pairs the run may write in
  // place (CompileOptions::output_aliases): a write-back into the input.
  std::shared_ptr<Segment> compile(bool fold, std::vector<std::pair<size_t, size_t>> output_aliases = {}) {
    const std::shared_ptr<hal::Device>& home = device(dev_);
    hal::CompileOptions co = segment_compile_options(home);
    co.output_aliases = output_aliases;
    hal::PipelineOptions po;
    po.fold_device = fold ? home.get() : nullptr;
    hal::Graph g = hal::run_pipeline(graph_, po);
    TORCH_CHECK(output_aliases.empty() || (g.inputs().size() == graph_.inputs().size() &&
                                           g.outputs().size() == graph_.outputs().size()),
                "torch_hal: the graph pipeline changed a segment's inputs or outputs; its output aliases would "
                "name others");
    hal::CompiledGraph c = hal::compile(g, co);
    return std::make_shared<Segment>(std::move(g), std::move(c), out_dtypes_, dev_, std::move(output_aliases));
  }

  const std::vector<std::string>& input_names() const { return input_names_; }
  size_t nodes() const { return nodes_; }
  std::string dump() const { return graph_.dump(); }

 private:
  struct Pending {
    at::Tensor tensor;
    std::vector<SymDim> sizes;
    std::string name;
  };

  std::vector<int64_t> symbolic(const std::vector<SymDim>& sizes) {
    std::vector<int64_t> out;
    for (const SymDim& d : sizes)
      out.push_back(std::holds_alternative<int64_t>(d) ? std::get<int64_t>(d) : graph_.symbol(std::get<std::string>(d)));
    return out;
  }

  // A reshape whose target has symbolic sizes: each the input's dim at the
  // same position is 0 with copy_zeros, at most one other is -1 (as the
  // ONNX front end writes them). False when that cannot express it.
  bool reshape_attrs(std::vector<hal::Attr>& attrs, const hal::ValueSpec* in, const std::vector<SymDim>& out) {
    std::vector<int64_t> shape;
    bool zeros = false, inferred = false, concrete_zero = false;
    for (size_t j = 0; j < out.size(); ++j) {
      if (std::holds_alternative<int64_t>(out[j])) {
        shape.push_back(std::get<int64_t>(out[j]));
        concrete_zero = concrete_zero || shape.back() == 0;
        continue;
      }
      const int64_t sym = graph_.symbol(std::get<std::string>(out[j]));
      if (j < in->shape.size() && in->shape[j] == sym) {
        shape.push_back(0);
        zeros = true;
      } else {
        if (inferred) return false;
        shape.push_back(-1);
        inferred = true;
      }
    }
    if (!zeros && !inferred) return true;  // concrete: the conversion's shape stands
    if (zeros && concrete_zero) return false;
    attrs = {hal::Attr::ints("shape", shape), hal::Attr::b("copy_zeros", zeros)};
    return true;
  }

  c10::DeviceIndex dev_;
  hal::Graph graph_;
  std::unordered_map<const c10::TensorImpl*, hal::Graph::Value> values_;
  std::unordered_map<const c10::TensorImpl*, Pending> pending_;
  std::vector<at::Tensor> keep_;  // the tensors values_ is keyed by stay alive
  std::vector<std::string> input_names_;
  std::vector<c10::ScalarType> out_dtypes_;
  size_t nodes_ = 0;
};

py::dict part_stats(const hal::CompiledGraphStats& s) {
  py::dict d;
  d["groups"] = s.groups;
  d["kernels"] = s.kernel_count;
  d["op_nodes"] = s.op_nodes;
  d["alias_nodes"] = s.alias_nodes;
  d["fallback_nodes"] = s.fallback_nodes;
  d["cache"] = s.cache == hal::CacheSource::kCompiled ? "compiled" : s.cache == hal::CacheSource::kMemory ? "memory" : "disk";
  d["compiled"] = s.compiled;
  d["deserialized"] = s.deserialized;
  return d;
}

}  // namespace

void bind_lowering(py::module_& m) {
  py::class_<SegmentBuilder>(m, "_SegmentBuilder")
      .def(py::init<int>(), py::arg("device"))
      .def("declare", &SegmentBuilder::declare)
      .def("constant", &SegmentBuilder::constant)
      .def("lower", &SegmentBuilder::lower)
      .def("same_value", &SegmentBuilder::same_value)
      .def("mark_output", &SegmentBuilder::mark_output)
      .def("input_names", &SegmentBuilder::input_names)
      .def("nodes", &SegmentBuilder::nodes)
      .def("dump", &SegmentBuilder::dump)
      .def("compile", &SegmentBuilder::compile, py::arg("fold") = false,
           py::arg("output_aliases") = std::vector<std::pair<size_t, size_t>>{});
  py::class_<Segment, std::shared_ptr<Segment>>(m, "_Segment")
      .def("run", &Segment::run, py::arg("inputs"), py::arg("write_back") = std::vector<at::Tensor>{})
      .def("set_input_permutes", &Segment::set_input_permutes)
      .def("set_write_backs", &Segment::set_write_backs)
      .def("set_transient_outputs", &Segment::set_transient_outputs)
      .def("set_view_outputs", &Segment::set_view_outputs)
      .def("explain",
           [](const Segment& s) {
             std::string text;
             for (const std::string& f : s.failovers()) text += "failover: " + f + "\n";
             return text + s.compiled().explain();
           })
      .def("graph_dump", [](const Segment& s) { return s.graph().dump(); })
      .def("node_count", [](const Segment& s) { return s.graph().nodes().size(); })
      .def("output_aliases", [](const Segment& s) { return s.compiled().output_aliases(); })
      .def("in_place_write_backs", &Segment::in_place_write_backs)
      .def("stats", [](const Segment& s) { return part_stats(s.compiled().stats()); })
      .def("failovers", &Segment::failovers);
  m.def(
      "_alias",
      [](const at::Tensor& t) {
        const bool plain = t.layout() == at::kStrided && t.unsafeGetTensorImpl()->has_storage();
        return plain ? restrided(t, t.sizes(), t.strides()) : t.alias();
      },
      py::arg("tensor"),
      "T's bytes as another tensor: not an autograd view (a compiled graph's aliased output, as inductor "
      "returns one), sharing T's version counter.");
  m.def("_hal_compile_counters", [] {
    const hal::CompileCacheCounters c = hal::compile_cache_counters();
    py::dict d;
    d["graph_compiles"] = c.graph_compiles;
    d["deserializations"] = c.deserializations;
    d["memory_hits"] = c.memory_hits;
    d["disk_hits"] = c.disk_hits;
    d["rebuilt_entries"] = c.rebuilt_entries;
    return d;
  });
}

}  // namespace torch_hal
