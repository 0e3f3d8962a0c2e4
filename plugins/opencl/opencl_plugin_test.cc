// The OpenCL plugin on the machine's OpenCL platform (PoCL in CI): device
// properties, memory and its errors, the program cache, and the behaviour
// without any OpenCL platform. Op kernels are checked by hal-conformance.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cl_device.hpp"
#include "hal/loader/loaded_plugin.hpp"
#include "hal/runtime/runtime.hpp"
#include "hal/testing/test_util.hpp"
#include "program_cache.hpp"

namespace {

using hal::testing::TempDir;

std::shared_ptr<hal::Device> opencl_device() {
  static std::shared_ptr<hal::Runtime> rt = hal::testing::load_only({HAL_TEST_OPENCL_PLUGIN});
  REQUIRE(rt->skipped().empty());
  REQUIRE(!rt->devices().empty());
  return rt->devices().front();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("opencl: devices carry the OpenCL device's real properties") {
  auto dev = opencl_device();
  const hal_device_properties_t& p = dev->properties();
  CHECK(dev->id() == "opencl:0");
  CHECK(std::string(p.name).size() > 0);
  CHECK(std::string(p.vendor).size() > 0);
  CHECK(std::string(p.driver_version).find("OpenCL") != std::string::npos);
  CHECK(p.total_memory_bytes > (1ull << 28));
  CHECK(p.compute_units >= 1);
  CHECK((p.supported_dtypes & HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32)) != 0);
  CHECK((p.supported_dtypes & HAL_DTYPE_BIT(HAL_DTYPE_FLOAT16)) == 0);  // no kernels for it
  CHECK((p.capabilities & HAL_CAPABILITY_OPERATOR) != 0);
  CHECK((p.flags & HAL_DEVICE_FLAG_HOST_ACCESSIBLE_MEMORY) == 0);
  CHECK(p.min_buffer_alignment >= 8);
}

TEST_CASE("opencl: offsets, overlapping copies, fills and pinned memory") {
  auto dev = opencl_device();
  std::vector<uint8_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  hal::Buffer b = dev->allocate(1000);
  b.copy_from_host(data.data(), 1000);
  // An overlapping device copy behaves as memmove (OpenCL itself refuses it).
  b.copy_from(b, 500, 3, 0);
  std::vector<uint8_t> want = data;
  std::copy(data.begin(), data.begin() + 500, want.begin() + 3);
  b.fill(0xab, 17, 901);
  std::fill(want.begin() + 901, want.begin() + 918, 0xab);
  std::vector<uint8_t> got(1000);
  b.copy_to_host(got.data(), 1000);
  CHECK(got == want);
  // Odd offsets and sizes read back exactly, on a stream too.
  hal::Stream s = dev->create_stream();
  std::vector<uint8_t> part(333);
  b.copy_to_host(part.data(), 333, 77, &s);
  s.synchronize();
  CHECK(std::equal(part.begin(), part.end(), want.begin() + 77));

  void* pinned = nullptr;
  hal::detail::LoadedPlugin const& plugin = dev->plugin();
  REQUIRE(plugin.memory.host_allocate(dev->handle(), 4096, &pinned) == nullptr);
  REQUIRE(pinned != nullptr);
  std::memset(pinned, 0x5a, 4096);
  b.copy_from_host(pinned, 1000);
  b.copy_to_host(got.data(), 1000);
  CHECK(got == std::vector<uint8_t>(1000, 0x5a));
  CHECK(plugin.memory.host_free(dev->handle(), pinned) == nullptr);
}

TEST_CASE("opencl: an allocation beyond CL_DEVICE_MAX_MEM_ALLOC_SIZE is refused by name") {
  auto dev = opencl_device();
  cl_ulong max_alloc = 0;
  // The device's own limit, as the driver reports it.
  cl_platform_id platform;
  REQUIRE(clGetPlatformIDs(1, &platform, nullptr) == CL_SUCCESS);
  cl_device_id id;
  REQUIRE(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &id, nullptr) == CL_SUCCESS);
  REQUIRE(clGetDeviceInfo(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(max_alloc), &max_alloc, nullptr) == CL_SUCCESS);
  if (max_alloc >= dev->properties().total_memory_bytes) {
    MESSAGE("this device allows one allocation of all its memory; nothing to refuse");
    return;
  }
  try {
    (void)dev->allocate(max_alloc + 1);
    FAIL("the allocation succeeded");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_OUT_OF_MEMORY);
    CHECK(std::string(e.what()).find("CL_DEVICE_MAX_MEM_ALLOC_SIZE of " + std::to_string(max_alloc)) !=
          std::string::npos);
  }
  CHECK(dev->allocate(1024).valid());  // nothing broke
}

TEST_CASE("opencl: a kernel build failure reports the compiler's build log") {
  cl_platform_id platform;
  REQUIRE(clGetPlatformIDs(1, &platform, nullptr) == CL_SUCCESS);
  cl_device_id id;
  REQUIRE(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &id, nullptr) == CL_SUCCESS);
  cl_int err = CL_SUCCESS;
  cl_context ctx = clCreateContext(nullptr, 1, &id, nullptr, nullptr, &err);
  REQUIRE(err == CL_SUCCESS);
  TempDir dir;
  {
    hal::opencl::ProgramCache cache(ctx, id, hal::opencl::ProgramCache::device_key(platform, id), dir.path());
    const std::string bad = "__kernel void broken(__global float* x) { x[0] = no_such_symbol_here; }\n";
    try {
      cache.kernel(bad, "broken");
      FAIL("the broken kernel built");
    } catch (const hal::sdk::Error& e) {
      std::string m = e.what();
      CHECK(e.code() == HAL_STATUS_DEVICE_ERROR);
      CHECK(m.find("clBuildProgram failed") != std::string::npos);
      CHECK(m.find("kernel 'broken'") != std::string::npos);
      CHECK(m.find("build log:") != std::string::npos);
      CHECK(m.find("no_such_symbol_here") != std::string::npos);  // the compiler's own words
    }
    // A good kernel still builds, and its binary lands in the cache directory.
    cache.kernel("__kernel void ok(__global float* x) { x[get_global_id(0)] = 1.0f; }\n", "ok");
    CHECK(cache.stats().built == 2);
  }
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.path().extension() == ".bin";
  CHECK(files == 1);
  clReleaseContext(ctx);
}

TEST_CASE("opencl: a second process start builds no program (the disk cache)") {
  TempDir dir;
  std::string stats = dir / "stats.txt";
  // Fresh caches (ours and PoCL's own) shared by the two runs.
  std::string env = "HAL_OPENCL_CACHE_DIR=" + (dir / "kernels") + " POCL_CACHE_DIR=" + (dir / "pocl") +
                    " HAL_OPENCL_STATS=" + stats + " ";
  std::string cmd = env + HAL_TEST_CONFORMANCE + std::string(" --plugin ") + HAL_TEST_OPENCL_PLUGIN +
                    " --no-runtime-tests --dtype float32 -f 'gelu*' 2>/dev/null";
  auto first = hal::testing::run_command(cmd);
  REQUIRE_MESSAGE(first.exit_code == 0, first.output);
  auto second = hal::testing::run_command(cmd);
  REQUIRE_MESSAGE(second.exit_code == 0, second.output);
  std::string lines = read_file(stats);
  INFO(lines);
  size_t nl = lines.find('\n');
  REQUIRE(nl != std::string::npos);
  std::string run1 = lines.substr(0, nl), run2 = lines.substr(nl + 1);
  CHECK(run1.find("programs_built=0") == std::string::npos);  // the first run compiled
  CHECK(run2.find("programs_built=0 ") != std::string::npos);  // the second compiled nothing
  CHECK(run2.find("programs_loaded=0") == std::string::npos);  // it loaded binaries instead
}

TEST_CASE("opencl: without any OpenCL platform the plugin loads with zero devices and says why") {
  TempDir vendors;  // an ICD loader with an empty vendors directory finds no platform
  auto r = hal::testing::run_command("OCL_ICD_VENDORS=" + vendors.path() + " " + HAL_TEST_HAL_INFO +
                                     " --json --plugin " + HAL_TEST_OPENCL_PLUGIN + " 2>/dev/null");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(r.output.find("\"name\": \"opencl\"") != std::string::npos);
  CHECK(r.output.find("\"devices\": []") != std::string::npos);
  CHECK(r.output.find("no OpenCL platform found") != std::string::npos);
  CHECK(r.output.find("\"skipped\": []") != std::string::npos);
}
