"""An AOTAutograd FX graph (aten level) as a schedule of HAL segments and eager nodes.

Each call_function node whose target is an aten overload is lowered through the eager mapping table
(torch_hal._C._SegmentBuilder.lower: the same row conversion the eager kernel runs, on meta tensors
carrying the node's shapes). Maximal runs of lowered nodes become one hal::Graph each, run through
the shared pipeline and hal::compile; a node that does not lower runs eagerly on "hal" (with eager's
own CPU fallback) and its reason is counted. The schedule is built once; a call only walks it.
"""
import operator

import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.experimental.symbolic_shapes import optimization_hint

from .. import _C
from . import counters

# Graph-only rows whose size argument may be symbolic: the lowering writes a symbolic reshape (0 with
# copy_zeros for a kept dim, -1 for one derived size) or a copy to a symbolic shape.
_SYMBOLIC_SIZE_OK = {"view", "_unsafe_view", "expand", "squeeze.dim", "squeeze.dims", "unsqueeze", "squeeze",
                     "flatten.using_ints"}


# Views of a part of a value: lowered inside a segment as index_select over a constant index
# (GraphRunner._lower_slice); eager otherwise (free views of graph inputs).
_SLICES = {torch.ops.aten.slice.Tensor, torch.ops.aten.select.int, torch.ops.aten.split.Tensor,
           torch.ops.aten.split_with_sizes.default}


# PyTorch views the table lowers as copies (its graph-only rows).
_VIEWS = {"view", "_unsafe_view", "squeeze", "squeeze.dim", "squeeze.dims", "unsqueeze", "flatten.using_ints",
          "permute", "t", "transpose.int", "expand"}


def _input_permutation(name, n):
    """The permutation a t / transpose.int / permute node N applies to its input, or None (another
    view, a symbolic rank, a rank below 2)."""
    val = n.args[0].meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dim() < 2:
        return None
    rank = val.dim()
    if name == "t" and rank == 2:
        return [1, 0]
    if name == "transpose.int" and len(n.args) == 3 and all(type(d) is int for d in n.args[1:]):
        a, b = (d % rank for d in n.args[1:])
        dims = list(range(rank))
        dims[a], dims[b] = dims[b], dims[a]
        return dims
    if name == "permute" and len(n.args) == 2 and all(type(d) is int for d in n.args[1]):
        dims = [d % rank for d in n.args[1]]
        return dims if sorted(dims) == list(range(rank)) else None
    return None


def _overload_name(target):
    """"add.Tensor" for an aten overload, "hal::silu_and_mul" for a torch.ops.hal op (its catalog op
    as one node), None for anything else."""
    schema = target._schema
    ns, name = schema.name.split("::", 1)
    if ns == "hal" and not schema.overload_name:
        return schema.name
    if ns != "aten":
        return None
    return name + ("." + schema.overload_name if schema.overload_name else "")


def _wrapped_number(v):
    """A Python number where the schema wants a Tensor (AOTAutograd keeps `x * 2` as mul.Tensor(x, 2)):
    the 0-dim CPU tensor PyTorch's wrapped numbers are (floats in the default dtype, so they promote as
    in eager); the lowering makes it a graph constant."""
    dtype = torch.bool if isinstance(v, bool) else torch.int64 if isinstance(v, int) else torch.get_default_dtype()
    with unset_fake_temporarily():
        return torch.tensor(v, dtype=dtype)


def _wrap_numbers(target, args, kwargs):
    def wants_tensor(a):
        return isinstance(a.type, torch.TensorType)

    def number(v):
        return isinstance(v, (int, float, bool)) and not isinstance(v, torch.SymInt)

    schema = target._schema.arguments
    args = tuple(_wrapped_number(v) if i < len(schema) and wants_tensor(schema[i]) and number(v) else v
                 for i, v in enumerate(args))
    by_name = {a.name: a for a in schema}
    kwargs = {k: _wrapped_number(v) if k in by_name and wants_tensor(by_name[k]) and number(v) else v
              for k, v in kwargs.items()}
    return args, kwargs


def _dim(s):
    """A size as the lowering takes it: an int, or the symbol's expression as its name."""
    if isinstance(s, int):
        return s
    expr = s.node.expr
    return int(expr) if expr.is_number else str(expr)


def _hint(s):
    return s if isinstance(s, int) else optimization_hint(s)


def _meta_of(val):
    """A plain meta tensor (made outside the compiler's fake mode, which would make it a FakeTensor that
    Meta kernels refuse beside plain ones) with VAL's dtype and (hinted) sizes and strides."""
    with unset_fake_temporarily():
        return torch.empty_strided([_hint(s) for s in val.shape], [_hint(s) for s in val.stride()],
                                   dtype=val.dtype, device="meta")


def _tensor_vals(val, ints=False):
    """VAL's tensors as a list (None for absent ones; with INTS, also plain ints: a Meta kernel's side
    results such as SDPA's max_q), or None when it holds anything else (a SymInt, a host value)."""
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (tuple, list)) and all(isinstance(v, torch.Tensor) or v is None or
                                              (ints and type(v) is int) for v in val):
        return list(val)
    return None


class _Side:
    """A tensor return the catalog op does not make (mapping.hpp: returns_to_catalog), such as SDPA's
    philox seed: eagerly it is what PyTorch's Meta kernel allocates, unspecified bytes no kernel
    reads; in a segment it is one zero tensor of its shape, made when the schedule is built."""

    __slots__ = ("val",)

    def __init__(self, val):
        self.val = val

    def make(self, device):
        with unset_fake_temporarily():
            return torch.zeros([_hint(s) for s in self.val.shape], dtype=self.val.dtype, device=f"hal:{device}")


def _clone_is_value(n):
    """Whether clone node N may be its source value itself: in a segment values are contiguous and
    never written, so a clone only read (not a graph output the caller could write, nor written by
    an in-place op) needs no copy."""
    if n.target is not torch.ops.aten.clone.default:
        return False
    if n.kwargs.get("memory_format") not in (None, torch.contiguous_format, torch.preserve_format):
        return False
    return all(u.op != "output" and not (isinstance(u.target, torch._ops.OpOverload) and u.target._schema.is_mutable)
               for u in n.users)


def _writes(u, n):
    """Whether node U writes N in place (N passed where U's schema marks an argument written)."""
    if not isinstance(u.target, torch._ops.OpOverload) or not u.target._schema.is_mutable:
        return False
    args = u.target._schema.arguments
    return any(a is n and i < len(args) and args[i].alias_info is not None and args[i].alias_info.is_write
               for i, a in enumerate(u.args)) or any(
        v is n and next((a.alias_info is not None and a.alias_info.is_write for a in args if a.name == k), True)
        for k, v in u.kwargs.items())


def _copy_is_value(n):
    """Whether N, a functional copy (copy(self, src): src in self's dtype, shape and device: what
    functionalization makes of a user's x.copy_(src)), may be src itself: same dtype, shape and
    device, and N neither a graph output nor written in place."""
    if n.target is not torch.ops.aten.copy.default or len(n.args) < 2 or not all(
            isinstance(a, torch.fx.Node) for a in n.args[:2]):
        return False
    dst, src = (a.meta.get("val") for a in n.args[:2])
    if not isinstance(dst, torch.Tensor) or not isinstance(src, torch.Tensor):
        return False
    if dst.dtype != src.dtype or dst.device != src.device or list(dst.shape) != list(src.shape):
        return False
    return all(u.op != "output" and not _writes(u, n) for u in n.users)


class _Slot:
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


def _has_slot(a):
    if isinstance(a, _Slot):
        return True
    if isinstance(a, (tuple, list)):
        return any(_has_slot(x) for x in a)
    if isinstance(a, dict):
        return any(_has_slot(x) for x in a.values())
    return False


def _filler(a):
    """A function env -> _fill(a, env), planned once: a flat tuple or list of slots and constants
    (nearly every call's arguments) is a copy of a template with the slots' values put in; nested
    slots take the general _fill."""
    if isinstance(a, (tuple, list)) and not any(_has_slot(x) for x in a if not isinstance(x, _Slot)):
        template = [None if isinstance(x, _Slot) else _fill(x, None) for x in a]  # plain lists
        slots = [(k, x.index) for k, x in enumerate(a) if isinstance(x, _Slot)]
        as_tuple = isinstance(a, tuple)
        if not slots:
            return (lambda env, c=tuple(template): c) if as_tuple else (lambda env: list(template))
        if len(slots) == len(a):  # every entry a slot (a graph's outputs): gathered in C
            get = _gather([i for _, i in slots])
            return get if as_tuple else (lambda env: list(get(env)))

        def fill(env, template=template, slots=slots, as_tuple=as_tuple):
            out = template.copy()
            for k, i in slots:
                out[k] = env[i]
            return tuple(out) if as_tuple else out
        return fill
    return lambda env: _fill(a, env)


def _gather(slots):
    """A function env -> the sequence of env's entries at SLOTS (a tuple made in C: a segment's many
    inputs are gathered per call)."""
    if len(slots) >= 2:
        return operator.itemgetter(*slots)
    return (lambda env, s=slots[0]: (env[s],)) if slots else (lambda env: ())


def _fill(a, env):
    if isinstance(a, _Slot):
        return env[a.index]
    if isinstance(a, tuple):
        return tuple([_fill(x, env) for x in a])
    if isinstance(a, list):  # also FX's immutable_list, whose constructor is slow: a plain list here
        return [_fill(x, env) for x in a]
    if isinstance(a, dict):
        return {k: _fill(v, env) for k, v in a.items()}
    return a


def _readers(n):
    """The nodes reading N's value: its users and, through views of it (which alias it), theirs."""
    out, todo = [], list(n.users)
    while todo:
        u = todo.pop()
        out.append(u)
        if u.target is operator.getitem or (isinstance(u.target, torch._ops.OpOverload) and u.target.is_view):
            todo.extend(u.users)
    return out


class _Segment:
    """A run of lowered nodes being built, then compiled."""

    def __init__(self, device, frozen):
        self.builder = _C._SegmentBuilder(device)
        self.frozen = frozen     # FX placeholder -> the parameter folded in as a constant
        self.nodes = []          # lowered FX nodes, in order
        self.metas = {}          # FX node -> meta tensor(s) the lowering returned
        self.external = {}       # FX node read from outside -> its declared meta tensor
        self.aliases = {}        # FX alias node -> the lowered node it aliases (the same HAL value)
        self.views = {}          # FX transpose of a graph input -> (the input, its permutation): read in place
        self.made_views = set()  # views of self.views also made eagerly (read outside the segment)
        self.write_backs = []    # (graph input, FX node of the segment): the input takes the value after the run

    def arg(self, n):
        if n in self.metas:
            return self.metas[n]
        if n not in self.external:
            val = n.meta.get("val")
            meta = _meta_of(val)
            if n in self.frozen:
                with unset_fake_temporarily():  # the real parameter's bytes (compilers run under fake mode)
                    value = self.frozen[n].detach().cpu()
                self.builder.constant(meta, value, n.name)
                self.metas[n] = meta
                return meta
            self.builder.declare(meta, [_dim(s) for s in val.shape], n.name)
            self.external[n] = meta
        return self.external[n]


class GraphRunner:
    """Runs GM (an AOTAutograd graph) as segments and eager nodes; calling it takes the graph's
    inputs as a list (boxed) and returns its outputs as a list."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs, kind, frozen=None):
        self.gm = gm
        self.kind = kind
        self.device = next((t.device.index or 0 for t in example_inputs
                            if isinstance(t, torch.Tensor) and t.device.type == "hal"), 0)
        nodes = list(gm.graph.nodes)
        self.slot = {n: i for i, n in enumerate(nodes)}
        self.placeholders = [self.slot[n] for n in nodes if n.op == "placeholder"]
        # The placeholders lead (FX's order): a run's environment is its arguments then this tail.
        leading = self.placeholders == list(range(len(self.placeholders)))
        self._env_tail = [None] * (len(nodes) - len(self.placeholders)) if leading else None
        # Frozen parameters (inference, by request): graph constants the pipeline folds.
        ph = [n for n in nodes if n.op == "placeholder"]
        self.frozen = {ph[i]: t for i, t in (frozen or {}).items() if i < len(ph)}
        self.size = len(nodes)
        self.steps = []           # callables env -> None
        self.segments = []        # (_Segment, compiled _C._Segment)
        self.eager = []           # (node, reason)
        self.output = None
        self.launches_per_run = 0  # device kernels one run's segments launch (fused groups + op-by-op)
        self.constants = {}
        # copy_ nodes into graph inputs (AOTAutograd's kept input mutations, at the graph's end): a
        # segment that makes the value writes it back, also one flushed before the copy_ is reached.
        self._copies = [n for n in nodes if n.target is torch.ops.aten.copy_.default
                        and isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "placeholder"]
        self._claimed = set()  # copy_ nodes a flushed segment writes back
        seg = None
        for n in nodes:
            if n.op == "placeholder" or n in self._claimed:
                continue
            if n.op == "get_attr":
                self.constants[self.slot[n]] = getattr(gm, n.target)
                continue
            if n.op == "output":
                self.output = torch.fx.node.map_arg(n.args[0], lambda m: _Slot(self.slot[m]))
                self._output = _filler(self.output)
                continue
            if seg is None:
                seg = _Segment(self.device, self.frozen)
            if self._lower(seg, n):
                continue
            # A node that reads nothing of the open segment runs before it (the segment does not read
            # it either: its nodes came first), so the segment stays whole. Eager nodes keep their
            # order among themselves (random draws).
            mutates = isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable
            self._make_views(seg, [m for m in n.all_input_nodes if m in seg.views])
            if mutates or any(m in seg.metas for m in n.all_input_nodes):  # a write keeps its place
                self._flush(seg, upto=self.slot[n])
                seg = None
            self._eager_step(n)
        if seg is not None:
            self._flush(seg, upto=len(nodes))
        counters.add("graphs")

    # ---- building ----

    def _lower(self, seg, n):
        """Adds N to SEG; False (reason counted unless N computes no tensor) when it does not lower."""
        if n.op != "call_function":
            return False
        if n.target is torch.ops.aten.copy_.default and self._write_back(seg, n):
            return True
        if n.target is operator.getitem and n.args[0] in seg.metas and isinstance(seg.metas[n.args[0]], list):
            seg.metas[n] = seg.metas[n.args[0]][n.args[1]]
            seg.nodes.append(n)
            return seg.metas[n] is not None
        src = (n.args[0] if n.target is torch.ops.aten.alias.default or _clone_is_value(n)
               else n.args[1] if _copy_is_value(n) else None)
        if src in seg.metas and src not in self.frozen and isinstance(seg.metas[src], torch.Tensor):
            # An alias (or a clone only read, or a functional copy) of a value of the segment is that
            # value: no node, no kernel, no split; read outside, it is made (a view, no kernel) from
            # the segment's output after its run.
            seg.metas[n] = seg.metas[src]
            if n.target is torch.ops.aten.clone.default:  # contiguous, as later views expect
                with unset_fake_temporarily():
                    seg.metas[n] = torch.empty(seg.metas[src].shape, dtype=seg.metas[src].dtype, device="meta")
                seg.builder.same_value(seg.metas[n], seg.metas[src])
            seg.aliases[n] = seg.aliases.get(src, src)
            seg.nodes.append(n)
            counters.add("aliased_nodes")
            return True
        if (n.target is torch.ops.aten.alias.default and isinstance(src, torch.fx.Node) and src.op == "placeholder"
                and src not in self.frozen and isinstance(src.meta.get("val"), torch.Tensor)
                and src.meta["val"].layout == torch.strided and not src.meta["val"].is_complex()):
            # An alias of a graph input (a saved activation in a backward graph) read by the segment is
            # that input: no eager step; read outside, it is made (a view) from the input after the run.
            seg.metas[n] = seg.arg(src)
            seg.aliases[n] = src
            seg.nodes.append(n)
            counters.add("aliased_nodes")
            return True
        if n.target in _SLICES and n.args[0] in seg.metas and n.args[0] not in self.frozen:
            lowered = self._lower_slice(seg, n)
            if lowered:
                return True
        vals = _tensor_vals(n.meta.get("val"), ints=True)
        if vals is None or not isinstance(n.target, torch._ops.OpOverload):
            return False  # host computation (getitem of an eager result, sym sizes): a plain step
        name = _overload_name(n.target)
        reason = None
        if name is None:
            reason = "not an aten or torch.ops.hal op"
        elif name == "copy_":  # _write_back did not take it
            reason = "copy_ of a value no segment makes, or into a tensor read later (eager, in place)"
        elif name == "alias":  # of a value the segment does not make (a graph input, an eager result)
            reason = "alias of a value outside the segment (free in eager)"
        elif n.target in _SLICES:  # _lower_slice did not take it
            reason = "slice of a value outside the segment, or with symbolic bounds (free in eager)"
        elif (name in _VIEWS and isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "placeholder"
              and n.args[0] not in self.frozen):
            # A view of a graph input (a weight's transpose) costs nothing eagerly (no kernel); as a
            # graph node it would be a copy. A transpose is the segment's input read in place (the
            # segment permutes the graph input itself, in C++); other views run before the segment.
            dims = _input_permutation(name, n)
            if dims is not None:
                seg.views[n] = (n.args[0], dims)
                counters.add("input_views")
                return True
            reason = "view of a graph input (free in eager)"
        elif any(isinstance(v, torch.Tensor) and v.is_complex() for v in vals):
            reason = "complex dtype"
        elif any(isinstance(v, torch.Tensor) and v.layout != torch.strided for v in vals):
            reason = "sparse tensor"
        symbolic_attr = False

        def arg(a):
            nonlocal reason, symbolic_attr
            if not isinstance(a, torch.fx.Node):
                if isinstance(a, torch.Tensor):  # a tensor literal in the arguments (no graph value)
                    reason = reason or "a tensor constant in the arguments"
                    return None
                if isinstance(a, torch.SymInt):
                    symbolic_attr = True
                    return _hint(a)
                return a
            val = a.meta.get("val")
            if val is None:
                reason = reason or f"argument {a.name} has no recorded value"
                return None
            if isinstance(val, torch.SymInt):
                symbolic_attr = True
                return _hint(val)
            if isinstance(val, (int, float, bool)):
                return val
            if not isinstance(val, torch.Tensor):
                reason = reason or "an argument is not a tensor"
                return None
            if val.layout != torch.strided:
                reason = reason or "sparse tensor"
                return None
            if val.is_complex():
                reason = reason or "complex dtype"
                return None
            if isinstance(seg.metas.get(a), _Side):
                reason = reason or f"reads {a.name}, a side result no catalog op makes"
                return None
            return seg.arg(a)

        if reason is None:
            args = torch.fx.node.map_aggregate(n.args, lambda a: arg(a))
            kwargs = torch.fx.node.map_aggregate(n.kwargs, lambda a: arg(a))
            args, kwargs = _wrap_numbers(n.target, args, kwargs)
            if reason is None and symbolic_attr and name not in _SYMBOLIC_SIZE_OK:
                reason = "a symbolic attribute"
        if reason is None:
            out_sizes = [[_dim(s) for s in v.shape] if isinstance(v, torch.Tensor) else [] for v in vals]
            try:
                # Outside the compiler's fake mode: the lowering makes real CPU tensors (a Scalar
                # argument's constant) and runs Meta kernels on plain meta tensors.
                with unset_fake_temporarily():
                    result = seg.builder.lower(name, tuple(args), dict(kwargs), out_sizes)
            except RuntimeError as e:  # arguments the schema refuses (a Python number for a Tensor)
                result = "arguments do not match the schema: " + str(e).splitlines()[0]
            if isinstance(result, str):
                reason = result
        if reason is not None:
            self.eager.append((n, reason))
            counters.add_eager(reason)
            return False
        if isinstance(n.meta.get("val"), torch.Tensor):
            seg.metas[n] = result[0]
        else:  # the side returns: ints as PyTorch gave them, tensors made once (_Side)
            seg.metas[n] = [v if isinstance(v, int) else _Side(v) if m is None and v is not None else m
                            for m, v in zip(result, vals)]
        seg.nodes.append(n)
        counters.add("lowered_nodes")
        return True

    def _write_back(self, seg, n, upto=None):
        """N, copy_(graph input, value of SEG) with nothing reading the input afterwards (an input
        mutation AOTAutograd keeps in the graph: running stats, an optimizer's updates), is done by
        the segment: it copies the value into the input after its run, in C++, not as an eager step.
        UPTO (a later copy_, claimed while SEG is flushed at that node index): every other reader of
        the input must come before UPTO, so that none sees the new value early."""
        dst, src = n.args[0], n.args[1]
        if n.users or n.kwargs or not isinstance(dst, torch.fx.Node) or dst.op != "placeholder" or dst in self.frozen:
            return False
        if upto is not None and isinstance(src, torch.fx.Node) and self.slot[src] > upto and _copy_is_value(src):
            src = src.args[1]  # a functional copy (a user's copy_) not reached yet: its source
        src = seg.aliases.get(src, src)
        if (not isinstance(src, torch.fx.Node) or src.op == "placeholder"
                or not isinstance(seg.metas.get(src), torch.Tensor)):
            return False
        last = self.slot[n] if upto is None else upto - 1
        # (The graph's outputs are read after the whole run: they see the copy; a functional copy
        # into DST reads only its dtype and shape.)
        if any(u is not n and u.op != "output" and self.slot[u] > last
               and not (u.target is torch.ops.aten.copy.default and u.args[1] is not dst) for u in _readers(dst)):
            return False
        if any(d is dst for d, _ in seg.write_backs):
            return False
        seg.write_backs.append((dst, src))
        if upto is None:
            seg.nodes.append(n)
        else:
            self._claimed.add(n)
        counters.add("write_backs")
        return True

    def _lower_slice(self, seg, n):
        """N, a slice, split or select of a value of SEG, as index_select over a constant index (as
        the ONNX front end lowers Slice) or, for the whole dim, as the value itself, so that the
        segment does not split there (eagerly they are free views, but a split segment cannot fuse
        across them). False (N then takes the general path) for symbolic sizes or bounds."""
        src = seg.metas[n.args[0]]
        if not isinstance(src, torch.Tensor) or (n.kwargs and set(n.kwargs) != {"dim"}):
            return False
        shape = n.args[0].meta["val"].shape
        if n.target is torch.ops.aten.slice.Tensor:
            dim, start, end, step = (list(n.args[1:]) + [0, None, None, 1][len(n.args) - 1:])[:4]
            pieces = None
        elif n.target is torch.ops.aten.select.int:
            dim, start, end, step = n.args[1], n.args[2], None, 1
            pieces = None
        else:  # split.Tensor (a chunk size) or split_with_sizes (the sizes)
            dim = n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", 0)
            size = n.args[1]
            pieces = None if n.target is torch.ops.aten.split.Tensor else list(size)
        if not isinstance(dim, int) or not -len(shape) <= dim < len(shape):
            return False
        dim %= len(shape)
        extent = shape[dim]
        if not isinstance(extent, int):
            return False
        if n.target is torch.ops.aten.split.Tensor:
            if not isinstance(size, int) or size <= 0:
                return False
            pieces = [min(size, extent - b) for b in range(0, extent, size)] or [0]
        if pieces is None:  # slice / select: the one range
            if n.target is torch.ops.aten.select.int:
                if not isinstance(start, int) or not -extent <= start < extent:
                    return False
                start %= extent
                ranges = [(start, start + 1, 1)]
            else:
                if not all(isinstance(x, int) or x is None for x in (start, end, step)) or step <= 0:
                    return False
                ranges = [slice(start, end, step).indices(extent)]
        else:
            if not all(isinstance(p, int) for p in pieces) or sum(pieces) != extent:
                return False
            bounds = [sum(pieces[:k]) for k in range(len(pieces) + 1)]
            ranges = [(bounds[k], bounds[k + 1], 1) for k in range(len(pieces))]
        vals = _tensor_vals(n.meta["val"])
        if vals is None or len(vals) != len(ranges):
            return False
        metas = []
        for (b, e, st), val in zip(ranges, vals):
            with unset_fake_temporarily():  # a real CPU index (compilers run under fake mode)
                index = torch.arange(b, e, st, dtype=torch.int64)
            if index.numel() == 0 or any(not isinstance(x, int) for x in val.shape):
                return False
            if index.numel() == extent:  # the whole dim: the value itself
                metas.append(src)
                continue
            with unset_fake_temporarily():
                index_meta = torch.empty(index.shape, dtype=torch.int64, device="meta")
                seg.builder.constant(index_meta, index, f"{n.name}_index")
                picked = list(src.shape)
                picked[dim] = index.numel()
                result = seg.builder.lower("index_select", (src, dim, index_meta), {}, [picked])
                if not isinstance(result, str) and list(val.shape) != picked:  # select drops the dim
                    result = seg.builder.lower("view", (result[0], list(val.shape)), {}, [list(val.shape)])
            if isinstance(result, str):
                return False
            metas.append(result[0])
        if n.target in (torch.ops.aten.slice.Tensor, torch.ops.aten.select.int):
            if metas[0] is src:  # a slice of the whole dim: an alias
                seg.aliases[n] = seg.aliases.get(n.args[0], n.args[0])
            seg.metas[n] = metas[0]
        else:
            if any(m is src for m in metas):
                return False  # one piece is the whole value: rare; taken by the general path
            seg.metas[n] = metas
        seg.nodes.append(n)
        counters.add("lowered_nodes")
        return True

    def _make_views(self, seg, views):
        """Makes VIEWS of SEG (transposes of graph inputs) eagerly too, once each, for readers outside
        the segment."""
        for v in views:
            if v not in seg.made_views:
                seg.made_views.add(v)
                self._eager_step(v)

    def _flush(self, seg, upto):
        """Compiles SEG into a step (or its nodes into eager steps), flushed at node index UPTO."""
        lowered = [n for n in seg.nodes if n.target is not operator.getitem and n not in seg.aliases]
        # Later copies of this segment's values into inputs no one reads again.
        later = [c for c in self._copies if lowered and self.slot[c] > upto and c not in self._claimed
                 and self._write_back(seg, c, upto)]
        for c in list(later):  # a functional copy feeding only the claimed copy_ is not computed at all
            v = c.args[1]
            if isinstance(v, torch.fx.Node) and self.slot[v] > upto and set(v.users) == {c} and _copy_is_value(v):
                self._claimed.add(v)
                later.append(v)
        inside = set(seg.nodes)
        # Transposes read outside the segment: the segment returns those it reads (set_view_outputs);
        # the rest (read by no lowered node) are made eagerly.
        outside = [v for v in seg.views if not lowered or any(u not in inside for u in v.users)]
        read = set(seg.builder.input_names()) if lowered else set()
        returned = [v for v in outside if v.name in read and v not in seg.made_views]
        self._make_views(seg, [v for v in outside if v not in returned])
        if not lowered:
            for n in seg.nodes:
                self._eager_step(n)
            return
        outputs = []

        def output(n):
            for o in outputs:
                if seg.metas[n] is seg.metas[o]:
                    return o
            outputs.append(n)
            seg.builder.mark_output(seg.metas[n])
            return n
        for n in seg.nodes:
            if n in self.frozen or n in seg.aliases:
                continue
            meta = seg.metas.get(n)
            if not any(u not in inside for u in n.users):
                continue
            if isinstance(meta, torch.Tensor):
                output(n)
            elif isinstance(meta, (int, _Side)):  # a side return read outside: a constant of the schedule
                self.constants[self.slot[n]] = meta if isinstance(meta, int) else meta.make(self.device)
        aliased = [(self.slot[a], self.slot[src if src.op == "placeholder" else output(src)])
                   for a, src in seg.aliases.items() if any(u not in inside for u in a.users)]
        read = len(outputs)  # outputs read after the run; those after them only feed write-backs
        write_backs = [(self.slot[dst], output(src)) for dst, src in seg.write_backs]
        # A write-back into an input the segment reads (an optimizer's parameter): the run may
        # write the update into that input's memory itself (buffer donation), when only the
        # write-back reads the new value.
        names = seg.builder.input_names()
        aliases = [(outputs.index(src), names.index(dst.name)) for dst, src in seg.write_backs
                   if dst.name in names and dst not in seg.views and outputs.index(src) >= read]
        aliases = [(o, i) for k, (o, i) in enumerate(aliases)
                   if all(o != o2 and i != i2 for o2, i2 in aliases[:k])]
        try:
            compiled = seg.builder.compile(fold=bool(seg.frozen), output_aliases=aliases)
        except Exception as e:  # a plugin's compile error: op by op (eager) for this group, said once
            self._claimed.difference_update(later)  # they run in place when reached
            counters.warn_once(f"torch_hal.dynamo: a HAL segment of {len(lowered)} nodes did not compile; "
                               f"its nodes run eagerly: {e}", key=str(e))
            self._make_views(seg, list(seg.views))
            for n in seg.nodes:
                counters.add_eager("segment compile failed")
                self.eager.append((n, "segment compile failed"))
                self._eager_step(n)
            return
        counters.add("segments")
        if self.frozen:
            counters.add("folded_nodes", max(0, seg.builder.nodes() - compiled.node_count()))
        stats = compiled.stats()
        self.launches_per_run += stats["kernels"] + stats["op_nodes"]
        counters.add("aliased_reshapes", stats["alias_nodes"])
        counters.add("hal_compiles" if stats["cache"] == "compiled" else "hal_cache_hits")
        by_name = {n.name: n for n in seg.external}
        ins = [by_name[x] for x in seg.builder.input_names()]
        # A transpose of a graph input is read as the input, permuted by the segment.
        in_slots = [self.slot[seg.views[n][0] if n in seg.views else n] for n in ins]
        compiled.set_input_permutes([seg.views[n][1] if n in seg.views else [] for n in ins])
        compiled.set_write_backs([outputs.index(src) for _, src in write_backs])
        # Only copied into their inputs: one buffer for all, not returned (the run's per-call cost).
        compiled.set_transient_outputs(list(range(read, len(outputs))))
        compiled.set_view_outputs([ins.index(v) for v in returned])
        wb_slots = [dst for dst, _ in write_backs]
        out_slots = [self.slot[n] for n in outputs[:read] + returned]
        self.segments.append((seg, compiled, outputs))

        def step(env, run=compiled.run, ins=_gather(in_slots), out_slots=out_slots, aliased=aliased,
                 wbs=_gather(wb_slots), alias=_C._alias):
            for s, t in zip(out_slots, run(ins(env), wbs(env))):
                env[s] = t
            for a, s in aliased:
                env[a] = alias(env[s])
        self.steps.append(step)

    def _eager_step(self, n):
        fn = n.target
        if isinstance(fn, torch._ops.OpOverload):
            fn = fn._op  # the C++ callable OpOverload.__call__ forwards to: one Python frame less per call
        args = _filler(torch.fx.node.map_arg(n.args, lambda m: _Slot(self.slot[m])))
        kwargs = torch.fx.node.map_arg(n.kwargs, lambda m: _Slot(self.slot[m]))
        out = self.slot[n]
        if not kwargs:
            def step(env, fn=fn, args=args, out=out):
                env[out] = fn(*args(env))
        else:
            def step(env, fn=fn, args=args, kwargs=kwargs, out=out):
                env[out] = fn(*args(env), **_fill(kwargs, env))
        self.steps.append(step)

    # ---- running ----

    def __call__(self, args):
        if self._env_tail is not None and type(args) is list and len(args) == len(self.placeholders):
            env = args + self._env_tail  # a new list: the tail is never written
        else:
            env = [None] * self.size
            for i, a in zip(self.placeholders, args):
                env[i] = a
        args.clear()  # boxed convention: the caller's list no longer keeps the inputs alive
        for i, c in self.constants.items():
            env[i] = c
        for step in self.steps:
            step(env)
        counters.add("segment_launches", self.launches_per_run)
        return list(self._output(env))

    def explain(self):
        lines = [f"== {self.kind} graph: {len(self.segments)} HAL segment(s), {len(self.eager)} eager node(s)"]
        lines.append(self.gm.print_readable(print_output=False))
        for k, (seg, compiled, _) in enumerate(self.segments):
            lines.append(f"-- segment {k}: {len(seg.nodes)} FX nodes; HAL graph after the pipeline:")
            lines.append(compiled.graph_dump())
            lines.append(compiled.explain())
            if seg.write_backs:
                lines.append("   written back into graph inputs after the run: "
                             + ", ".join(f"{src.name} -> {dst.name}" for dst, src in seg.write_backs))
        for n, why in self.eager:
            lines.append(f"-- eager node {n.name} ({n.target}): {why}")
        return "\n".join(lines)
