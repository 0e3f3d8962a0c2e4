#!/usr/bin/env python3
"""Generates everything that comes from the standard op catalog.

The catalog is sdk/catalog/catalog.toml (version) plus sdk/catalog/ops/*.toml
(the ops, one file per group). From it come:

  <out>/hal/op_catalog.h          C: catalog version, op count, op names
  <out>/hal/common/op_catalog.hpp C++: schema table + typed accessors per op
  docs/ops.md                     the reference for users and vendors

Usage:
  gen_catalog.py --catalog DIR --include-out DIR --docs FILE
  gen_catalog.py --catalog DIR --check-docs FILE   (fails if FILE is stale)

The format is described in sdk/catalog/README.md. Errors name file and op.
"""
import argparse
import pathlib
import re
import sys
import tomllib

DTYPE_CLASSES = {
    "float": ["float32", "float16", "bfloat16", "float64"],
    "int": ["int8", "uint8", "int16", "int32", "int64"],
    "bool": ["bool"],
    "index": ["int32", "int64"],
    "int64": ["int64"],
}
DTYPE_CLASSES["signed"] = DTYPE_CLASSES["float"] + ["int8", "int16", "int32", "int64"]
DTYPE_CLASSES["numeric"] = DTYPE_CLASSES["float"] + DTYPE_CLASSES["int"]
DTYPE_CLASSES["integral"] = DTYPE_CLASSES["int"] + DTYPE_CLASSES["bool"]
DTYPE_CLASSES["all"] = DTYPE_CLASSES["numeric"] + DTYPE_CLASSES["bool"]
DTYPE_ENUM = {
    "float32": "HAL_DTYPE_FLOAT32", "float16": "HAL_DTYPE_FLOAT16",
    "bfloat16": "HAL_DTYPE_BFLOAT16", "float64": "HAL_DTYPE_FLOAT64",
    "int8": "HAL_DTYPE_INT8", "uint8": "HAL_DTYPE_UINT8", "int16": "HAL_DTYPE_INT16",
    "int32": "HAL_DTYPE_INT32", "int64": "HAL_DTYPE_INT64", "bool": "HAL_DTYPE_BOOL",
}
ATTR_KINDS = {"int": "kInt", "float": "kFloat", "bool": "kBool", "string": "kString",
              "ints": "kInts", "floats": "kFloats", "dtype": "kDtype", "scalar": "kScalar"}
OUT_DTYPE_RULES = {"same", "promoted", "float", "bool", "int64", "attr", "div"}
ALIAS_RULES = {"none", "exact"}
OP_KEYS = {"name", "summary", "inputs", "outputs", "attrs", "dtypes", "promote",
           "shape", "alias", "doc", "seed"}
NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
CPP_KEYWORDS = {"and", "or", "xor", "not", "bool", "int", "float", "double", "default",
                "operator", "signed", "unsigned", "char", "long", "short", "auto", "case",
                "const", "delete", "new", "this", "union", "return", "template",
                "std"}  # "std" would shadow namespace std inside hal::common::op


class CatalogError(Exception):
    pass


def dtype_list(spec, where):
    """'float' / 'float|bool' / ['float32', 'int64'] -> ordered dtype names."""
    parts = spec if isinstance(spec, list) else spec.split("|")
    out = []
    for p in parts:
        p = p.strip()
        if p in DTYPE_CLASSES:
            names = DTYPE_CLASSES[p]
        elif p in DTYPE_ENUM:
            names = [p]
        else:
            raise CatalogError(f"{where}: unknown dtype or dtype class '{p}' "
                               f"(classes: {', '.join(sorted(DTYPE_CLASSES))})")
        out += [n for n in names if n not in out]
    return out


def parse_tensor(entry, op_dtypes, where, is_output):
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, dict) or "name" not in entry:
        raise CatalogError(f"{where}: a tensor is a name or a table with 'name'")
    known = {"name", "dtypes", "optional", "variadic", "doc"} | ({"dtype"} if is_output else set())
    for k in entry:
        if k not in known:
            raise CatalogError(f"{where}: tensor '{entry['name']}': unknown key '{k}'")
    name = entry["name"]
    if not NAME_RE.match(name):
        raise CatalogError(f"{where}: tensor name '{name}' must match {NAME_RE.pattern}")
    t = {
        "name": name,
        "dtypes": dtype_list(entry.get("dtypes", op_dtypes), f"{where}: {name}"),
        "optional": bool(entry.get("optional", False)),
        "variadic": bool(entry.get("variadic", False)),
        "doc": entry.get("doc", ""),
    }
    if is_output:
        rule = entry.get("dtype", "promoted")
        if rule not in OUT_DTYPE_RULES and rule not in DTYPE_ENUM:
            raise CatalogError(f"{where}: output '{name}': dtype rule '{rule}' is not one of "
                               f"{sorted(OUT_DTYPE_RULES)} or a dtype name")
        t["dtype"] = rule
    return t


def parse_attr(name, spec, where):
    if not NAME_RE.match(name):
        raise CatalogError(f"{where}: attribute name '{name}' must match {NAME_RE.pattern}")
    if isinstance(spec, str):
        spec = {"type": spec}
    for k in spec:
        if k not in {"type", "default", "choices", "doc"}:
            raise CatalogError(f"{where}: attribute '{name}': unknown key '{k}'")
    kind = spec.get("type")
    if kind not in ATTR_KINDS:
        raise CatalogError(f"{where}: attribute '{name}': type '{kind}' is not one of {sorted(ATTR_KINDS)}")
    a = {"name": name, "type": kind, "required": "default" not in spec,
         "default": spec.get("default"), "choices": spec.get("choices", []), "doc": spec.get("doc", "")}
    d = a["default"]
    if d is not None:
        ok = {"int": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
              "scalar": lambda v: isinstance(v, (int, float)),
              "bool": lambda v: isinstance(v, bool),
              "string": lambda v: isinstance(v, str),
              "dtype": lambda v: v == "none" or v in DTYPE_ENUM,
              "ints": lambda v: isinstance(v, list) and all(isinstance(x, int) for x in v),
              "floats": lambda v: isinstance(v, list) and all(isinstance(x, (int, float)) for x in v),
              }[kind](d)
        if not ok:
            raise CatalogError(f"{where}: attribute '{name}': default {d!r} is not a {kind}")
    if a["choices"] and kind != "string":
        raise CatalogError(f"{where}: attribute '{name}': choices only apply to strings")
    if a["choices"] and d is not None and d not in a["choices"]:
        raise CatalogError(f"{where}: attribute '{name}': default '{d}' not among choices")
    return a


def load(catalog_dir):
    catalog_dir = pathlib.Path(catalog_dir)
    meta_path = catalog_dir / "catalog.toml"
    with open(meta_path, "rb") as f:
        meta = tomllib.load(f)
    version = meta.get("version")
    if not isinstance(version, str) or not re.match(r"^\d+\.\d+$", version):
        raise CatalogError(f"{meta_path}: 'version' must be \"MAJOR.MINOR\"")
    groups = meta.get("groups")
    if not isinstance(groups, list) or not groups:
        raise CatalogError(f"{meta_path}: 'groups' must list the files of ops/ in order")
    ops, seen = [], {}
    for group in groups:
        path = catalog_dir / "ops" / f"{group['file']}.toml"
        with open(path, "rb") as f:
            try:
                data = tomllib.load(f)
            except tomllib.TOMLDecodeError as e:
                raise CatalogError(f"{path}: {e}")
        for k in data:
            if k != "op":
                raise CatalogError(f"{path}: unknown top-level key '{k}' (ops are [[op]] tables)")
        for raw in data.get("op", []):
            name = raw.get("name", "?")
            where = f"{path}: op '{name}'"
            for k in raw:
                if k not in OP_KEYS:
                    raise CatalogError(f"{where}: unknown key '{k}'")
            if not NAME_RE.match(name):
                raise CatalogError(f"{where}: name must match {NAME_RE.pattern}")
            if name in seen:
                raise CatalogError(f"{where}: duplicate of the op in {seen[name]}")
            seen[name] = path
            for k in ("summary", "inputs", "outputs", "shape"):
                if k not in raw:
                    raise CatalogError(f"{where}: missing '{k}'")
            op_dtypes = raw.get("dtypes", "all")
            op = {
                "name": name, "group": group["file"], "group_title": group["title"],
                "summary": raw["summary"], "doc": raw.get("doc", ""),
                "inputs": [parse_tensor(t, op_dtypes, where, False) for t in raw["inputs"]],
                "outputs": [parse_tensor(t, op_dtypes, where, True) for t in raw["outputs"]],
                "attrs": [parse_attr(n, s, where) for n, s in raw.get("attrs", {}).items()],
                "promote": raw.get("promote", False),
                "shape": raw["shape"], "alias": raw.get("alias", "none"),
            }
            in_names = [t["name"] for t in op["inputs"]]
            pr = op["promote"]
            if pr is True:
                pr = in_names
            elif pr is False:
                pr = []
            if not isinstance(pr, list) or any(n not in in_names for n in pr):
                raise CatalogError(f"{where}: promote must be true, false or a list of input names")
            op["promote"] = pr
            op["promote_mask"] = sum(1 << in_names.index(n) for n in pr)
            if op["alias"] not in ALIAS_RULES:
                raise CatalogError(f"{where}: alias '{op['alias']}' is not one of {sorted(ALIAS_RULES)}")
            if not NAME_RE.match(op["shape"]):
                raise CatalogError(f"{where}: shape rule '{op['shape']}' must be an identifier")
            names = [t["name"] for t in op["inputs"] + op["outputs"]] + [a["name"] for a in op["attrs"]]
            dup = {n for n in names if names.count(n) > 1}
            if dup:
                raise CatalogError(f"{where}: names used twice among inputs/outputs/attrs: {sorted(dup)}")
            for i, t in enumerate(op["inputs"]):
                if t["variadic"] and len(op["inputs"]) != 1:
                    raise CatalogError(f"{where}: a variadic input must be the only input")
                if not t["optional"] and any(u["optional"] for u in op["inputs"][:i]):
                    raise CatalogError(f"{where}: required input '{t['name']}' follows an optional one")
            if any(t["variadic"] for t in op["outputs"]) and len(op["outputs"]) != 1:
                raise CatalogError(f"{where}: a variadic output must be the only output")
            if any(t["dtype"] == "attr" for t in op["outputs"]) and "dtype" not in [a["name"] for a in op["attrs"]]:
                raise CatalogError(f"{where}: output dtype rule 'attr' needs a 'dtype' attribute")
            ops.append(op)
    return {"version": version, "groups": groups, "ops": ops}


# ---- C / C++ --------------------------------------------------------------

def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


DTYPE_VALUE = {"float32": 1, "float16": 2, "bfloat16": 3, "float64": 4, "int8": 5, "uint8": 6,
               "int16": 7, "int32": 8, "int64": 9, "bool": 10}  # hal_dtype_e (frozen)


def dtype_mask(names):
    mask = sum(1 << DTYPE_VALUE[n] for n in names)
    return f"0x{mask:x}u /* {fmt_dtypes(names)} */"


def ident(name, owner=None):
    """NAME as a C++ identifier; a member named like its struct (OWNER) would be a constructor."""
    return name + "_" if name in CPP_KEYWORDS or name == owner else name


def gen_c_header(cat):
    major, minor = cat["version"].split(".")
    lines = [
        "/* Generated by sdk/catalog/gen_catalog.py from sdk/catalog/. Do not edit. */",
        "/* The standard op catalog: its version and the names of its ops. */",
        "#ifndef HAL_OP_CATALOG_H_", "#define HAL_OP_CATALOG_H_", "",
        "/* Adding an op or an optional attribute/input bumps MINOR; changing an",
        " * op's meaning or signature bumps MAJOR. */",
        f"#define HAL_OP_CATALOG_VERSION_MAJOR {major}",
        f"#define HAL_OP_CATALOG_VERSION_MINOR {minor}",
        f"#define HAL_OP_CATALOG_SIZE {len(cat['ops'])}", "",
        "/* Op names, for op_resolve. */",
    ]
    for op in cat["ops"]:
        lines.append(f"#define HAL_OP_{op['name'].upper()} {c_str(op['name'])}")
    lines += ["", "#endif /* HAL_OP_CATALOG_H_ */", ""]
    return "\n".join(lines)


def attr_default_fields(a):
    """-> (i, f, s, ints_name) initialisers for the AttrSpec default."""
    d, k = a["default"], a["type"]
    if d is None:
        return "0", "0.0", "nullptr", False
    if k == "bool":
        return ("1" if d else "0"), "0.0", "nullptr", False
    if k == "int":
        return str(d), repr(float(d)), "nullptr", False
    if k in ("float", "scalar"):
        if isinstance(d, int) and not isinstance(d, bool):
            return str(d), repr(float(d)), "nullptr", False
        return "0", repr(float(d)), "nullptr", False
    if k == "string":
        return "0", "0.0", c_str(d), False
    if k == "dtype":
        return ("HAL_DTYPE_INVALID" if d == "none" else DTYPE_ENUM[d]), "0.0", "nullptr", False
    return "0", "0.0", "nullptr", True


def gen_cpp_header(cat):
    out = [
        "// Generated by sdk/catalog/gen_catalog.py from sdk/catalog/. Do not edit.",
        "// The op catalog as data (kOps) and one accessor struct per op",
        "// (hal::common::op::add::alpha(call), ...). Schema types: hal/common/op_schema.hpp;",
        "// plugins use it as hal::sdk::op / hal::sdk::catalog (hal/sdk/op_catalog.hpp).",
        "#ifndef HAL_COMMON_OP_CATALOG_HPP_", "#define HAL_COMMON_OP_CATALOG_HPP_", "",
        "#include <cstring>", "", "#include \"hal/op_catalog.h\"", "#include \"hal/common/op_shapes.hpp\"", "",
        "namespace hal::common::catalog {", "",
    ]
    for op in cat["ops"]:
        n = op["name"]
        for a in op["attrs"]:
            if a["type"] in ("ints", "floats") and a["default"]:
                ty = "int64_t" if a["type"] == "ints" else "double"
                vals = ", ".join(str(v) if a["type"] == "ints" else repr(float(v)) for v in a["default"])
                out.append(f"inline constexpr {ty} k_{n}_{a['name']}_default[] = {{{vals}}};")
            if a["choices"]:
                vals = ", ".join(c_str(c) for c in a["choices"])
                out.append(f"inline constexpr const char* k_{n}_{a['name']}_choices[] = {{{vals}, nullptr}};")
        if op["inputs"]:
            out.append(f"inline constexpr TensorSpec k_{n}_inputs[] = {{")
            for t in op["inputs"]:
                out.append(f"    {{{c_str(t['name'])}, {dtype_mask(t['dtypes'])}, {str(t['optional']).lower()}, "
                           f"{str(t['variadic']).lower()}, OutDtype::kSame, HAL_DTYPE_INVALID}},")
            out.append("};")
        out.append(f"inline constexpr TensorSpec k_{n}_outputs[] = {{")
        for t in op["outputs"]:
            rule = t["dtype"]
            fixed = "HAL_DTYPE_INVALID"
            if rule in DTYPE_ENUM:
                fixed, rule = DTYPE_ENUM[rule], "fixed"
            out.append(f"    {{{c_str(t['name'])}, {dtype_mask(t['dtypes'])}, false, {str(t['variadic']).lower()}, "
                       f"OutDtype::k{rule.capitalize()}, {fixed}}},")
        out.append("};")
        if op["attrs"]:
            out.append(f"inline constexpr AttrSpec k_{n}_attrs[] = {{")
            for a in op["attrs"]:
                i, f, s, has_list = attr_default_fields(a)
                lst = f"k_{n}_{a['name']}_default" if has_list and a["default"] else "nullptr"
                cnt = str(len(a["default"])) if has_list and a["default"] else "0"
                ch = f"k_{n}_{a['name']}_choices" if a["choices"] else "nullptr"
                ints = lst if a["type"] == "ints" else "nullptr"
                flts = lst if a["type"] == "floats" else "nullptr"
                out.append(f"    {{{c_str(a['name'])}, AttrKind::{ATTR_KINDS[a['type']]}, {str(a['required']).lower()}, "
                           f"{i}, {f}, {s}, {ints}, {flts}, {cnt}, {ch}}},")
            out.append("};")
    out += ["", "// Every op of the catalog, in catalog order (index = OpSchema::index).",
            f"inline constexpr OpSchema kOps[HAL_OP_CATALOG_SIZE] = {{"]
    for idx, op in enumerate(cat["ops"]):
        n = op["name"]
        ins = f"k_{n}_inputs" if op["inputs"] else "nullptr"
        ats = f"k_{n}_attrs" if op["attrs"] else "nullptr"
        out.append(f"    {{{idx}, {c_str(n)}, {c_str(op['group'])}, {c_str(op['summary'])}, "
                   f"{ins}, {len(op['inputs'])}, k_{n}_outputs, {len(op['outputs'])}, "
                   f"{ats}, {len(op['attrs'])}, {op['promote_mask']}u, "
                   f"Alias::k{op['alias'].capitalize()}, {c_str(op['shape'])}, &shape_rules::{op['shape']}}},")
    by_name = sorted(range(len(cat["ops"])), key=lambda i: cat["ops"][i]["name"].encode())
    out += ["};", "",
            "// kOps' indices in strcmp order of their names (find_schema's binary search).",
            "inline constexpr uint16_t kOpsByName[HAL_OP_CATALOG_SIZE] = {"]
    for k in range(0, len(by_name), 16):
        out.append("    " + ", ".join(str(i) for i in by_name[k:k + 16]) + ",")
    out += ["};", "",
            "// The schema named NAME (not NULL), or nullptr. Thread-safe; static storage.",
            "// The one lookup by name: the SDK, libhal's op launch and the graph code use it",
            "// (compiling a graph asks it per node several times: a binary search, not a scan).",
            "inline const OpSchema* find_schema(const char* name) {",
            "  size_t lo = 0, hi = HAL_OP_CATALOG_SIZE;",
            "  while (lo < hi) {",
            "    const size_t mid = (lo + hi) / 2;",
            "    const int c = std::strcmp(kOps[kOpsByName[mid]].name, name);",
            "    if (c == 0) return &kOps[kOpsByName[mid]];",
            "    if (c < 0) lo = mid + 1;",
            "    else hi = mid;",
            "  }",
            "  return nullptr;",
            "}", "",
            "}  // namespace hal::common::catalog", "",
            "namespace hal::common::op {", ""]
    for idx, op in enumerate(cat["ops"]):
        n = op["name"]
        out.append(f"// {op['summary']}")
        out.append(f"struct {ident(n)} {{")
        out.append(f"  static constexpr uint32_t kIndex = {idx};")
        out.append(f"  static constexpr const char* kName = {c_str(n)};")
        out.append(f"  static const OpSchema& schema() {{ return catalog::kOps[{idx}]; }}")
        for i, t in enumerate(op["inputs"]):
            if t["variadic"]:
                out.append(f"  static TensorList {ident(t['name'], n)}(const OpCall& c) {{ return c.inputs(); }}")
            elif t["optional"]:
                out.append(f"  static const Tensor* {ident(t['name'], n)}(const OpCall& c) {{ return c.optional_input({i}); }}")
            else:
                out.append(f"  static const Tensor& {ident(t['name'], n)}(const OpCall& c) {{ return c.input({i}); }}")
        for i, t in enumerate(op["outputs"]):
            if t["variadic"]:
                out.append(f"  static TensorList {ident(t['name'], n)}(const OpCall& c) {{ return c.outputs(); }}")
            else:
                out.append(f"  static const Tensor& {ident(t['name'], n)}(const OpCall& c) {{ return c.output({i}); }}")
        for i, a in enumerate(op["attrs"]):
            getter = {"int": "int64_t", "float": "double", "bool": "bool", "string": "const std::string&",
                      "ints": "const std::vector<int64_t>&", "floats": "const std::vector<double>&",
                      "dtype": "hal_dtype_e", "scalar": "const Scalar&"}[a["type"]]
            fn = {"int": "as_int", "float": "as_float", "bool": "as_bool", "string": "as_string",
                  "ints": "as_ints", "floats": "as_floats", "dtype": "as_dtype", "scalar": "as_scalar"}[a["type"]]
            out.append(f"  static {getter} {ident(a['name'], n)}(const OpCall& c) {{ return c.attr({i}).{fn}(); }}")
        out.append("};")
        out.append("")
    out += ["}  // namespace hal::common::op", "", "#endif  // HAL_COMMON_OP_CATALOG_HPP_", ""]
    return "\n".join(out)


# ---- docs ------------------------------------------------------------------

def fmt_default(a):
    d = a["default"]
    if d is None:
        return "required"
    if isinstance(d, bool):
        return "true" if d else "false"
    if isinstance(d, str):
        return f'"{d}"'
    return str(d)


def fmt_dtypes(names):
    for cls in ("all", "numeric", "float", "integral", "int", "signed", "index", "bool", "int64"):
        if names == DTYPE_CLASSES[cls]:
            return cls
    return ", ".join(names)


def gen_docs(cat):
    out = [
        "<!-- Generated by sdk/catalog/gen_catalog.py from sdk/catalog/. Do not edit: edit the catalog. -->",
        "# The standard op catalog",
        "",
        f"Catalog version **{cat['version']}**, **{len(cat['ops'])} ops**. Ops are launched through the",
        "operator interface (`sdk/include/hal/op.h`); the rules below are checked by the SDK",
        "before a plugin's kernel runs, and by `hal-conformance` against every plugin.",
        "",
        "Conventions:",
        "",
        "- **Inputs/outputs** are listed in launch order; `name?` is optional, `name...` variadic.",
        "- **dtypes**: classes are `float` (float32, float16, bfloat16, float64), `int` (int8, uint8,",
        "  int16, int32, int64), `numeric` (float + int), `integral` (int + bool), `signed`",
        "  (float + signed ints), `index` (int32, int64), `all` (numeric + bool).",
        "- **promote**: inputs of different dtypes are promoted to a common dtype as PyTorch's",
        "  `result_type` does (categories bool < integer < floating; a 0-d tensor only",
        "  decides the dtype when it is of a higher category than every dimensioned input).",
        "- **Output dtype**: `same` = the first input's, `promoted` = the common dtype, `float` = the",
        "  common dtype with integers and bool computed in float32, `attr` = the `dtype` attribute",
        "  (or the input's when `none`), or a fixed dtype.",
        "- **Broadcasting** follows NumPy: shapes are aligned at the right, sizes must be equal or 1.",
        "- **alias**: `exact` means an output may be exactly an input (same buffer, offset, shape",
        "  and strides: in-place); any other overlap of an output with an input is refused.",
        "- float16/bfloat16 are computed in float32 internally.",
        "",
    ]
    by_group = {}
    for op in cat["ops"]:
        by_group.setdefault(op["group"], []).append(op)
    out.append("## Contents")
    out.append("")
    for g in cat["groups"]:
        ops = by_group.get(g["file"], [])
        out.append(f"- [{g['title']}](#{g['file']}) ({len(ops)}): " + ", ".join(f"`{o['name']}`" for o in ops))
    out.append("")
    for g in cat["groups"]:
        out.append(f'<a id="{g["file"]}"></a>')
        out.append(f"## {g['title']}")
        out.append("")
        for op in by_group.get(g["file"], []):
            ins = ", ".join(t["name"] + ("..." if t["variadic"] else "") + ("?" if t["optional"] else "")
                            for t in op["inputs"]) or "—"
            outs = ", ".join(t["name"] + ("..." if t["variadic"] else "") for t in op["outputs"])
            out.append(f"### `{op['name']}`")
            out.append("")
            out.append(op["summary"])
            out.append("")
            out.append(f"- inputs: {ins}; outputs: {outs}")
            dts = []
            for t in op["inputs"]:
                dts.append(f"{t['name']}: {fmt_dtypes(t['dtypes'])}")
            out.append("- dtypes: " + ("; ".join(dts) if dts else "—"))
            out.append("- output dtype: " + "; ".join(f"{t['name']}: {t['dtype']}" for t in op["outputs"]))
            if op["attrs"]:
                parts = []
                for a in op["attrs"]:
                    ch = f" ∈ {{{', '.join(a['choices'])}}}" if a["choices"] else ""
                    parts.append(f"`{a['name']}`: {a['type']}{ch} = {fmt_default(a)}")
                out.append("- attributes: " + "; ".join(parts))
            flags = [f"shape rule `{op['shape']}`"]
            if op["promote"]:
                flags.append("promotes " + ", ".join(op["promote"]))
            flags.append("in-place allowed" if op["alias"] == "exact" else "no aliasing")
            out.append("- " + ", ".join(flags))
            if op["doc"]:
                out.append("")
                out.append(op["doc"].strip())
            out.append("")
    return "\n".join(out)


def write_if_changed(path, text):
    path = pathlib.Path(path)
    if path.exists() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--catalog", required=True)
    ap.add_argument("--include-out")
    ap.add_argument("--docs")
    ap.add_argument("--check-docs")
    args = ap.parse_args()
    try:
        cat = load(args.catalog)
    except CatalogError as e:
        print(f"gen_catalog: {e}", file=sys.stderr)
        return 1
    if args.include_out:
        inc = pathlib.Path(args.include_out)
        write_if_changed(inc / "hal" / "op_catalog.h", gen_c_header(cat))
        write_if_changed(inc / "hal" / "common" / "op_catalog.hpp", gen_cpp_header(cat))
    if args.docs:
        write_if_changed(args.docs, gen_docs(cat))
    if args.check_docs:
        p = pathlib.Path(args.check_docs)
        if not p.exists() or p.read_text() != gen_docs(cat):
            print(f"gen_catalog: {p} is out of date with the catalog; regenerate it with\n"
                  f"  python3 sdk/catalog/gen_catalog.py --catalog sdk/catalog --docs docs/ops.md",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
