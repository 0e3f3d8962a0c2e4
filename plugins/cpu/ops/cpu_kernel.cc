#include "cpu_kernel.hpp"

#include <exception>
#include <string>

#include "../cpu_stream.hpp"

namespace hal::cpu {

void run_on_stream(const CallPtr& call, sdk::Stream* stream, void (*body)(const OpCall&)) {
  if (stream == nullptr) {
    body(*call);  // synchronous: errors reach the caller as a status
    return;
  }
  auto* cpu_stream = static_cast<CpuStream*>(stream);
  // Errors found in the data (an index out of range) surface at the
  // stream's next synchronize, as on a real device.
  cpu_stream->enqueue([call, body, cpu_stream] {
    try {
      body(*call);
    } catch (const sdk::Error& e) {
      cpu_stream->record_error(e);
    } catch (const std::exception& e) {
      cpu_stream->record_error(sdk::Error(HAL_STATUS_INTERNAL, std::string(call->name()) + ": " + e.what()));
    }
  });
}

Tensor cast_contiguous(const Tensor& src, hal_dtype_e dtype, std::vector<unsigned char>& storage) {
  Tensor out = src;
  out.dtype = dtype;
  out.set_contiguous_strides();
  out.byte_offset = 0;
  out.buffer = nullptr;
  storage.assign(static_cast<size_t>(src.numel()) * sdk::dtype_size(dtype) + 1, 0);
  out.data = storage.data();
  sdk::kernel::dispatch(dtype, [&](auto to) {
    using To = typename decltype(to)::type;
    sdk::kernel::dispatch(src.dtype, [&](auto from) {
      using From = typename decltype(from)::type;
      map<To, From>(out, {&src}, [](auto x) {
        if constexpr (std::is_same_v<To, bool>) return x != 0;
        else return static_cast<sdk::kernel::compute_t<To>>(x);
      });
    });
  });
  return out;
}

}  // namespace hal::cpu
