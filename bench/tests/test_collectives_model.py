"""bench/collectives_model.py on synthetic timings: fitting recovers known alphas and betas, and the
predictions match costs worked out by hand from the communicator's phases. No build, no root, no
processes: the measurement is replaced by the model's own output."""
import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import collectives_model as m  # noqa: E402

MiB, KiB = 1 << 20, 1 << 10
TRUE = m.Params(overhead=30e-6, shm_alpha=6e-6, shm_beta=0.25e-9, tcp_alpha=120e-6, tcp_beta=0.6e-9)


def synthetic(params, cpus, noise=None):
    """What measure() returns, made by the model: {label: (Config, {bytes: seconds})}."""
    rng = np.random.default_rng(1)
    out = {}
    for c in (m.Config(1, 1), m.Config(1, 2), m.Config(1, 4), m.Config(2, 1), m.Config(2, 2), m.Config(2, 2, "tcp")):
        h, l = c.model_shape()
        times = {}
        for n in m.FULL["sizes"]:
            t = m.predict(params, n, h, l, cpus)
            times[n] = t * (1 + rng.uniform(-noise, noise)) if noise else t
        out[c.label()] = (c, times, [times], [0.0])  # one pass, load average 0
    return out


def test_fit_recovers_known_parameters():
    p, fitted_on, _ = m.fit_all(synthetic(TRUE, cpus=2), cpus=2)
    assert fitted_on == ["1 host x 1", "1 host x 2", "2 hosts x 1"]
    np.testing.assert_allclose(p.vector(), TRUE.vector(), rtol=1e-6)


def test_fit_with_noise_stays_close():
    p, _, _ = m.fit_all(synthetic(TRUE, cpus=2, noise=0.03), cpus=2)
    np.testing.assert_allclose(p.vector(), TRUE.vector(), rtol=0.15)


def test_fit_clamps_a_negative_parameter_to_zero():
    # Timings with no per-step cost and a little noise: alpha may not come out negative.
    flat = TRUE.replace(shm_alpha=0.0)
    p, _, _ = m.fit_all(synthetic(flat, cpus=2, noise=0.05), cpus=2)
    assert p.shm_alpha >= 0
    assert p.shm_beta == pytest.approx(flat.shm_beta, rel=0.15)


def test_rounds_follow_the_slot_halves():
    assert m.rounds(0, MiB) == [0]
    assert m.rounds(8, MiB) == [8]
    assert m.rounds(2 * MiB + 4, MiB) == [MiB, MiB, 4]
    assert m.half_bytes(8) == MiB and m.half_bytes(9) == 256 * KiB


def test_one_host_by_hand():
    p = TRUE
    # 8 B, 4 ranks: one round, one step, every rank copies 8 B in and reduces 4 slots.
    assert m.predict(p, 8, 1, 4) == pytest.approx(p.overhead + p.shm_alpha + 5 * 8 * p.shm_beta)
    # 3 MiB, 2 ranks: 3 rounds of 1 MiB, each 2 steps and 2 MiB streamed (the other's half copied in, a
    # half reduced from 2 inputs, the other's reduced half copied out).
    assert m.predict(p, 3 * MiB, 1, 2) == pytest.approx(p.overhead + 6 * p.shm_alpha + 6 * MiB * p.shm_beta)
    # 4 ranks: 3/4 in, 1 (4 quarters) reduced, 3/4 out per round.
    assert m.predict(p, MiB, 1, 4) == pytest.approx(p.overhead + 2 * p.shm_alpha + 2.5 * MiB * p.shm_beta)
    # 4 ranks on 2 CPUs: everything twice as long.
    assert m.predict(p, 3 * MiB, 1, 4, cpus=2) == pytest.approx(2 * m.predict(p, 3 * MiB, 1, 4))


def test_two_hosts_small_by_hand():
    p = TRUE
    # 8 B at 2 hosts x 3: 3 steps; the leader copies 8 B in, reduces 3 slots, keeps its payload, reduces 2
    # hosts' payloads, writes the result to the slot and to its output: (3 + 2 + 4) x 8 B; the exchange:
    # 2 H = 4 latencies, a record (504 B), the payload and two 16 B headers to the other leader, which
    # it also copies (buffered sends).
    n, exchanged = 8, 504 + 8
    expected = (p.overhead + 3 * p.shm_alpha + 9 * n * p.shm_beta
                + 4 * p.tcp_alpha + (exchanged + 32) * p.tcp_beta + exchanged * p.shm_beta)
    assert m.predict(p, n, 2, 3) == pytest.approx(expected)


def test_two_hosts_large_leaders_by_hand():
    p = TRUE
    # The leaders' path (hosts of unequal size; forced here on equal ones). 1 MiB at 2 hosts x 2: agreement
    # (2 steps, an exchange without payload: 4 latencies, 504 + 32 B sent, 504 B copied); reduce to the
    # leader (1 round above 64 KiB: 2 steps, 2 MiB); Gloo's ring between 2 leaders (4 segments of 256 KiB:
    # 2 sent, 2 received and reduced, 2 inputs each = 1 MiB read; 4 latencies); the broadcast (1 step,
    # 1 MiB copied in).
    expected = (p.overhead + 2 * p.shm_alpha + 4 * p.tcp_alpha + 536 * p.tcp_beta + 504 * p.shm_beta
                + 2 * p.shm_alpha + 2 * MiB * p.shm_beta
                + 4 * p.tcp_alpha + MiB * p.tcp_beta + MiB * p.shm_beta
                + p.shm_alpha + MiB * p.shm_beta)
    assert m.predict(p, MiB, 2, 2, leaders=True) == pytest.approx(expected)
    # On 2 CPUs, the local phases (4 ranks) take twice as long; the leaders' phases (2) do not.
    local = p.overhead + 5 * p.shm_alpha + 3 * MiB * p.shm_beta  # the ring's reduction is the leaders'
    assert m.predict(p, MiB, 2, 2, cpus=2, leaders=True) == pytest.approx(expected + local)


def agreement(p, hosts, per_host):
    """A bare agreement by hand: 2 steps (none with 1 rank per host), an exchange among leaders without
    payload: 2 H latencies, (H - 1) records of 504 B and 2 headers of 16 B sent, the records copied."""
    return ((2 * p.shm_alpha if per_host > 1 else 0) + 2 * hosts * p.tcp_alpha
            + (hosts - 1) * (536 * p.tcp_beta + 504 * p.shm_beta))


def test_which_path():
    # Equal hosts of L >= 2 above 64 KiB: the columns; up to 64 KiB the small path; 1 rank per host (and
    # the flat mesh) or leaders=True (unequal hosts): the leaders.
    assert m.takes_columns(64 * KiB + 4, 2, 2) and m.takes_columns(64 * MiB, 16, 8)
    assert not m.takes_columns(64 * KiB, 2, 2)
    assert not m.takes_columns(MiB, 2, 1) and not m.takes_columns(MiB, 4, 1)
    assert not m.takes_columns(MiB, 2, 2, leaders=True) and not m.takes_columns(MiB, 1, 4)
    names = [ph.name for ph in m.phases(MiB, 2, 2)]
    assert "reduce-scatter in the segment" in names and "reduce to the leader" not in names


def test_two_hosts_columns_by_hand():
    p = TRUE
    # 1 MiB (262144 floats) at 2 hosts x 2: rank 0 owns elements [0, 131072) (512 KiB).
    # Reduce-scatter: chunks of 1 MiB / 4 / 1 = 262144 elements: 1 round, 1 step; the other slice copied
    # into the slot (512 KiB) and 2 inputs of its own slice reduced (1 MiB): 1.5 MiB.
    # Column 0's Gloo ring over 512 KiB between 2 hosts: S = roundUp(max(1, 4), 2) = 4 segments of 128 KiB,
    # 2 sent in the reduce-scatter and 2 in the allgather (4 latencies, 512 KiB), 2 received and reduced
    # (2 inputs: 512 KiB read).
    # Allgather: rounds of 262144 elements: 1 step; 512 KiB in, 512 KiB out.
    rs = p.shm_alpha + 1.5 * MiB * p.shm_beta
    ring = 4 * p.tcp_alpha + 512 * KiB * p.tcp_beta + 512 * KiB * p.shm_beta
    ag = p.shm_alpha + MiB * p.shm_beta
    assert m.predict(p, MiB, 2, 2) == pytest.approx(p.overhead + agreement(p, 2, 2) + rs + ring + ag)
    # On 2 CPUs every phase but the leaders' exchange runs 4 ranks: twice as long. The columns' ring too:
    # both columns run at once.
    doubled = p.overhead + 2 * p.shm_alpha + rs + ring + ag
    assert m.predict(p, MiB, 2, 2, cpus=2) == pytest.approx(p.overhead + agreement(p, 2, 2) + rs + ring + ag
                                                            + doubled)
    # nics=1: the two columns' streams share the host's NIC, the wire carries both slices' bytes.
    assert m.predict(p, MiB, 2, 2, nics=1) == pytest.approx(m.predict(p, MiB, 2, 2) + 512 * KiB * p.tcp_beta)
    assert m.predict(p, MiB, 2, 2, nics=2) == pytest.approx(m.predict(p, MiB, 2, 2))


def test_three_by_three_uneven_slices_by_hand():
    p = TRUE
    # 100000 B = 25000 floats at 3 hosts x 3: slices [0, 8333), [8333, 16666), [16666, 25000); rank 0 owns
    # 8333, the longest is 8334. Reduce-scatter: chunk 1 MiB / 4 / 2 = 131072: 1 round; the others'
    # 8333 + 8334 copied, 3 x 8333 read: 41666 floats. Ring over 33332 B among 3: S = roundUp(6, 3) = 6
    # segments of 5556 B; 2 x 2 x 6 / 3 = 8 sent; 4 received and reduced (2 inputs). Allgather: 1 round,
    # 8333 in and 16667 out = 25000 floats.
    rs = p.shm_alpha + 41666 * 4 * p.shm_beta
    ring = 8 * p.tcp_alpha + 8 * 5556 * p.tcp_beta + 8 * 5556 * p.shm_beta
    ag = p.shm_alpha + 100000 * p.shm_beta
    assert m.predict(p, 100000, 3, 3) == pytest.approx(p.overhead + agreement(p, 3, 3) + rs + ring + ag)


def test_columns_rounds_by_hand():
    # 3 MiB at 2 hosts x 2: slices of 1.5 MiB, in rounds of 1 MiB (chunk 262144 floats): 2 rounds in
    # each local phase; bytes as with one round: 1.5 x 3 MiB and 3 MiB.
    assert m.columns_reduce_scatter(3 * MiB, 2)[m.TERMS.index("shm_alpha")] == 2
    assert m.columns_reduce_scatter(3 * MiB, 2)[m.TERMS.index("shm_beta")] == 4.5 * MiB
    assert m.columns_allgather(3 * MiB, 2)[m.TERMS.index("shm_alpha")] == 2
    # 64 MiB at 8 per host: slices of 2097152 floats; reduce-scatter chunks of 262144 // 7 = 37449 floats,
    # 56 of them fall 8 floats short: 57 steps; (2 - 1/8) x 64 MiB = 120 MiB streamed. Allgather: 8
    # rounds of 1 MiB, 64 MiB.
    rs, ag = m.columns_reduce_scatter(64 * MiB, 8), m.columns_allgather(64 * MiB, 8)
    assert rs[m.TERMS.index("shm_alpha")] == 57 and rs[m.TERMS.index("shm_beta")] == 120 * MiB
    assert ag[m.TERMS.index("shm_alpha")] == 8 and ag[m.TERMS.index("shm_beta")] == 64 * MiB


def test_sixteen_by_eight_ring_by_hand():
    # 64 MiB among 16 leaders: 64 segments of 1 MiB, each leader sends 2 x 15 x 4 = 120 of them.
    ring = m.gloo_ring(64 * MiB, 16)
    assert ring[m.TERMS.index("tcp_alpha")] == 120
    assert ring[m.TERMS.index("tcp_beta")] == 120 * MiB
    # 8 B among 16 leaders: 32 segments (2 per leader) of one 4-byte element.
    assert m.gloo_ring(8, 16)[m.TERMS.index("tcp_alpha")] == 2 * 15 * 2


def test_sixteen_by_eight_columns_ring_by_hand():
    # 64 MiB over 8 columns of 16 ranks: 8 MiB each, 32 segments of 256 KiB, 2 x 15 x 2 = 60 sent (15 MiB)
    # and 30 reduced (2 inputs: 15 MiB read). One NIC per host carries the 8 columns' 120 MiB, as the
    # leaders' path carries the leader's; a NIC per column carries 15 MiB.
    alpha, wire, read = (m.TERMS.index(t) for t in ("tcp_alpha", "tcp_beta", "shm_beta"))
    one, rails = m.columns_ring(64 * MiB, 16, 8, nics=1), m.columns_ring(64 * MiB, 16, 8, nics=8)
    assert one[alpha] == rails[alpha] == 60 and one[read] == rails[read] == 15 * MiB
    assert one[wire] == 120 * MiB == m.gloo_ring(64 * MiB, 16)[wire] and rails[wire] == 15 * MiB
    assert m.columns_ring(64 * MiB, 16, 8, nics=3)[wire] == 3 * 15 * MiB  # the busiest NIC: 3 streams


def test_at_scale_uses_the_stated_links():
    p = TRUE
    rows = m.at_scale(p, [8, 64 * MiB], link_alpha=30e-6)
    assert {(r["link_gbits"], r["bytes"]) for r in rows} == {(100, 8), (100, 64 * MiB), (25, 8), (25, 64 * MiB)}
    hundred = p.replace(tcp_alpha=30e-6, tcp_beta=8 / 100e9)
    big = next(r for r in rows if r["link_gbits"] == 100 and r["bytes"] == 64 * MiB)
    # The columns with one NIC per host, with a NIC per column, and the leaders' path (unequal hosts).
    assert big["hier_s"] == pytest.approx(m.predict(hundred, 64 * MiB, 16, 8, nics=1))
    assert big["rails_s"] == pytest.approx(m.predict(hundred, 64 * MiB, 16, 8, nics=8))
    assert big["leaders_s"] == pytest.approx(m.predict(hundred, 64 * MiB, 16, 8, leaders=True))
    assert big["rails_s"] < big["hier_s"] < big["leaders_s"]
    small = next(r for r in rows if r["link_gbits"] == 100 and r["bytes"] == 8)
    assert small["hier_s"] == small["rails_s"] == small["leaders_s"]  # up to 64 KiB: one path
    # The flat ring of 128 ranks runs at the slower of the link and loopback (beta_tcp measured here).
    assert big["flat_s"] == pytest.approx(m.predict(hundred.replace(tcp_beta=p.tcp_beta), 64 * MiB, 128, 1))
    assert big["flat_ideal_s"] == pytest.approx(m.predict(hundred, 64 * MiB, 128, 1))
    assert sum(big["phases"].values()) == pytest.approx(big["hier_s"])
    assert sum(big["leaders_phases"].values()) == pytest.approx(big["leaders_s"])


def test_report_leaves_the_calibration_out_and_tags_the_fits():
    measured = synthetic(TRUE, cpus=2)
    p, fitted_on, alone = m.fit_all(measured, cpus=2)
    r = m.report(p, alone, measured, fitted_on, 2, m.at_scale(p, [8, MiB], 30e-6), 30e-6, 0.0)
    configs = {x["config"] for x in r["points"]}
    assert "1 host x 1" not in configs and "2 hosts x 2, flat TCP" in configs
    assert {x["config"] for x in r["points"] if x["fit"]} == {"1 host x 2", "2 hosts x 1"}
    assert r["median_abs_error_checked"] == pytest.approx(0, abs=1e-9)
    path = {(x["config"], x["bytes"]): x["path"] for x in r["points"]}
    assert path["2 hosts x 2", MiB] == "columns" and path["2 hosts x 2", 64 * KiB] == "small"
    assert path["2 hosts x 1", MiB] == path["2 hosts x 2, flat TCP", MiB] == "leaders"
    assert path["1 host x 4", MiB] == "one host"
    table = m.markdown(r)
    assert "| 1 host x 4 |" in table and "| 1 host x 2 (fit) |" in table and "| 100 Gb/s | 1 MiB |" in table
