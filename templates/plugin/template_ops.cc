// The template plugin's op kernels: one working `add` (out = self +
// alpha * other) in float32, so hal-conformance passes op.add.float32
// before you change anything. Also the plugin's entry point (HAL_SDK_PLUGIN, at
// the end): a plugin with operators needs the op tables in the file that
// has it, and the memory part (template_plugin.cc) stays free of the op
// catalog.
//
// The SDK checks every call against the op catalog before a kernel runs
// (dtypes, broadcast shapes, the output's shape and dtype, buffer ranges,
// attributes), so a kernel only computes. Kernels are uniform (the SDK's
// default, InputMode::kUniform): every input arrives in the dtype the call
// computes in, so the float32 add reads float32 and nothing else. A call
// with inputs of other dtypes (int32 + float32, a 0-d float64 with a float32
// tensor) never reaches it: the SDK declines it with HAL_STATUS_MIXED_DTYPES
// and libhal's op launch casts those inputs and launches again.
//
// Kernels for host-accessible memory can use the SDK's helpers in
// hal/sdk/kernel/: strided.hpp (StridedLoop: walks strided, broadcast
// operands), reduce.hpp (ReduceIter: a reduction's geometry, with
// hal::sdk::shape_rules::reduce_mask for its dims), rows.hpp (rows of a
// normalization), wrap.hpp (wrap_dim: negative dims) and dispatch.hpp (the
// C++ type of a dtype, for a kernel registered for several dtypes). docs/vendor_guide.md in the HAL
// source adds mul, relu, mm, sum, softmax and layer_norm to this file, step
// by step (and names the helpers for reductions and rows).
#include <cstdint>
#include <cstring>
#include <memory>

#include "hal/sdk/kernel/strided.hpp"
#include "hal/sdk/ops.hpp"
#include "template_plugin.hpp"

namespace hal_template {
namespace {

namespace sdk = hal::sdk;
namespace kernel = hal::sdk::kernel;

// One float32 element at P. A view may start at any byte offset, so a
// float32 tensor need not be 4-byte aligned: memcpy, not a float*.
float load(const char* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void store(char* p, float v) { std::memcpy(p, &v, sizeof v); }

char* host_data(const sdk::Tensor& t) { return static_cast<char*>(t.data); }

// out = self + alpha * other, all float32, every tensor with its own shape
// and element strides (any layout; a broadcast input has its own, smaller
// shape).
void add_kernel(const std::shared_ptr<const sdk::OpCall>& call, sdk::Stream* stream) {
  // TODO(vendor): with streams, enqueue the launch on STREAM (keeping CALL
  // alive until it ran) instead of running it before returning.
  require_no_stream(stream);
  const sdk::Tensor& self = sdk::op::add::self(*call);
  const sdk::Tensor& other = sdk::op::add::other(*call);
  const sdk::Tensor& out = sdk::op::add::out(*call);
  const float alpha = static_cast<float>(sdk::op::add::alpha(*call).to_double());

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
             for (int64_t i = 0; i < n; ++i)
               store(p[0] + i * step[0], load(p[1] + i * step[1]) + alpha * load(p[2] + i * step[2]));
           });
}

}  // namespace

void register_template_ops(sdk::OpRegistry& ops) {
  // One line per op and compute dtype (names and arguments: docs/ops.md,
  // hal/sdk/op_catalog.hpp); the SDK refuses the other dtypes with
  // UNSUPPORTED_DTYPE, which hal-conformance reports as skipped. A kernel
  // for another dtype is another function and another line.
  // TODO(vendor): your ops, then run hal-conformance on each.
  ops.add<sdk::op::add>(&add_kernel, HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32));
}

}  // namespace hal_template

// TODO(vendor): your plugin's name ([a-z0-9_]+, unique; it becomes the device
// id prefix "template:0") and your company's name.
HAL_SDK_PLUGIN(hal_template::TemplatePlugin, "template", "Example Vendor", hal_template::kPluginVersion)
