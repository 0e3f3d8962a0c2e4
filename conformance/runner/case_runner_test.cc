// Tests of the runner's judging logic on the real CPU plugin: a right
// reference passes in every layout, and each kind of wrong answer or wrong
// error is reported with what the CSV needs.
#include "runner/case_runner.hpp"

#include <doctest/doctest.h>

#include "runner/session.hpp"

namespace hal::conformance {
namespace {

std::shared_ptr<Device> cpu_device() {
  static std::shared_ptr<Runtime> rt = [] {
    RuntimeOptions o;
    o.plugin_paths = {HAL_TEST_CPU_PLUGIN};
    o.use_environment = false;
    o.use_install_dir = false;
    return Runtime::create(o);
  }();
  return rt->devices().at(0);
}

const OpSuite& add_suite() {
  for (const OpSuite& s : fallback_suites())
    if (s.op == "add") return s;
  throw std::runtime_error("no fallback add suite");
}

std::vector<Failure> run_all(const OpSuite& suite, hal_dtype_e dt, const std::vector<OpCase>& cases) {
  CaseRunner r(cpu_device(), suite.op);
  std::vector<Failure> f;
  for (const OpCase& c : cases) r.run(suite, dt, c, f);
  return f;
}

OpCase simple(hal_dtype_e dt) { return OpCase("simple").in(random(dt, {3, 4}, 1)).in(random(dt, {3, 4}, 2)); }

}  // namespace

TEST_CASE("a right reference passes in every dtype and layout") {
  for (hal_dtype_e dt : {HAL_DTYPE_FLOAT32, HAL_DTYPE_FLOAT16, HAL_DTYPE_BFLOAT16, HAL_DTYPE_INT8, HAL_DTYPE_BOOL}) {
    CAPTURE(dtype_str(dt));
    std::vector<Failure> f = run_all(add_suite(), dt, add_suite().cases(dt));
    CHECK(f.empty());
    for (const Failure& x : f) MESSAGE(x.case_name << " " << x.layout << ": " << x.message);
  }
}

TEST_CASE("a wrong value is reported once, with its size and the case's shapes") {
  OpSuite off = add_suite();
  off.reference = [](const OpCase& c) {
    std::vector<HostTensor> r = add_suite().reference(c);
    r[0].values[5] += 1e-3;
    return r;
  };
  std::vector<Failure> f = run_all(off, HAL_DTYPE_FLOAT32, {simple(HAL_DTYPE_FLOAT32).attr(hal::Attr::f("alpha", 2))});
  REQUIRE(f.size() == 1);  // the contiguous failure stops the other layouts
  CHECK(f[0].op == "add");
  CHECK(f[0].dtype == "float32");
  CHECK(f[0].layout == "contiguous");
  CHECK(f[0].shapes == "[3,4] [3,4] -> [3,4]");
  CHECK(f[0].attrs == "alpha=2");
  CHECK(f[0].max_abs_error == doctest::Approx(1e-3).epsilon(1e-3));
  CHECK(f[0].message.find("at [1,1]") != std::string::npos);
  CHECK(f[0].message.find("1 of 12 values differ") != std::string::npos);
}

TEST_CASE("tolerances: within atol+rtol passes, tolerance_scale widens") {
  OpSuite off = add_suite();
  off.reference = [](const OpCase& c) {
    std::vector<HostTensor> r = add_suite().reference(c);
    for (double& v : r[0].values) v += 5e-6;  // below float32's atol 1e-5
    return r;
  };
  CHECK(run_all(off, HAL_DTYPE_FLOAT32, {simple(HAL_DTYPE_FLOAT32)}).empty());
  off.reference = [](const OpCase& c) {
    std::vector<HostTensor> r = add_suite().reference(c);
    for (double& v : r[0].values) v += 5e-5;
    return r;
  };
  CHECK(run_all(off, HAL_DTYPE_FLOAT32, {simple(HAL_DTYPE_FLOAT32)}).size() == 1);
  CHECK(run_all(off, HAL_DTYPE_FLOAT32, {simple(HAL_DTYPE_FLOAT32).tol(10)}).empty());
  // Integers are exact, and so are outputs marked kExact.
  off.reference = [](const OpCase& c) {
    std::vector<HostTensor> r = add_suite().reference(c);
    r[0].values[0] += 1e-11;  // inside float64's 1e-10
    return r;
  };
  CHECK(run_all(off, HAL_DTYPE_FLOAT64, {simple(HAL_DTYPE_FLOAT64)}).empty());
  CHECK(run_all(off, HAL_DTYPE_FLOAT64, {simple(HAL_DTYPE_FLOAT64).cmp({Compare::kExact})}).size() == 1);
  CHECK(run_all(off, HAL_DTYPE_FLOAT64, {simple(HAL_DTYPE_FLOAT64).cmp({Compare::kSkip})}).empty());
}

TEST_CASE("custom_check replaces the comparison") {
  OpCase c = simple(HAL_DTYPE_FLOAT32);
  c.custom_check = [](const OpCase&, const std::vector<HostTensor>& e, const std::vector<HostTensor>& a) {
    return a.size() == 1 && e[0].shape == a[0].shape ? std::string("custom says no") : std::string("bad args");
  };
  std::vector<Failure> f = run_all(add_suite(), HAL_DTYPE_FLOAT32, {c});
  REQUIRE(f.size() == 1);
  CHECK(f[0].message == "custom says no");
}

TEST_CASE("bad-input cases: code, mentions, success") {
  const hal_dtype_e dt = HAL_DTYPE_FLOAT32;
  auto bad = [&] { return OpCase("bad").in(random(dt, {3}, 1)).in(random(dt, {4}, 2)); };
  CHECK(run_all(add_suite(), dt, {bad().error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {4})}, {"add"})}).empty());
  std::vector<Failure> f =
      run_all(add_suite(), dt, {bad().error(HAL_STATUS_OUT_OF_RANGE, {HostTensor(dt, {4})})});
  REQUIRE(f.size() == 1);
  CHECK(f[0].message.find("expected OUT_OF_RANGE, got INVALID_ARGUMENT") != std::string::npos);
  f = run_all(add_suite(), dt, {bad().error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {4})}, {"no such words"})});
  REQUIRE(f.size() == 1);
  CHECK(f[0].message.find("does not mention 'no such words'") != std::string::npos);
  f = run_all(add_suite(), dt, {simple(dt).error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3, 4})})});
  REQUIRE(f.size() == 1);
  CHECK(f[0].message.find("but the launch succeeded") != std::string::npos);
}

TEST_CASE("wrong outputs are refused by the CPU plugin; FREE_OUTPUTS is looked up by op") {
  CaseRunner r(cpu_device(), "add");
  std::vector<Failure> f;
  r.run_wrong_outputs(add_suite(), HAL_DTYPE_FLOAT32, simple(HAL_DTYPE_FLOAT32), f);
  CHECK(f.empty());
  register_free_outputs("conformance_test_free_op", FreeOutputs{true, false});
  CHECK(free_outputs("conformance_test_free_op").shape);
  CHECK_FALSE(free_outputs("conformance_test_free_op").dtype);
  CHECK_FALSE(free_outputs("add").shape);
}

TEST_CASE("op_check: a supported call is accepted, a refused one says why") {
  CaseRunner r(cpu_device(), "add");
  OpCase c = simple(HAL_DTYPE_FLOAT32);
  CHECK(r.check(c, add_suite().reference(c)) == nullptr);
  std::vector<HostTensor> wrong = {HostTensor(HAL_DTYPE_FLOAT32, {5})};
  std::unique_ptr<Error> e = r.check(c, wrong);
  REQUIRE(e != nullptr);
  CHECK(e->code() == HAL_STATUS_INVALID_ARGUMENT);
}

}  // namespace hal::conformance
