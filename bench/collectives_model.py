#!/usr/bin/env python3
"""An alpha-beta model of the hal backend's allreduce (issue 35 item 5: "scale on paper and in simulation").

    HAL_BUILD_DIR=<build> PYTHONPATH=<build>/python python bench/collectives_model.py [--quick] [--json F]
        [--markdown F] [--one-host] [--link-alpha-us 30] [--passes 5] [--reps 30]

Full mode ~14 min on a 2-vCPU VM; --quick (4 sizes, 1 pass) < 1 min, a smoke test: too noisy to fit on.

The model prices the phases the SDK's host communicator runs (sdk/include/hal/sdk/collective/
host_communicator.hpp, shm_transport.hpp, gloo_transport.hpp) with one alpha (s per event) and one
beta (s per byte) per link kind:

    shared memory  alpha_shm per step (a rank bumps its counter and waits for its host's others),
                   beta_shm per byte a rank streams through memory (a copy or a reduction input);
    TCP            alpha_tcp per message latency of Gloo's unbound buffers between hosts
                   (a receive posted, the sender told, the data sent), beta_tcp per byte a rank
                   sends over its link (a leader, or a column's rank: below);
    o              what a call costs outside the communicator (torch.distributed, the stream's
                   host function, torch.hal.synchronize), measured at 1 rank.

Two paths across hosts (HostCommunicator::run_hierarchical), above 64 KiB: hosts of equal size L >= 2 run
the columns (allreduce_columns: a reduce-scatter in each host's segment, Gloo's allreduce of slice i among
the i-th ranks of every host, all L columns at once, an allgather in the segment); hosts of unequal size
the leaders' path (reduce to the leader, Gloo's allreduce among the leaders, broadcast from the leader).

All five are fitted here from the script's own measurements, taken through bench/collectives_bench.py
(torch.distributed "hal" backend, float32, median of rank 0 after a barrier; every configuration run
--passes times, interleaved, and the median of the passes' medians kept): o from 1 rank, the
shared-memory pair from 1 host x 2 ranks, the TCP pair from 2 "hosts" x 1 rank (network namespaces
joined by a veth pair; root). The model then predicts every other configuration measured here - 1 host
x 3..8 ranks, 2 hosts x 2..3 ranks, and HAL_COMM_TRANSPORT=tcp (the flat mesh) at 2 x 2 and 2 x 3 - and
prints measured against predicted per point. Last, it predicts 16 hosts x 8 ranks over stated links
(the columns with one NIC per host or one per column, the leaders' path), against a flat ring of all 128
ranks.

CPU contention. This machine has few CPUs (2 here) for up to 8 ranks, and the hosts of the two-host runs
are namespaces of the same machine. The model does not fit anything per world size: a phase in which A
ranks work at once on C CPUs is slowed by max(1, A / C) - the local phases by all ranks, the phases
among leaders by the leaders only (the others sleep on a futex meanwhile), the columns' allreduce by all
ranks (every column runs at once). That is the whole contention model; the printed errors say where it
is not enough. Here the two "hosts" share one veth pair whose per-byte cost is CPU time, which this
rule prices; so a column's bytes are priced per stream. At 16 x 8 every host is assumed to have 8 CPUs
of its own, so the factor is 1, and one NIC: the 8 columns' streams share its bandwidth (their bytes
are added on the wire), while their latencies and reductions run in parallel.

Writes nothing unless asked (--json, --markdown).
"""

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import collectives_bench as bench  # noqa: E402  (the measurement: processes, namespaces, timing)

# ---- what the code does, mirrored ----
# ShmGroup::default_half_bytes: a round moves at most this per rank.
HALF_BYTES, HALF_BYTES_ABOVE_8 = 1 << 20, 256 << 10
# HostCommunicator::kDirectBytes: rounds up to this reduce in one step (every rank reduces all slots).
DIRECT_BYTES = 64 << 10
# HostCommunicator::small_bytes(): across hosts, up to this an allreduce is folded into the agreement.
SMALL_BYTES = 64 << 10
# sizeof(HostCommunicator::Agreement) (descriptor, payload size, reason) and of a message's header
# (GlooTransport::post: dtype, count), both sent per peer in the leaders' exchange.
AGREEMENT_BYTES, HEADER_BYTES = 504, 16
# gloo::AllreduceOptions::kMaxSegmentSize: Gloo's ring sends segments of at most this.
GLOO_MAX_SEGMENT = 1 << 20
ELEMENT = 4  # float32

TERMS = ("overhead", "shm_alpha", "shm_beta", "tcp_alpha", "tcp_beta")


@dataclass(frozen=True)
class Params:
    overhead: float   # s per call outside the communicator
    shm_alpha: float  # s per step of a host's segment
    shm_beta: float   # s per byte streamed through memory by a rank
    tcp_alpha: float  # s per message latency between leaders
    tcp_beta: float   # s per byte sent by a leader over its link

    def vector(self):
        return np.array([getattr(self, t) for t in TERMS])

    def replace(self, **kw):
        return Params(**{**asdict(self), **kw})


def counts(**kw):
    """A phase's cost as counts of each parameter's unit (calls, steps, bytes, messages, bytes)."""
    return np.array([float(kw.get(t, 0.0)) for t in TERMS])


@dataclass
class Phase:
    name: str
    counts: np.ndarray
    active: int  # ranks working at once, for the contention factor


def contention(active, cpus):
    """How much slower a phase runs when ACTIVE ranks share CPUS (None: a CPU each)."""
    return 1.0 if cpus is None else max(1.0, active / cpus)


def rounds(nbytes, half):
    """The round sizes of HostCommunicator::rounds(): chunks of at most HALF bytes, at least one."""
    if nbytes <= 0:
        return [0]
    full, rest = divmod(nbytes, half)
    return [half] * full + ([rest] if rest else [])


def half_bytes(ranks):
    return HALF_BYTES if ranks <= 8 else HALF_BYTES_ABOVE_8


def local_reduce(nbytes, ranks):
    """reduce_all() on one host's segment of R ranks, as its leader (rank 0) does it, per round of m bytes:
    up to kDirectBytes (or with 1 rank), m copied into its slot, a step, all R slots reduced: (1 + R) m
    bytes, 1 step. Above, the others' slices copied into its slot, a step, its own slice reduced from its
    send buffer and the R - 1 slots (written to slot and output at once), a step, the others' reduced
    slices copied out: (1 - 1/R) m + m + (1 - 1/R) m bytes, 2 steps. Allreduce on one host and the reduce
    to the leader across hosts cost the leader the same."""
    steps = nbytes_read = 0.0
    for m in rounds(nbytes, half_bytes(ranks)):
        if m <= DIRECT_BYTES or ranks == 1:
            steps, nbytes_read = steps + 1, nbytes_read + (1 + ranks) * m
        else:
            steps, nbytes_read = steps + 2, nbytes_read + (3 - 2 / ranks) * m
    # A segment of one rank steps alone: nothing to wait for.
    return counts(shm_alpha=steps if ranks > 1 else 0, shm_beta=nbytes_read)


def local_broadcast(nbytes, ranks):
    """broadcast() from the leader: per round it copies m bytes into its slot and steps; the others copy
    out while it writes the next round."""
    rs = rounds(nbytes, half_bytes(ranks))
    return counts(shm_alpha=len(rs) if ranks > 1 else 0, shm_beta=sum(rs))


def leaders_exchange(payload, hosts):
    """leaders_exchange(): to each other leader a record and a payload message, each a header and a body.
    finish() waits for one peer after the other, and a body's receive is posted only once its header has
    come, so the latencies add up: phase one (records) and phase two (payloads) each one round for the
    headers and one per peer for the bodies: 2 + 2 (H - 1) = 2 H messages' latency in a row (Gloo sends a
    body only once told its receive is posted). Sends are buffered: the leader copies each one."""
    per_peer = AGREEMENT_BYTES + payload
    return counts(tcp_alpha=2 * hosts, tcp_beta=(hosts - 1) * (per_peer + 2 * HEADER_BYTES),
                  shm_beta=(hosts - 1) * per_peer)


def gloo_ring(nbytes, hosts):
    """gloo::allreduce (its ring; the transport leaves the algorithm unspecified): S = numSegments =
    roundUp(max(ceil(n / 1 MiB), 2 H), H) segments of ceil(n / S) bytes; each leader sends (H - 1) S / H
    of them in the reduce-scatter and as many in the allgather (two in flight), and reduces each one it
    receives in the reduce-scatter (2 inputs read per byte)."""
    segments = -(-max(-(-nbytes // GLOO_MAX_SEGMENT), 2 * hosts) // hosts) * hosts
    segment = -(-(-(-nbytes // segments)) // ELEMENT) * ELEMENT
    sends = 2 * (hosts - 1) * segments // hosts
    return counts(tcp_alpha=sends, tcp_beta=sends * segment, shm_beta=sends // 2 * segment * 2)


def columns_reduce_scatter(nbytes, per_host):
    """Step 1 of allreduce_columns() at local rank 0: rank q owns slice q, elements [E q / L, E (q + 1) / L)
    of the E = n / 4. Rounds of chunk = half / 4 / (L - 1) elements of every slice, over the longest
    slice: per round rank 0 copies its send buffer's chunk of each other slice into its slot, one
    (checked) step, then reduces its own chunk from its send buffer and the L - 1 other slots (L inputs).
    Over all rounds: the other slices copied once (E - E/L elements) and L inputs of its own slice read
    ((2 - 1/L) n bytes when L divides E)."""
    elements, ranks = nbytes // ELEMENT, per_host
    own, longest = elements // ranks, -(-elements // ranks)
    chunk = max(1, half_bytes(ranks) // ELEMENT // (ranks - 1))
    steps = max(1, -(-longest // chunk))
    return counts(shm_alpha=steps, shm_beta=(elements - own + ranks * own) * ELEMENT)


def columns_allgather(nbytes, per_host):
    """Step 3 of allreduce_columns() at local rank 0: rounds of half / 4 elements of a slice; per round its
    own chunk copied into its slot, one step, the L - 1 others' chunks copied out: n bytes in all."""
    elements, ranks = nbytes // ELEMENT, per_host
    longest = -(-elements // ranks)
    steps = max(1, -(-longest // (half_bytes(ranks) // ELEMENT)))
    return counts(shm_alpha=steps, shm_beta=elements * ELEMENT)


def columns_ring(nbytes, hosts, per_host, nics=None):
    """Step 2 of allreduce_columns() at local rank 0: Gloo's ring over its slice (E // L elements) among
    the H ranks of column 0, in place. The L columns run at once, each rank's latencies and reductions
    on its own. NICS None: a column's bytes are priced per stream (here: the veth pair's cost is CPU time,
    priced by the contention rule). NICS k: the host's L streams share k NICs, so the busiest NIC carries
    ceil(L / k) streams' bytes one after the other on the wire."""
    ring = gloo_ring(nbytes // ELEMENT // per_host * ELEMENT, hosts)
    if nics is not None:
        ring[TERMS.index("tcp_beta")] *= -(-per_host // nics)
    return ring


def takes_columns(nbytes, hosts, per_host, leaders=False):
    """allreduce_columns() or the leaders' path: run_hierarchical()'s choice, for hosts of equal size (the
    ones measured here; LEADERS: as hosts of unequal size would, with host 0 of PER_HOST ranks)."""
    return (not leaders and hosts > 1 and per_host >= 2 and nbytes > SMALL_BYTES
            and nbytes // ELEMENT >= per_host)


def path_name(nbytes, hosts, per_host, leaders=False):
    if hosts == 1:
        return "one host"
    if nbytes <= SMALL_BYTES:
        return "small"
    return "columns" if takes_columns(nbytes, hosts, per_host, leaders) else "leaders"


def phases(nbytes, hosts, per_host, leaders=False, nics=None):
    """The allreduce of NBYTES over HOSTS x PER_HOST ranks as phases, on the critical path of rank 0
    (host 0's leader, and column 0's rank), which is where collectives_bench.py times it. LEADERS: the
    leaders' path even for hosts of equal size (what hosts of unequal size take). NICS: see columns_ring."""
    ranks = hosts * per_host
    ps = [Phase("call overhead", counts(overhead=1), ranks)]
    if hosts == 1:
        return ps + [Phase("allreduce in the segment", local_reduce(nbytes, per_host), ranks)]
    steps = counts(shm_alpha=1 if per_host > 1 else 0)
    if nbytes <= SMALL_BYTES:
        # allreduce_small(): agree (a step), the host's reduction at the leader (copy, step, reduce all
        # slots), the exchange among leaders carrying it, the hosts' payloads reduced, the result in the
        # slot with the verdict (a step); every rank copies it to its output.
        local = 3 * steps + counts(shm_beta=(per_host + 1) * nbytes + hosts * nbytes + 3 * nbytes)
        return ps + [Phase("in the segment", local, ranks),
                     Phase("leaders' exchange", leaders_exchange(nbytes, hosts), hosts)]
    ps += [Phase("agreement", 2 * steps, ranks),
           Phase("agreement: leaders' exchange", leaders_exchange(0, hosts), hosts)]
    if takes_columns(nbytes, hosts, per_host, leaders):
        return ps + [
            Phase("reduce-scatter in the segment", columns_reduce_scatter(nbytes, per_host), ranks),
            Phase("columns' allreduce (Gloo ring, all at once)", columns_ring(nbytes, hosts, per_host, nics), ranks),
            Phase("allgather in the segment", columns_allgather(nbytes, per_host), ranks),
        ]
    return ps + [
        Phase("reduce to the leader", local_reduce(nbytes, per_host), ranks),
        Phase("leaders' allreduce (Gloo ring)", gloo_ring(nbytes, hosts), hosts),
        Phase("broadcast from the leader", local_broadcast(nbytes, per_host), ranks),
    ]


def design(nbytes, hosts, per_host, cpus, leaders=False, nics=None):
    """The counts of every parameter's unit, each phase scaled by its contention: time = design . params."""
    return sum(contention(p.active, cpus) * p.counts for p in phases(nbytes, hosts, per_host, leaders, nics))


def predict(params, nbytes, hosts, per_host, cpus=None, leaders=False, nics=None):
    return float(design(nbytes, hosts, per_host, cpus, leaders, nics) @ params.vector())


def fit(rows, free, known):
    """Least squares for the parameters named FREE, the others taken from KNOWN, over ROWS of
    (design vector, measured seconds). Relative errors are minimised (each row divided by its measurement),
    so 8 B and 64 MiB weigh alike; a parameter the data would make negative is 0 and the rest refitted."""
    idx = [TERMS.index(f) for f in free]
    base = known.vector()
    a = np.array([[d[i] / y for i in idx] for d, y in rows])
    b = np.array([(y - d @ base + sum(d[i] * base[i] for i in idx)) / y for d, y in rows])
    values = dict.fromkeys(free, 0.0)
    active = list(range(len(free)))
    while active:
        sol, *_ = np.linalg.lstsq(a[:, active], b, rcond=None)
        if (sol >= 0).all():
            values.update({free[j]: float(v) for j, v in zip(active, sol)})
            break
        active = [j for j, v in zip(active, sol) if v > 0]
    return known.replace(**values)


# ---- measuring ----

FULL = dict(sizes=[8, 512, 4 << 10, 32 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20],
            reps=30, passes=5, one_host=list(range(1, 9)), two_hosts=[1, 2, 3], flat=[2, 3])
QUICK = dict(sizes=[8, 64 << 10, 1 << 20, 64 << 20], reps=8, passes=1, one_host=[1, 2, 4, 8], two_hosts=[1, 2],
             flat=[])
# Untimed operations before the first size (collectives_bench.worker's SETTLE): a new communicator's first
# few dozen operations across namespaces took ~8 ms each here, whatever their size.
SETTLE = 60


@dataclass
class Config:
    hosts: int
    per_host: int
    transport: str = "auto"  # or "tcp": HAL_COMM_TRANSPORT=tcp, every rank its own host

    def label(self):
        flat = ", flat TCP" if self.transport == "tcp" else ""
        return f"{self.hosts} host{'s' if self.hosts > 1 else ''} x {self.per_host}{flat}"

    def model_shape(self):
        """(hosts, ranks per host) as the communicator sees them: the flat mesh makes every rank a host."""
        if self.transport == "tcp":
            return self.hosts * self.per_host, 1
        return self.hosts, self.per_host


def configs(plan):
    return ([Config(1, r) for r in plan["one_host"]] + [Config(2, r) for r in plan["two_hosts"]] +
            [Config(2, r, "tcp") for r in plan["flat"]])


def measure(plan, log):
    """Runs every configuration of PLAN through collectives_bench.run(), PASSES times, the configurations
    interleaved. Returns {label: (Config, {bytes: s}, [per-pass {bytes: s}], [load averages])}: a point is
    the median of its passes' medians. Not the lowest: other work on this VM made some passes faster too,
    at every size at once; and across namespaces a pass sometimes runs in a state where every message
    takes 4-12 ms (multiples of the kernel's tick); the median keeps the common case of both."""
    cs = configs(plan)
    runs = {c.label(): [] for c in cs}
    loads = {c.label(): [] for c in cs}
    two = any(c.hosts > 1 for c in cs)
    with bench.two_namespaces() if two else contextlib.nullcontext() as hosts:
        for k in range(plan["passes"]):
            for c in cs:
                log(f"pass {k + 1}/{plan['passes']}: {c.label()}" + (" (network namespaces)" if c.hosts > 1 else ""))
                env = {"HAL_COMM_TRANSPORT": "tcp"} if c.transport == "tcp" else None
                loads[c.label()].append(os.getloadavg()[0])
                runs[c.label()].append(bench.run("hal", c.hosts * c.per_host, plan["sizes"], plan["reps"],
                                                 hosts if c.hosts > 1 else None, env, settle=SETTLE))
    return {c.label(): (c, {n: statistics.median(r[n] for r in runs[c.label()]) for n in plan["sizes"]},
                        runs[c.label()], loads[c.label()]) for c in cs}


def fit_all(measured, cpus):
    """o from 1 rank, the shared-memory pair from 1 host x 2, the TCP pair from 2 hosts x 1, in that order
    (each fit takes the ones before as known). Returns the params, the labels fitted on, and the
    bandwidth of the 1-rank fit's copies (s per byte: for comparison only; one process copying alone
    streams faster than two ranks through a segment, whose beta the model uses)."""
    def rows(label):
        c, times = measured[label][:2]
        return [(design(n, *c.model_shape(), cpus), t) for n, t in times.items()]

    one, two, tcp = Config(1, 1).label(), Config(1, 2).label(), Config(2, 1).label()
    p = fit(rows(one), ["overhead", "shm_beta"], Params(0, 0, 0, 0, 0))
    alone_beta = p.shm_beta
    p = fit(rows(two), ["shm_alpha", "shm_beta"], p.replace(shm_beta=0.0))
    fitted_on = [one, two]
    if tcp in measured:
        p = fit(rows(tcp), ["tcp_alpha", "tcp_beta"], p)
        fitted_on.append(tcp)
    return p, fitted_on, alone_beta


# ---- at scale ----

GBIT = 1e9 / 8  # bytes per second in a Gb/s


def at_scale(p, sizes, link_alpha, hosts=16, per_host=8):
    """At HOSTS x PER_HOST, for a 100 and a 25 Gb/s link of latency LINK_ALPHA per message: the columns
    (hosts of equal size) with one NIC per host, which the PER_HOST columns' streams share ("hier"), and
    with a NIC per column ("rails"); the leaders' path (what hosts of unequal size take), one leader per
    NIC; and a flat ring of all ranks over TCP (HAL_COMM_TRANSPORT=tcp: every rank its own host). A single
    stream is assumed to reach the link's speed. The flat ring's neighbours on one host talk over loopback
    TCP and it runs at its slowest hop: "flat" takes loopback at the TCP beta measured here (this software
    stack), "flat_ideal" at the link's beta (a bound no flat ring beats). Ranks placed host by host, so
    each NIC carries one ring edge each way."""
    rows = []
    for gbits in (100, 25):
        link = p.replace(tcp_alpha=link_alpha, tcp_beta=1 / (gbits * GBIT))
        flat = link.replace(tcp_beta=max(link.tcp_beta, p.tcp_beta))
        for n in sizes:
            rows.append({"link_gbits": gbits, "bytes": n,
                         "hier_s": predict(link, n, hosts, per_host, nics=1),
                         "rails_s": predict(link, n, hosts, per_host, nics=per_host),
                         "leaders_s": predict(link, n, hosts, per_host, leaders=True),
                         "flat_s": predict(flat, n, hosts * per_host, 1),
                         "flat_ideal_s": predict(link, n, hosts * per_host, 1),
                         "phases": {ph.name: float(ph.counts @ link.vector())
                                    for ph in phases(n, hosts, per_host, nics=1)},
                         "leaders_phases": {ph.name: float(ph.counts @ link.vector())
                                            for ph in phases(n, hosts, per_host, leaders=True)}})
    return rows


# ---- output ----

def human(n):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def us(s):
    return f"{s * 1e6:,.0f}" if s >= 1e-4 else f"{s * 1e6:.1f}"


def report(p, alone_beta, measured, fitted_on, cpus, scale, link_alpha, elapsed):
    """Everything as one dict (the --json output). The 1-rank run only calibrates o: it is not a point."""
    points, passes = [], {}
    for label, (c, times, runs, loads) in measured.items():
        passes[label] = {"medians_s": [{str(n): t for n, t in r.items()} for r in runs], "load_average": loads}
        if c.hosts * c.per_host == 1:
            continue
        for n, t in sorted(times.items()):
            pred = predict(p, n, *c.model_shape(), cpus)
            low, high = min(r[n] for r in runs), max(r[n] for r in runs)
            points.append({"config": label, "hosts": c.hosts, "per_host": c.per_host, "transport": c.transport,
                           "bytes": n, "path": path_name(n, *c.model_shape()), "measured_s": t,
                           "predicted_s": pred, "error": pred / t - 1, "spread": high / low,
                           "in_range": low <= pred <= high, "fit": label in fitted_on})
    checked = [abs(x["error"]) for x in points if not x["fit"]]
    return {"cpus": cpus, "params": asdict(p), "alone_beta": alone_beta, "fitted_on": fitted_on, "points": points,
            "median_abs_error_checked": statistics.median(checked) if checked else None, "passes": passes,
            "at_scale": scale, "elapsed_s": elapsed,
            "assumptions": {"link_alpha_s": link_alpha, "hosts": 16, "per_host": 8,
                            "cpus_at_scale": "a CPU per rank (no contention)",
                            "nics_at_scale": "hier: one NIC per host, shared by the 8 columns' streams; "
                                             "rails: one per column; leaders: one leader per NIC",
                            "loopback_beta_s_per_byte": p.tcp_beta}}


def gbs(beta):
    """A beta (s per byte) as GB/s."""
    return f"{1 / beta / 1e9:.2f} GB/s" if beta else "-"


def param_lines(p):
    return [f"o (per call)             {p.overhead * 1e6:8.1f} us",
            f"alpha_shm (per step)     {p.shm_alpha * 1e6:8.2f} us",
            f"beta_shm (per byte)      {p.shm_beta * 1e9:8.4f} ns  ({gbs(p.shm_beta)})",
            f"alpha_tcp (per message)  {p.tcp_alpha * 1e6:8.1f} us",
            f"beta_tcp (per byte)      {p.tcp_beta * 1e9:8.4f} ns  ({gbs(p.tcp_beta)})"]


def print_report(r):
    p = Params(**r["params"])
    print(f"\nfitted ({', '.join(r['fitted_on'])}; {r['cpus']} CPUs):")
    for line in param_lines(p):
        print("  " + line)
    print(f"  (1 rank copying alone: {gbs(r['alone_beta'])})")
    loads = [a for v in r["passes"].values() for a in v["load_average"]]
    print(f"\nmeasured: the median of {len(next(iter(r['passes'].values()))['medians_s'])} passes' medians; "
          f"load average {min(loads):.1f}-{max(loads):.1f} during the runs; spread = highest / lowest pass")
    print(f"{'configuration':<24} {'bytes':>8} {'measured us':>12} {'predicted us':>13} {'error':>8} {'spread':>7}")
    for x in r["points"]:
        tag = "  (fit)" if x["fit"] else ""
        print(f"{x['config']:<24} {human(x['bytes']):>8} {us(x['measured_s']):>12} {us(x['predicted_s']):>13} "
              f"{100 * x['error']:>+7.0f}% {x['spread']:>7.2f}{tag}")
    by = {}
    for x in r["points"]:
        by.setdefault(x["config"], []).append(x)
    several = len(next(iter(r["passes"].values()))["medians_s"]) > 1
    print("\nper configuration: median |error|" + ("; sizes whose prediction lies within the passes' range"
                                                   if several else ""))
    for k, xs in by.items():
        inside = f"  {sum(x['in_range'] for x in xs)}/{len(xs)}" if several else ""
        print(f"  {k:<24} {100 * statistics.median(abs(x['error']) for x in xs):>4.0f}%{inside}")
    if r["median_abs_error_checked"] is not None:
        print(f"median |error| over the points not fitted on: {100 * r['median_abs_error_checked']:.0f}%")
    if r["at_scale"]:
        a = r["assumptions"]
        print(f"\nprediction, 16 hosts x 8 ranks (o, alpha_shm, beta_shm as fitted; a CPU per rank; between hosts "
              f"{a['link_alpha_s'] * 1e6:.0f} us per message; columns: one NIC per host shared by the 8 columns, "
              f"or one per column; leaders' path: unequal hosts; flat ring: loopback TCP at beta_tcp, or at link "
              f"speed)")
        print(f"{'link':>8} {'bytes':>8} {'columns us':>11} {'NIC/column':>11} {'leaders us':>11} "
              f"{'flat ring us':>13} {'flat / cols':>12} {'flat, link speed':>17} {'/ cols':>7}")
        for x in r["at_scale"]:
            hier, flat, ideal = x["hier_s"], x["flat_s"], x["flat_ideal_s"]
            print(f"{x['link_gbits']:>4} Gb {human(x['bytes']):>8} {us(hier):>11} {us(x['rails_s']):>11} "
                  f"{us(x['leaders_s']):>11} {us(flat):>13} {flat / hier:>12.2f} {us(ideal):>17} "
                  f"{ideal / hier:>7.2f}")
        for x in r["at_scale"]:
            if x["bytes"] in (8, max(y["bytes"] for y in r["at_scale"])):
                for key, what in (("phases", "columns"), ("leaders_phases", "leaders")):
                    parts = ", ".join(f"{k} {us(v)}" for k, v in x[key].items())
                    print(f"  {x['link_gbits']} Gb/s, {human(x['bytes'])}, {what}: {parts} us")
                    if x["bytes"] == 8:
                        break  # one path up to 64 KiB


def markdown(r):
    p = Params(**r["params"])
    out = ["| parameter | value | fitted on |", "| --- | ---: | --- |",
           f"| o, per call | {p.overhead * 1e6:.1f} µs | 1 rank |",
           f"| α_shm, per step | {p.shm_alpha * 1e6:.2f} µs | 1 host x 2 |",
           f"| β_shm, per byte | {p.shm_beta * 1e9:.4f} ns ({gbs(p.shm_beta)}) | 1 host x 2 |"]
    if p.tcp_beta:
        out += [f"| α_tcp, per message | {p.tcp_alpha * 1e6:.1f} µs | 2 hosts x 1 |",
                f"| β_tcp, per byte | {p.tcp_beta * 1e9:.4f} ns ({gbs(p.tcp_beta)}) | 2 hosts x 1 |"]
    sizes = sorted({x["bytes"] for x in r["points"]})
    out += ["", "| configuration | " + " | ".join(human(n) for n in sizes) + " |",
            "| --- |" + " ---: |" * len(sizes)]
    by = {}
    for x in r["points"]:
        by.setdefault(x["config"] + (" (fit)" if x["fit"] else ""), {})[x["bytes"]] = x
    for label, row in by.items():
        cells = [f"{us(row[n]['measured_s'])} / {us(row[n]['predicted_s'])} ({100 * row[n]['error']:+.0f}%)"
                 if n in row else "" for n in sizes]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    if r["at_scale"]:
        out += ["", "| link | bytes | columns, 1 NIC per host | columns, 1 NIC per column | leaders' path "
                "(unequal hosts) | flat ring (loopback as here) | flat ring (every hop at link speed) |",
                "| --- |" + " ---: |" * 6]
        for x in r["at_scale"]:
            out.append(f"| {x['link_gbits']} Gb/s | {human(x['bytes'])} | {us(x['hier_s'])} µs | "
                       f"{us(x['rails_s'])} µs | {us(x['leaders_s'])} µs | {us(x['flat_s'])} µs | "
                       f"{us(x['flat_ideal_s'])} µs |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="few sizes, configurations and repetitions (< 2 min)")
    ap.add_argument("--reps", type=int, help="repetitions per size (default: 30, --quick 8)")
    ap.add_argument("--passes", type=int, help="runs of every configuration, interleaved (default: 5, --quick 1)")
    ap.add_argument("--one-host", action="store_true", help="no network namespaces (no root): shared memory only")
    ap.add_argument("--link-alpha-us", type=float, default=30.0,
                    help="inter-host latency per message assumed at 16 x 8 (default 30 us: a TCP round trip)")
    ap.add_argument("--json", help="write the parameters, every point and the prediction here")
    ap.add_argument("--markdown", help="write the tables here (as in docs/collectives.md)")
    args = ap.parse_args()
    plan = dict(QUICK if args.quick else FULL)
    for k in ("reps", "passes"):
        if getattr(args, k):
            plan[k] = getattr(args, k)
    if args.one_host:
        plan.update(two_hosts=[], flat=[])
    elif os.geteuid() != 0:
        raise SystemExit("the two-host runs need root (network namespaces); --one-host fits shared memory only")
    cpus = len(os.sched_getaffinity(0))
    start = time.monotonic()
    measured = measure(plan, lambda m: print(m, file=sys.stderr, flush=True))
    p, fitted_on, alone_beta = fit_all(measured, cpus)
    scale = at_scale(p, plan["sizes"], args.link_alpha_us * 1e-6) if p.tcp_beta else []
    r = report(p, alone_beta, measured, fitted_on, cpus, scale, args.link_alpha_us * 1e-6, time.monotonic() - start)
    print_report(r)
    print(f"\n{r['elapsed_s']:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(r))


if __name__ == "__main__":
    main()
