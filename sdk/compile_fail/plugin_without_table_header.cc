// Must NOT compile: a plugin that declares an interface (CAPABILITY, given
// with -D) in kInterfaces, with HAL_SDK_PLUGIN in a file that does not
// include the header with that interface's table (hal/sdk/ops.hpp,
// hal/sdk/collectives.hpp). sdk.missing_table_header_* checks that the
// compiler's message names the header to include.
#include "hal/sdk/plugin.hpp"

namespace {
class ForgetfulPlugin final : public hal::sdk::Plugin {
 public:
  static constexpr uint32_t kInterfaces = HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY | CAPABILITY;
  explicit ForgetfulPlugin(const hal::sdk::Options&) {}
};
}  // namespace

HAL_SDK_PLUGIN(ForgetfulPlugin, "forgetful", "Example Vendor", "0.1.0")
