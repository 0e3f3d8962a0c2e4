"""torch.compile(model, backend="hal"): Dynamo and AOTAutograd graphs through the HAL graph pipeline.

    model = torch.compile(model, backend="hal")          # or backend=torch_hal.compile_backend

Forward and backward aten graphs are lowered node by node through the eager mapping table; runs of
lowered nodes become HAL graphs (hal::run_pipeline, hal::compile: fusion where the plugin compiles
graphs, the compile cache in memory and on disk), the other nodes run eagerly on "hal" with a
counted reason. stats() gives the counts, explain() the graphs, partition and graph breaks.
"""
import torch

from . import counters
from .backend import compile_backend, decompositions, next_serial, reset, runners


def stats():
    """Counters since the last reset_stats(): graphs (FX graphs compiled), segments (HAL graphs),
    lowered_nodes, eager_nodes and eager_reasons (reason -> count), hal_compiles (segments
    compiled by a plugin), hal_cache_hits (segments from the memory or disk cache), folded_nodes
    (removed by constant folding of frozen weights), aliased_nodes (aten.alias nodes that are
    their segment's value: no node, no kernel), aliased_reshapes (segment reshapes run as metadata
    by the HAL runtime: no kernel), input_views (transposes of graph inputs a segment reads in
    place: no eager view call), segment_launches (device kernels the segments' runs launched:
    fused groups' kernels plus op-by-op nodes), and the
    process's HAL compile-cache counters under "hal" (graph_compiles, disk_hits, ...)."""
    from .. import _C

    out = counters.snapshot()
    out["hal"] = dict(_C._hal_compile_counters())
    return out


def reset_stats():
    reset()


def explain(model, *inputs, **kwargs):
    """Compiles MODEL with backend "hal" on INPUTS and returns (and prints) a report: Dynamo's graph
    breaks, each FX graph, each HAL segment after the pipeline with its partition per plugin (fused
    groups, kernel counts, op-by-op nodes), and the eager nodes with why."""
    torch._dynamo.reset()
    before = next_serial()
    dyn = torch._dynamo.explain(model)(*inputs, **kwargs)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=compile_backend)
    compiled(*inputs, **kwargs)
    lines = [f"graphs: {dyn.graph_count}, graph breaks: {dyn.graph_break_count}"]
    for b in dyn.break_reasons:
        lines.append(f"  break: {b.reason}")
    for r in runners(since=before):
        lines.append(r.explain())
    text = "\n".join(lines)
    print(text)
    return text


__all__ = ["compile_backend", "decompositions", "explain", "stats", "reset_stats"]
