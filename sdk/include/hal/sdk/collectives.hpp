// HAL C++ SDK: include in the translation unit with HAL_SDK_PLUGIN when
// the plugin class's kInterfaces has HAL_CAPABILITY_COLLECTIVE. It
// completes the collective table (hal/collective.h): devices that do not
// override Device::create_communicator get the SDK's host communicator
// (hal/sdk/collective/host_communicator.hpp: shared memory between the
// processes of one host). Header-only; Linux.
#ifndef HAL_SDK_COLLECTIVES_HPP_
#define HAL_SDK_COLLECTIVES_HPP_

#include "hal/sdk/detail/collective_entries.hpp"
#include "hal/sdk/plugin.hpp"

namespace hal::sdk::detail {

template <class P>
struct CollectiveTable<P, true> {
  static const hal_collective_api_t* get() { return &kCollectiveApi; }
};

}  // namespace hal::sdk::detail

#endif  // HAL_SDK_COLLECTIVES_HPP_
