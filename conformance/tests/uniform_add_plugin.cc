// Test plugin for hal-conformance's declined reporting and --through-core:
// the template's device and memory (templates/plugin/template_plugin.cc)
// with one uniform float32 `add` (out = self + alpha * other), as a vendor
// writes it first: its kernel reads float32 only, so the SDK declines mixed
// calls with HAL_STATUS_MIXED_DTYPES, and it has no `copy` op, so libhal
// casts through the fallback device. Built as hal_plugin_fixture_uniform_add
// (conformance/CMakeLists.txt).
#include <cstdint>
#include <cstring>
#include <memory>

#include "hal/sdk/kernel/strided.hpp"
#include "hal/sdk/ops.hpp"
#include "template_plugin.hpp"

namespace hal_template {
namespace {

namespace sdk = hal::sdk;

char* host_data(const sdk::Tensor& t) { return static_cast<char*>(t.data); }

void add_float32(const std::shared_ptr<const sdk::OpCall>& call, sdk::Stream* stream) {
  require_no_stream(stream);
  const sdk::Tensor& self = sdk::op::add::self(*call);
  const sdk::Tensor& other = sdk::op::add::other(*call);
  const sdk::Tensor& out = sdk::op::add::out(*call);
  const float alpha = static_cast<float>(sdk::op::add::alpha(*call).to_double());
  sdk::kernel::StridedLoop<3> loop(out, {&out, &self, &other});
  loop.run({host_data(out), host_data(self), host_data(other)}, 0, loop.numel(),
           [&](char* const* p, const int64_t* step, int64_t n) {
             for (int64_t i = 0; i < n; ++i) {
               float a, b;
               std::memcpy(&a, p[1] + i * step[1], sizeof a);  // tensors need not be aligned
               std::memcpy(&b, p[2] + i * step[2], sizeof b);
               float r = a + alpha * b;
               std::memcpy(p[0] + i * step[0], &r, sizeof r);
             }
           });
}

}  // namespace

void register_template_ops(sdk::OpRegistry& ops) {
  ops.add<sdk::op::add>(&add_float32, HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32), sdk::InputMode::kUniform);
}

}  // namespace hal_template

HAL_SDK_PLUGIN(hal_template::TemplatePlugin, "fixture_uniform_add", "HAL tests", hal_template::kPluginVersion)
