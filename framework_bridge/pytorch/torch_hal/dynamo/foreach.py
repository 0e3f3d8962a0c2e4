"""Decompositions of aten's _foreach_* ops (an optimizer step under torch.compile: AdamW, SGD with
momentum, gradient clipping) into one aten op per list element, each a mapping-table row, so that
a compiled optimizer step lowers into one HAL segment instead of running every _foreach_ op eagerly.
PyTorch has no decompositions for them (inductor lowers them itself).

Left whole (one eager node each, as before): the overloads taking their scalars as a tensor
(addcmul.Tensor, addcdiv.Tensor: a value per element read from a tensor), and the list ops that are
not elementwise arithmetic (copy, zero, clone, mm, max, powsum)."""
import functools

import torch

aten = torch.ops.aten

_WHOLE = {"copy", "zero", "clone", "mm", "max", "powsum"}
# Scalar forms whose per-element op has another name (maximum/minimum take tensors only).
_RENAMED = {("maximum", "Scalar"): "clamp_min", ("maximum", "ScalarList"): "clamp_min",
            ("minimum", "Scalar"): "clamp_max", ("minimum", "ScalarList"): "clamp_max"}
# Arguments positional in the _foreach_ schema and keyword-only in the per-element op.
_KEYWORD = {"addcmul": {3: "value"}, "addcdiv": {3: "value"}}  # argument index -> keyword


def _per_element(base, overload, schema):
    lists = [a.type.kind() == "ListType" for a in schema.arguments]
    names = [a.name for a in schema.arguments]
    keyword_only = [a.kwarg_only for a in schema.arguments]
    defaults = [a.default_value if a.has_default_value() else None for a in schema.arguments]
    keyword = _KEYWORD.get(base, {})
    if base == "norm":
        op = lambda t, ord=2, dtype=None: aten.linalg_vector_norm.default(t, ord, dtype=dtype)  # noqa: E731
    else:
        op = getattr(aten, _RENAMED.get((base, overload), base))

    def decomposition(*args, **kwargs):
        values = [args[k] if k < len(args) else kwargs.get(n, defaults[k]) for k, n in enumerate(names)]
        count = next(len(v) for v, is_list in zip(values, lists) if is_list)
        out = []
        for i in range(count):
            positional, named = [], {}
            for k, (v, is_list) in enumerate(zip(values, lists)):
                v = v[i] if is_list else v
                if keyword_only[k] or k in keyword:
                    named[keyword.get(k, names[k])] = v
                else:
                    positional.append(v)
            out.append(op(*positional, **named))
        return out
    return decomposition


@functools.lru_cache(maxsize=1)
def foreach_decompositions():
    """{_foreach_ functional overload: its per-element decomposition} for the overloads aten has."""
    table = {}
    for schema in torch._C._jit_get_all_schemas():
        name = schema.name
        if not name.startswith("aten::_foreach_") or name.endswith("_") or "out" in schema.overload_name:
            continue
        base = name[len("aten::_foreach_"):]
        overload = schema.overload_name or "default"
        if base in _WHOLE or overload == "Tensor" and base in _KEYWORD:
            continue
        if base != "norm" and (base, overload) not in _RENAMED and not hasattr(aten, base):
            continue
        packet = getattr(aten, "_foreach_" + base)
        table[getattr(packet, overload)] = _per_element(base, overload, schema)
    return table
