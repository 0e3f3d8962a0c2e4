// torch_hal transfers: every byte that moves between host and device or
// inside a device, and every catalog-op launch, goes through here (never
// through host pointers of device memory), so stream ordering has one home.
//
// Everything runs on the device's current stream. On the default stream
// (HAL's synchronous NULL stream) it has completed on return; on a pool
// stream it is queued. A download then waits for the stream (the caller
// reads the bytes next); an upload copies its source into a staging tensor
// the stream releases once the copy has run, so the caller may change its
// tensor at once without the host waiting for the stream (as CUDA stages
// pageable memory for copies with non_blocking=False).
#include <ATen/ATen.h>

#include "backend.hpp"
#include "mapping.hpp"

namespace torch_hal {
namespace {
void release_staging(void* tensor) { delete static_cast<at::Tensor*>(tensor); }

// Copies NBYTES of T's storage from byte OFFSET into HOST on T's current
// stream and waits for it (the caller reads HOST next).
void read_storage(const at::Tensor& t, void* host, uint64_t nbytes, uint64_t offset) {
  const c10::DeviceIndex dev = t.device().index();
  const hal::Stream* stream = current_hal_stream(dev);
  buffer_of(t).copy_to_host(host, nbytes, offset, stream);
  if (stream != nullptr) synchronize_stream(current_stream(dev));
}

// The storage span of T's view, as a 1-D CPU tensor of T's dtype.
at::Tensor download_span(const at::Tensor& t) {
  const auto [begin, end] = byte_span(t);
  at::Tensor span = at::empty({(end - begin) / t.element_size()}, t.options().device(at::kCPU));
  read_storage(t, span.data_ptr(), span.nbytes(), begin);
  return span;
}

// Writes SPAN (from download_span(t)) back over T's storage span.
void upload_span(const at::Tensor& span, const at::Tensor& t) {
  const c10::DeviceIndex dev = t.device().index();
  const hal::Stream* stream = current_hal_stream(dev);
  buffer_of(t).copy_from_host(span.data_ptr(), span.nbytes(), byte_span(t).first, stream);
  if (stream != nullptr) synchronize_stream(current_stream(dev));  // SPAN is freed on return
}

// DST = SRC through the host, strides and dtypes included, for a copy the
// device cannot do. Never re-enters device_copy (whose copy just declined).
void host_copy(const at::Tensor& src, const at::Tensor& dst) {
  at::Tensor from = download_span(src), to = download_span(dst);
  to.as_strided(dst.sizes(), dst.strides()).copy_(from.as_strided(src.sizes(), src.strides()));
  upload_span(to, dst);
}
}  // namespace

void launch(c10::DeviceIndex dev, const std::string& catalog, const std::vector<const hal::TensorView*>& inputs,
            const std::vector<const hal::TensorView*>& outputs, const std::vector<hal::Attr>& attrs) {
  op_runner(dev, catalog).launch(inputs, outputs, attrs, current_hal_stream(dev));
}

void launch(const hal::OpRunner& runner, c10::DeviceIndex dev, const std::vector<const hal::TensorRef*>& inputs,
            const std::vector<const hal::TensorRef*>& outputs, const std::vector<hal::Attr>& attrs) {
  runner.launch(inputs.data(), inputs.size(), outputs.data(), outputs.size(), attrs, current_hal_stream(dev));
}

bool declined(const hal::Error& e) noexcept {
  return e.code() == HAL_STATUS_UNIMPLEMENTED || e.code() == HAL_STATUS_UNSUPPORTED_DTYPE ||
         e.code() == HAL_STATUS_MIXED_DTYPES;
}

void raise_plugin_error(const std::string& what, c10::DeviceIndex dev, const hal::Error& e) {
  const std::string msg =
      what + " on hal:" + std::to_string(dev) + " (plugin " + device(dev)->plugin_name() + "): " + e.what() +
      lost_device_hint(dev);
  if (e.code() == HAL_STATUS_INVALID_ARGUMENT) TORCH_CHECK_VALUE(false, msg);
  if (e.code() == HAL_STATUS_OUT_OF_RANGE) TORCH_CHECK_INDEX(false, msg);
  TORCH_CHECK(false, msg);
}

void launch(const hal::OpRunner& runner, c10::DeviceIndex dev, c10::ArrayRef<at::Tensor> inputs,
            c10::ArrayRef<at::Tensor> outputs, const std::vector<hal::Attr>& attrs) {
  // Descriptors over the tensors' own sizes (they outlive the launch).
  std::vector<hal::TensorRef> refs;
  refs.reserve(inputs.size() + outputs.size());
  std::vector<const hal::TensorRef*> ins, outs;
  for (const at::Tensor& t : inputs) {
    if (!t.defined()) {
      ins.push_back(nullptr);
      continue;
    }
    refs.push_back(ref_of(t));
    ins.push_back(&refs.back());
  }
  for (const at::Tensor& t : outputs) {
    refs.push_back(ref_of(t));
    outs.push_back(&refs.back());
  }
  launch(runner, dev, ins, outs, attrs);
}

std::optional<std::vector<at::Tensor>> run_catalog(const char* aten, const char* catalog, const at::Tensor& ref,
                                                   std::initializer_list<at::Tensor> inputs,
                                                   std::initializer_list<OutputSpec> outputs) {
  const c10::DeviceIndex dev = ref.device().index();
  try {
    const hal::OpRunner& runner = op_runner(dev, catalog);
    std::vector<at::Tensor> outs;
    for (const OutputSpec& o : outputs) outs.push_back(empty_dense(o.shape, o.dtype, dev));
    const std::string name(aten);
    if (explaining()) record_catalog_run(name.rfind("aten::", 0) == 0 ? name.substr(6) : name, catalog, dev);
    launch(runner, dev, std::vector<at::Tensor>(inputs), outs, {});
    return outs;
  } catch (const hal::Error& e) {
    if (declined(e)) return std::nullopt;
    raise_plugin_error(aten, dev, e);
  }
}

at::Tensor download(const at::Tensor& t) {
  at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU));
  if (t.numel() == 0) return host;
  at::Tensor dense = t;
  if (!t.is_contiguous()) {
    dense = at::empty(t.sizes(), t.options());
    device_copy(t, dense);
  }
  read_storage(dense, host.data_ptr(), dense.nbytes(), dense.storage_offset() * dense.element_size());
  return host;
}

void upload(const at::Tensor& src, const at::Tensor& dst) {
  if (dst.numel() == 0) return;
  const c10::DeviceIndex dev = dst.device().index();
  const hal::Stream* stream = current_hal_stream(dev);
  at::Tensor staged = src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  if (stream != nullptr && staged.is_alias_of(src)) staged = staged.clone();
  at::Tensor dense = dst;
  if (!dst.is_contiguous()) dense = at::empty(dst.sizes(), dst.options());
  buffer_of(dense)
      .copy_from_host(staged.data_ptr(), staged.nbytes(), dense.storage_offset() * dense.element_size(),
                              stream);
  if (stream != nullptr) {
    auto* keep = new at::Tensor(std::move(staged));
    try {
      stream->enqueue_host_func(&release_staging, keep);
    } catch (...) {
      try {
        synchronize_stream(current_stream(dev));  // the queued copy may still read it
      } catch (...) {  // the enqueue failure is the error to report
      }
      delete keep;
      throw;
    }
  }
  if (!dense.is_same(dst)) device_copy(dense, dst);
}

void device_copy(const at::Tensor& src, const at::Tensor& dst) {
  if (dst.numel() == 0) return;
  // Overlapping views of one storage (pad's circular copies): plugins copy
  // only disjoint or identical ranges, so partial overlap goes through a temporary.
  if (src.storage().is_alias_of(dst.storage()) && !same_view(src, dst)) {
    const auto s = byte_span(src), d = byte_span(dst);
    if (s.first < d.second && d.first < s.second) {
      const at::Tensor tmp = at::empty(src.sizes(), src.options());
      device_copy(src, tmp);
      device_copy(tmp, dst);
      return;
    }
  }
  if (src.scalar_type() == dst.scalar_type() && src.sizes() == dst.sizes() && src.is_contiguous() &&
      dst.is_contiguous()) {
    buffer_of(dst)
        .copy_from(buffer_of(src), dst.nbytes(),
                           dst.storage_offset() * dst.element_size(), src.storage_offset() * src.element_size(),
                           current_hal_stream(dst.device().index()));
    return;
  }
  if (dst.dim() > HAL_TENSOR_MAX_RANK) {
    // HAL tensors have at most HAL_TENSOR_MAX_RANK dims; PyTorch's views may have more (repeat()
    // copies through unfolded views of twice the input's rank): without the size-1 dims, then
    // slice by slice along dim 0 until the rest fits.
    const at::Tensor s = src.expand(dst.sizes());
    c10::SmallVector<int64_t, 16> ones;
    for (int64_t d = 0; d < dst.dim(); ++d)
      if (dst.size(d) == 1) ones.push_back(d);
    if (!ones.empty()) {
      device_copy(s.squeeze(ones), dst.squeeze(ones));
      return;
    }
    for (int64_t i = 0; i < dst.size(0); ++i) device_copy(s.select(0, i), dst.select(0, i));
    return;
  }
  if (!hal_dtype_of(src.scalar_type()) || !hal_dtype_of(dst.scalar_type())) {
    count_fallback("aten::copy_", std::string("no HAL dtype for ") + c10::toString(src.scalar_type()) + " -> " +
                                      c10::toString(dst.scalar_type()));
    host_copy(src, dst);
    return;
  }
  const hal::TensorView in = view_of(src), out = view_of(dst);
  try {
    launch(dst.device().index(), "copy", {&in}, {&out});
  } catch (const hal::Error& e) {
    if (e.code() != HAL_STATUS_UNIMPLEMENTED && e.code() != HAL_STATUS_UNSUPPORTED_DTYPE) throw;
    count_fallback("aten::copy_", e.what());
    host_copy(src, dst);
  }
}

void apply_math_bits(const at::Tensor& t, bool conj, bool neg) {
  if ((!conj && !neg) || t.numel() == 0) return;
  at::Tensor span = download_span(t);  // raw elements: no bits on the host copy
  at::Tensor view = span.as_strided(t.sizes(), t.strides());
  if (conj) view.copy_(view.conj_physical());
  if (neg) view.neg_();
  upload_span(span, t);
}

}  // namespace torch_hal
