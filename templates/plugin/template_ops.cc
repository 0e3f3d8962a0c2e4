// The template plugin's op kernels: one working `add` (out = self +
// alpha * other) computed in float32, so hal-conformance passes
// op.add.float32 on the template as copied. Also the plugin's entry point
// (HAL_SDK_PLUGIN, at the end): a plugin with operators needs the op tables
// in the file that has it, and the memory part (template_plugin.cc) stays
// free of the op catalog.
//
// The SDK checks every call against the op catalog before a kernel runs
// (dtypes, broadcast shapes, the output's shape and dtype, buffer ranges,
// attributes), so a kernel only computes. Kernels for host-accessible
// memory can use the SDK's helpers: hal/sdk/kernel/strided.hpp (StridedLoop:
// walks strided, broadcast operands) and hal/sdk/kernel/dispatch.hpp (the
// C++ type of a dtype).
#include <cstdint>
#include <cstring>
#include <memory>

#include "hal/sdk/kernel/dispatch.hpp"
#include "hal/sdk/kernel/strided.hpp"
#include "hal/sdk/ops.hpp"
#include "template_plugin.hpp"

namespace hal_template {
namespace {

namespace sdk = hal::sdk;
namespace kernel = hal::sdk::kernel;

// The computing dtypes (OpCall::common_dtype) the add kernel implements; the
// SDK refuses the others with UNSUPPORTED_DTYPE, which hal-conformance
// reports as skipped. The output always has the computing dtype.
// TODO(vendor): the dtypes your device's add computes in (kFloatDtypes ...),
// with a kernel that writes each of them.
constexpr uint64_t kAddDtypes = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32);

// Reads one element of dtype DTYPE at P as float. An input's dtype may
// differ from the float32 the call computes in: the catalog promotes
// int32 + float32, float16 + bfloat16 and a 0-d float64 with a float32
// tensor to float32, and the kernel must convert such inputs, not reinterpret
// their bits. TODO(vendor): if your device kernel reads float32 inputs only,
// decline the other input dtypes instead: override Device::check_op and
// throw UNSUPPORTED_DTYPE with the reason (callers then convert first, and
// hal-conformance skips those cases).
using LoadFn = float (*)(const char* p);
LoadFn load_as_float(uint32_t dtype) {
  return kernel::dispatch(dtype, [](auto tag) -> LoadFn {
    using T = typename decltype(tag)::type;
    return [](const char* p) {
      T v;
      std::memcpy(&v, p, sizeof v);  // tensors need not be aligned to T
      return static_cast<float>(v);
    };
  });
}

char* host_data(const sdk::Tensor& t) { return static_cast<char*>(t.data); }

// out = self + alpha * other, every tensor with its own shape and element
// strides (any layout; a broadcast input has its own, smaller shape).
void add_kernel(const std::shared_ptr<const sdk::OpCall>& call, sdk::Stream* stream) {
  // TODO(vendor): with streams, enqueue the launch on STREAM (keeping CALL
  // alive until it ran) instead of running it before returning.
  require_no_stream(stream);
  const sdk::Tensor& self = sdk::op::add::self(*call);
  const sdk::Tensor& other = sdk::op::add::other(*call);
  const sdk::Tensor& out = sdk::op::add::out(*call);
  const float alpha = static_cast<float>(sdk::op::add::alpha(*call).to_double());
  const LoadFn load_self = load_as_float(self.dtype);
  const LoadFn load_other = load_as_float(other.dtype);

  // TODO(vendor): replace this host loop with your device's add launch on
  // out.buffer / self.buffer / other.buffer at their byte_offset (your
  // Buffer subclass holds the device pointer; Tensor::data is only set for
  // host-visible memory). StridedLoop gives the geometry to index with:
  // dims of size 1 dropped, contiguous dims merged (a contiguous call is
  // one run of numel() elements), and byte stride 0 along the dims an input
  // is broadcast in (size(d), byte_stride(k, d), k = 0 out, 1 self, 2 other).
  kernel::StridedLoop<3> loop(out, {&out, &self, &other});
  loop.run({host_data(out), host_data(self), host_data(other)}, 0, loop.numel(),
           [&](char* const* p, const int64_t* step, int64_t n) {
             for (int64_t i = 0; i < n; ++i) {
               float r = load_self(p[1] + i * step[1]) + alpha * load_other(p[2] + i * step[2]);
               std::memcpy(p[0] + i * step[0], &r, sizeof r);
             }
           });
}

}  // namespace

void register_template_ops(sdk::OpRegistry& ops) {
  // TODO(vendor): one line per op you implement (names and arguments:
  // docs/ops.md, hal/sdk/op_catalog.hpp), then run hal-conformance on it.
  ops.add<sdk::op::add>(&add_kernel, kAddDtypes);
}

}  // namespace hal_template

// TODO(vendor): your plugin's name ([a-z0-9_]+, unique; it becomes the device
// id prefix "template:0") and your company's name.
HAL_SDK_PLUGIN(hal_template::TemplatePlugin, "template", "Example Vendor", hal_template::kPluginVersion)
