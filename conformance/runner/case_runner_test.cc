// Tests of the runner's judging logic on the real CPU plugin: a right
// reference passes in every layout, and each kind of wrong answer or wrong
// error is reported with what the CSV needs.
#include "runner/case_runner.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

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

// The CPU plugin with every op uniform (option input_mode = "uniform").
std::shared_ptr<Device> uniform_cpu_device() {
  static std::shared_ptr<Runtime> rt = [] {
    std::string path = (std::filesystem::temp_directory_path() / "hal_conformance_runner_uniform.toml").string();
    std::ofstream(path) << "discover = false\n[[plugin]]\npath = \"" << HAL_TEST_CPU_PLUGIN
                        << "\"\noptions = { input_mode = \"uniform\" }\n";
    RuntimeOptions o;
    o.config_path = path;
    o.use_environment = false;
    o.use_install_dir = false;
    return Runtime::create(o);
  }();
  return rt->devices().at(0);
}

OpCase mixed() {
  return OpCase("int32 + float32").in(random(HAL_DTYPE_INT32, {3, 4}, 1)).in(random(HAL_DTYPE_FLOAT32, {3, 4}, 2));
}

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

TEST_CASE("an output of another dtype than the compute dtype: the failure says the kernel writes the output's dtype") {
  const OpSuite* sum = nullptr;
  for (const OpSuite& s : suites())
    if (s.op == "sum") sum = &s;
  REQUIRE(sum != nullptr);
  OpSuite off = *sum;
  off.reference = [sum](const OpCase& c) {
    std::vector<HostTensor> r = sum->reference(c);
    r[0].values[1] += 1;  // as a kernel that wrote float32 into the float64 output might
    return r;
  };
  OpCase c = OpCase("dtype float64").in(random(HAL_DTYPE_FLOAT32, {3, 5}, 62));
  c.attr(hal::Attr::ints("dim", {1})).attr(hal::Attr::dtype("dtype", HAL_DTYPE_FLOAT64));
  std::vector<Failure> f = run_all(off, HAL_DTYPE_FLOAT32, {c});
  REQUIRE(f.size() == 1);
  CHECK(f[0].message.find("output 0 at [1] got") != std::string::npos);
  CHECK(f[0].message.find("(output 0 is float64 while the call computes in float32: an output's dtype follows the "
                          "catalog's rule for 'sum' (docs/ops.md), not the compute dtype, so the kernel must write "
                          "the output's own dtype (Tensor::dtype)") != std::string::npos);
  CHECK(output_dtype_hint("sum", 0, HAL_DTYPE_FLOAT32, HAL_DTYPE_FLOAT32).empty());
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

TEST_CASE("wrong outputs are refused by the CPU plugin - FREE_OUTPUTS is looked up by op") {
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

TEST_CASE("direct mode: a uniform kernel's mixed case is declined with the plugin's reason, not failed") {
  CaseRunner r(uniform_cpu_device(), "add");
  std::vector<Failure> f;
  std::vector<Declined> d;
  CHECK(r.run(add_suite(), HAL_DTYPE_FLOAT32, mixed(), f, &d) == Outcome::kDeclined);
  CHECK(f.empty());
  REQUIRE(d.size() == 1);
  CHECK(d[0].case_name == "int32 + float32");
  CHECK(d[0].reason.find("uniform inputs") != std::string::npos);
  // One dtype: runs (and passes) on the same device.
  CHECK(r.run(add_suite(), HAL_DTYPE_FLOAT32, simple(HAL_DTYPE_FLOAT32), f, &d) == Outcome::kRan);
  CHECK(f.empty());
  CHECK(d.size() == 1);
  // A bad-input case with mixed inputs: a catalog error still comes first
  // and is checked; MIXED_DTYPES instead of the expected code is a decline.
  OpCase bad_shape = OpCase("mixed, bad shapes").in(random(HAL_DTYPE_INT32, {3}, 1)).in(random(HAL_DTYPE_FLOAT32, {4}, 2));
  CHECK(r.run(add_suite(), HAL_DTYPE_FLOAT32,
              bad_shape.error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(HAL_DTYPE_FLOAT32, {4})}, {"add"}), f, &d) ==
        Outcome::kRan);
  CHECK(f.empty());
  CHECK(r.run(add_suite(), HAL_DTYPE_FLOAT32,
              mixed().error(HAL_STATUS_OUT_OF_RANGE, {HostTensor(HAL_DTYPE_FLOAT32, {3, 4})}), f, &d) ==
        Outcome::kDeclined);
  CHECK(f.empty());
  CHECK(d.size() == 2);
}

TEST_CASE("a mixed case is not declined by a plugin that promotes itself") {
  std::vector<Failure> f;
  std::vector<Declined> d;
  CHECK(CaseRunner(cpu_device(), "add").run(add_suite(), HAL_DTYPE_FLOAT32, mixed(), f, &d) == Outcome::kRan);
  CHECK(f.empty());
  CHECK(d.empty());
}

TEST_CASE("--layout runs one layout - --show-values prints inputs, expected and actual") {
  std::FILE* out = std::tmpfile();
  REQUIRE(out != nullptr);
  CaseRunner::Options o;
  o.layout = Layout::kStrided;
  o.show_values = out;
  OpSuite off = add_suite();
  off.reference = [](const OpCase& c) {
    std::vector<HostTensor> r = add_suite().reference(c);
    r[0].values[5] += 1;
    return r;
  };
  std::vector<Failure> f;
  CaseRunner(cpu_device(), "add", o).run(off, HAL_DTYPE_FLOAT32, simple(HAL_DTYPE_FLOAT32), f);
  REQUIRE(f.size() == 1);
  CHECK(f[0].layout == "strided");
  std::rewind(out);
  std::string text;
  for (int ch; (ch = std::fgetc(out)) != EOF;) text += static_cast<char>(ch);
  std::fclose(out);
  CHECK(text.find("case 'simple' (strided), op.add.float32:") != std::string::npos);
  CHECK(text.find("case 'simple' (contiguous)") == std::string::npos);
  CHECK(text.find("  input 0: float32 [3,4], strides [9,2], byte offset 4") != std::string::npos);
  CHECK(text.find("  output 0: float32 [3,4]") != std::string::npos);
  CHECK(text.find("<-- differs") != std::string::npos);
  CHECK(text.find("  FAILED: output 0 at [1,1]") != std::string::npos);
}

TEST_CASE("layout 'preferred': a case runs with each tensor in the dim order the plugin prefers, and is judged") {
  const OpSuite* conv = nullptr;
  for (const OpSuite& s : suites())
    if (s.op == "conv2d") conv = &s;
  REQUIRE(conv != nullptr);
  const hal_dtype_e F32 = HAL_DTYPE_FLOAT32;
  OpCase wide = OpCase("wide").in(random(F32, {2, 32, 14, 14}, 1)).in(random(F32, {32, 32, 3, 3}, 2))
                    .attr(Attr::ints("padding", {1})).tol(8);
  std::FILE* out = std::tmpfile();
  REQUIRE(out != nullptr);
  CaseRunner::Options o;
  o.layout = Layout::kPreferred;
  o.show_values = out;
  CaseRunner r(cpu_device(), "conv2d", o);
  const std::optional<OpLayouts> pref = r.preferred_layouts(wide, conv->reference(wide));
  std::vector<Failure> f;
  r.run(*conv, F32, wide, f);
  CHECK(f.empty());
  std::rewind(out);
  std::string text;
  for (int ch; (ch = std::fgetc(out)) != EOF;) text += static_cast<char>(ch);
  std::fclose(out);
  // Whether oneDNN computes this convolution channels-last depends on the
  // CPU's ISA (the CPU plugin then prefers channels-last in and out).
  if (pref) {
    REQUIRE(pref->outputs.size() == 1);
    CHECK(pref->outputs[0] == common::DimOrder{0, 2, 3, 1});
    CHECK(text.find("case 'wide' (preferred), op.conv2d.float32:") != std::string::npos);
    CHECK(text.find("  input 0: float32 [2,32,14,14], strides [6272,1,448,32]") != std::string::npos);
    // A wrong answer in that layout is a failure of layout "preferred".
    OpSuite off = *conv;
    off.reference = [conv](const OpCase& c) {
      std::vector<HostTensor> res = conv->reference(c);
      res[0].values[7] += 1;
      return res;
    };
    CaseRunner::Options quiet;
    quiet.layout = Layout::kPreferred;
    std::vector<Failure> wrong;
    CaseRunner(cpu_device(), "conv2d", quiet).run(off, F32, wide, wrong);
    REQUIRE(wrong.size() == 1);
    CHECK(wrong[0].layout == "preferred");
    CHECK(wrong[0].strides.find("[6272,1,448,32]") != std::string::npos);
  } else {
    MESSAGE("oneDNN computes this convolution in another layout here: the case does not run 'preferred'");
    CHECK(text.find("does not run in layout preferred") != std::string::npos);
  }
  // A plugin that prefers nothing but row-major: the layout is not run.
  std::vector<Failure> g;
  CaseRunner::Options only_preferred;
  only_preferred.layout = Layout::kPreferred;
  CHECK(!CaseRunner(cpu_device(), "add", only_preferred).preferred_layouts(simple(F32), add_suite().reference(simple(F32))));
  CaseRunner(cpu_device(), "add", only_preferred).run(add_suite(), F32, simple(F32), g);
  CHECK(g.empty());
}

TEST_CASE("case selectors are unique - layouts parse - shell words are quoted") {
  std::vector<std::string> sel = case_selectors({OpCase("a"), OpCase("b"), OpCase("a"), OpCase("c d")});
  CHECK(sel == std::vector<std::string>{"a#1", "b", "a#2", "c d"});
  CHECK(parse_layout("permuted") == Layout::kPermuted);
  CHECK(parse_layout("preferred") == Layout::kPreferred);
  CHECK_FALSE(parse_layout("diagonal").has_value());
  CHECK(shell_quote("build/lib/x.so") == "build/lib/x.so");
  CHECK(shell_quote("broadcast [3,1]x[4]") == "'broadcast [3,1]x[4]'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
}

}  // namespace hal::conformance
