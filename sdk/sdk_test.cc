// The SDK's boundary helpers: statuses, exception conversion, options.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <unordered_map>

#include "hal/sdk/plugin.hpp"

using hal::sdk::Error;

namespace {
std::string take(hal_status_t* s, uint32_t* code = nullptr) {
  REQUIRE(s != nullptr);
  REQUIRE(s->struct_size >= sizeof(hal_status_t));
  std::string m = s->message;
  if (code) *code = s->code;
  s->destroy(s);
  return m;
}
}  // namespace

TEST_CASE("make_status owns a copy of the message and frees itself") {
  std::string text = "cpu: buffer_allocate: size 0";
  hal_status_t* s = hal::sdk::make_status(HAL_STATUS_INVALID_ARGUMENT, text);
  text.assign("changed");
  uint32_t code = 0;
  CHECK(take(s, &code) == "cpu: buffer_allocate: size 0");
  CHECK(code == HAL_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("guard turns every exception into a status naming plugin and call") {
  uint32_t code = 0;
  CHECK(hal::sdk::guard("p", "c", [] {}) == nullptr);
  CHECK(take(hal::sdk::guard("p", "call", [] { hal::sdk::fail(HAL_STATUS_OUT_OF_RANGE, "index ", 7); }), &code) ==
        "p: call: index 7");
  CHECK(code == HAL_STATUS_OUT_OF_RANGE);
  CHECK(take(hal::sdk::guard("p", "c", [] { throw std::bad_alloc(); }), &code) == "p: c: out of host memory");
  CHECK(code == HAL_STATUS_OUT_OF_MEMORY);
  CHECK(take(hal::sdk::guard("p", "c", [] { throw std::logic_error("bug"); }), &code) == "p: c: bug");
  CHECK(code == HAL_STATUS_INTERNAL);
  CHECK(take(hal::sdk::guard("p", "c", [] { throw 42; }), &code) == "p: c: unknown exception");
}

TEST_CASE("options: typed access and unknown keys are refused by name") {
  hal_option_t raw[] = {{sizeof(hal_option_t), "device_count", "4"}, {sizeof(hal_option_t), "mode", "fast"}};
  hal::sdk::Options o(raw, 2);
  CHECK(o.get_int("device_count", 1, 1, 8) == 4);
  CHECK(o.get("mode", "") == "fast");
  CHECK(o.get_int("missing", 3, 1, 8) == 3);
  CHECK_THROWS_WITH_AS(o.get_int("device_count", 1, 1, 2), "option 'device_count' = '4' is not an integer in [1, 2]",
                       Error);
  CHECK_THROWS_WITH_AS(o.get_int("mode", 1, 1, 2), "option 'mode' = 'fast' is not an integer in [1, 2]", Error);
  CHECK_THROWS_WITH_AS(o.require_known({"device_count"}), "unknown option 'mode' = 'fast'", Error);
  CHECK_NOTHROW(o.require_known({"device_count", "mode"}));
}

TEST_CASE("status code names cover every code") {
  CHECK(std::string(hal::sdk::status_code_name(HAL_STATUS_ABI_MISMATCH)) == "ABI_MISMATCH");
  CHECK(std::string(hal::sdk::status_code_name(999)) == "UNKNOWN");
}

TEST_CASE("the handle table agrees with a reference map through growth and deletions") {
  using hal::sdk::detail::HandleTable;
  using hal::sdk::detail::Kind;
  HandleTable table;
  std::unordered_map<const void*, HandleTable::Entry> reference;
  std::mt19937_64 rng(7);
  // Keys 16 bytes apart (as heap objects are) and from a small range, so
  // probe runs are long and deletions shift entries across the wrap.
  auto key = [&] { return reinterpret_cast<const void*>(uintptr_t{0x1000} + 16 * (rng() % 700)); };
  for (int step = 0; step < 20000; ++step) {
    const void* k = key();
    if (rng() % 3 == 0) {
      CHECK(table.erase(k) == (reference.erase(k) == 1));
    } else {
      HandleTable::Entry e{static_cast<Kind>(rng() % 8), key()};
      table.insert(k, e);
      reference[k] = e;
    }
    if (step % 997 == 0)
      for (uintptr_t i = 0; i < 700; ++i) {
        const void* q = reinterpret_cast<const void*>(uintptr_t{0x1000} + 16 * i);
        const HandleTable::Entry* got = table.find(q);
        auto want = reference.find(q);
        REQUIRE((got != nullptr) == (want != reference.end()));
        if (got != nullptr) {
          CHECK(got->kind == want->second.kind);
          CHECK(got->owner == want->second.owner);
        }
      }
  }
  CHECK(table.find(nullptr) == nullptr);
  table.insert(nullptr, {Kind::kBuffer, nullptr});  // never live
  CHECK(table.find(nullptr) == nullptr);
  CHECK_FALSE(table.erase(nullptr));
}
