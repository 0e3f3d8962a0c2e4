"""torch_hal.dynamo's counters (stats(), reset_stats()) and once-only warnings."""
import collections
import threading
import warnings

_lock = threading.Lock()
_counts = collections.Counter()
_eager = collections.Counter()
_warned = set()


def add(name, n=1):
    with _lock:
        _counts[name] += n


def add_eager(reason):
    with _lock:
        _counts["eager_nodes"] += 1
        _eager[reason] += 1


def warn_once(message, key=None):
    """Warns MESSAGE unless one with the same KEY (default: MESSAGE) was warned in this process."""
    key = message if key is None else key
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def snapshot():
    with _lock:
        out = {k: _counts.get(k, 0) for k in ("graphs", "segments", "lowered_nodes", "eager_nodes", "hal_compiles",
                                              "hal_cache_hits", "folded_nodes", "aliased_nodes",
                                              "aliased_reshapes", "segment_launches", "input_views",
                                              "write_backs")}
        out["eager_reasons"] = dict(_eager)
        return out


def reset():
    with _lock:
        _counts.clear()
        _eager.clear()
