"""What the tools know about one aten op call: its names, whether it touches the "hal" device, which
arguments it writes, forward or backward, and the HAL_<TOOL>_LIST / HAL_<TOOL>_DISABLE_LIST filters."""
import functools
import os
import re

import torch


class ToolEnvError(ValueError):
    """A HAL_* variable of the op tools is malformed; the message names it and the expected form."""


def env_error(var, value, expected):
    return ToolEnvError(f"{var}={value!r}: expected {expected}")


@functools.lru_cache(maxsize=None)
def names(func):
    """(base, full) of an OpOverload: ("add", "add.Tensor"), ("mm", "mm.default")."""
    base = func._schema.name.split("::", 1)[-1]
    return base, f"{base}.{func._overloadname}"


def op_id(func):
    """The op's name as a path component and a replay key: "aten.add.Tensor"."""
    ns = func._schema.name.split("::", 1)[0]
    return f"{ns}.{names(func)[1]}"


def resolve(op):
    """The OpOverload for an op_id ("aten.add.Tensor"); ValueError naming it when there is none."""
    parts = op.split(".")
    if len(parts) != 3:
        raise ValueError(f"{op!r} is not an op id of the form namespace.name.overload")
    try:
        return getattr(getattr(getattr(torch.ops, parts[0]), parts[1]), parts[2])
    except AttributeError as e:
        raise ValueError(f"no operator {op!r} in this torch ({torch.__version__})") from e


def family(name):
    """The op a name is a variant of: "add" for add.Tensor, aten::add_.Tensor, aten._foreach_add_.List."""
    name = name.split("::", 1)[-1]
    base = (name[len("aten."):] if name.startswith("aten.") else name).split(".", 1)[0]
    if base.startswith("_foreach_"):
        base = base[len("_foreach_"):]
    return base.rstrip("_") or base


# Arguments ops write although their schema does not say so (native_batch_norm's running stats).
_UNDECLARED_WRITES = {"native_batch_norm": (3, 4)}


@functools.lru_cache(maxsize=None)
def written_args(func):
    """Indices (schema order) of the arguments the op writes (in-place self, out=)."""
    return tuple(i for i, a in enumerate(func._schema.arguments)
                 if a.alias_info is not None and a.alias_info.is_write) + _UNDECLARED_WRITES.get(names(func)[0], ())


@functools.lru_cache(maxsize=None)
def is_random(func):
    return torch.Tag.nondeterministic_seeded in func.tags


@functools.lru_cache(maxsize=None)
def is_uninitialized(func):
    """Ops whose outputs hold no defined values (empty, new_empty, ...) or depend on the storage beyond
    the input view (as_strided), which copies of the inputs do not have: only metadata can be compared."""
    base = names(func)[0]
    return base.startswith(("empty", "new_empty", "_empty")) or base in ("resize_", "set_", "as_strided",
                                                                          "as_strided_")


def schema_args(func, args, kwargs):
    """The call's arguments in schema order (defaults filled) — how written_args indexes them."""
    out = list(args)
    for a in func._schema.arguments[len(args):]:
        if a.name in kwargs:
            out.append(kwargs[a.name])
        elif a.has_default_value():
            out.append(a.default_value)
        else:
            out.append(None)
    return out


def _on_hal(x):
    return (isinstance(x, torch.Tensor) and x.device.type == "hal") or (
        isinstance(x, torch.device) and x.type == "hal")


def leaves(args, kwargs):
    """The arguments of an aten call, lists (Tensor[], int[]) flattened: aten arguments nest one level,
    and this is cheaper than a pytree walk on every op."""
    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)):
            yield from a
        else:
            yield a


def tensors(args, kwargs):
    return [x for x in leaves(args, kwargs) if isinstance(x, torch.Tensor)]


def hal_device(args, kwargs):
    """The first "hal" device among the tensors and device= values of a call, else None."""
    for x in leaves(args, kwargs):
        if _on_hal(x):
            return x if isinstance(x, torch.device) else x.device
        if isinstance(x, str) and re.fullmatch(r"hal(:\d+)?", x):  # device="hal:0"
            return torch.device(x)
    return None


def touches_hal(args, kwargs):
    """Whether a tensor argument (or a device= argument) of the call is on a "hal" device."""
    return hal_device(args, kwargs) is not None


def phase():
    """("backward", node name) inside the autograd engine's run of a node, else ("forward", None)."""
    node = torch._C._current_autograd_node()
    return ("forward", None) if node is None else ("backward", node.name())


class OpFilter:
    """Which ops a tool acts on: HAL_<TOOL>_LIST (default: every op) minus HAL_<TOOL>_DISABLE_LIST (wins).
    Each is comma-separated; an item is an op name ("mm", "add.Tensor", "aten::add_.Tensor") or a regex
    that must match a whole name ("add.*", "_foreach_.*"). A name without an overload matches every
    overload. ``ops`` / ``disable`` given to a tool replace the variables."""

    def __init__(self, tool, ops=None, disable=None):
        self.list_var, self.disable_var = f"HAL_{tool}_LIST", f"HAL_{tool}_DISABLE_LIST"
        self.patterns = self._parse(self.list_var, ops)
        self.disabled = self._parse(self.disable_var, disable)
        self._verdicts = {}

    @staticmethod
    def _parse(var, given):
        if given is None:
            given = os.environ.get(var, "")
        items = given.split(",") if isinstance(given, str) else list(given)
        out = []
        for item in items:
            item = item.strip()
            if not item:
                continue
            if item.startswith("aten::"):
                item = item[len("aten::"):]
            try:
                out.append((item, re.compile(item)))
            except re.error as e:
                raise env_error(var, given, f"comma-separated aten op names or regexes; {item!r} is not a "
                                            f"valid regex ({e})") from None
        return out

    @staticmethod
    def _matches(patterns, func):
        base, full = names(func)
        return any(p.fullmatch(base) or p.fullmatch(full) for _, p in patterns)

    def __call__(self, func):
        v = self._verdicts.get(func)
        if v is None:
            v = (not self.patterns or self._matches(self.patterns, func)) and not self._matches(self.disabled, func)
            self._verdicts[func] = v
        return v

    def regex(self):
        """The filter as one ECMAScript regex over "name.overload" (for the C++ forced-fallback list);
        None when it selects every op."""
        def alt(ps):
            return "|".join(f"(?:{src})" for src, _ in ps)

        if not self.patterns and not self.disabled:
            return None
        overload = r"(?:\.[A-Za-z0-9_]+)?"
        sel = f"(?:{alt(self.patterns)}){overload}" if self.patterns else r".*"
        if self.disabled:
            return f"(?!(?:{alt(self.disabled)}){overload}$){sel}"
        return sel
