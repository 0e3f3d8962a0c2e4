// Loads one plugin through the installed libhal (hal::runtime) and round-trips
// bytes through its first device: allocate, fill, host->device,
// device->device, device->host. For the template plugin this also checks
// that it does not claim streams and refuses to create one.
//
//   hal_package_test <plugin .so> <expected plugin name>
// Exit 0 and "ok" on success; 1 and the reason otherwise.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "hal/runtime/runtime.hpp"

namespace {

int failed(const std::string& why) {
  std::fprintf(stderr, "hal_package_test: %s\n", why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return failed("usage: hal_package_test <plugin .so> <expected plugin name>");
  const std::string path = argv[1], name = argv[2];
  try {
    hal::RuntimeOptions options;
    options.plugin_paths = {path};
    options.use_environment = false;  // the caller's HAL_CONFIG must not leak in
    options.use_install_dir = false;
    auto rt = hal::Runtime::create(options);
    if (!rt->skipped().empty())
      return failed("skipped " + rt->skipped()[0].path + ": " + rt->skipped()[0].message);
    if (rt->plugins().size() != 1 || rt->plugins()[0]->name() != name)
      return failed("expected exactly the plugin '" + name + "' from " + path);
    if (rt->devices().empty()) return failed("plugin '" + name + "' has no devices");

    std::shared_ptr<hal::Device> device = rt->devices()[0];
    constexpr uint64_t kSize = 4096;
    std::vector<uint8_t> pattern(100);
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 7 + 1);

    hal::Buffer a = device->allocate(kSize);
    a.fill(0x5a, kSize);
    a.copy_from_host(pattern.data(), pattern.size(), /*offset=*/10);
    hal::Buffer b = device->allocate(kSize);
    b.copy_from(a, kSize);
    std::vector<uint8_t> back(kSize);
    b.copy_to_host(back.data(), kSize);
    for (uint64_t i = 0; i < kSize; ++i) {
      uint8_t want = (i >= 10 && i < 10 + pattern.size()) ? pattern[i - 10] : 0x5a;
      if (back[i] != want)
        return failed(device->id() + ": byte " + std::to_string(i) + " is " + std::to_string(back[i]) +
                      ", expected " + std::to_string(want));
    }

    if (!device->supports(HAL_CAPABILITY_STREAM)) {
      // A device without streams must say so when asked for one.
      try {
        device->create_stream();
        return failed(device->id() + " does not claim streams but created one");
      } catch (const hal::Error& e) {
        if (e.code() != HAL_STATUS_UNIMPLEMENTED)
          return failed(std::string("create_stream: expected UNIMPLEMENTED, got ") +
                        hal::status_code_name(e.code()) + ": " + e.what());
      }
    }
    std::printf("ok: %s (%s) round-tripped %llu bytes\n", device->id().c_str(), device->properties().name,
                static_cast<unsigned long long>(kSize));
    return 0;
  } catch (const std::exception& e) {
    return failed(e.what());
  }
}
