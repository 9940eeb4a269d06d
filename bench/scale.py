"""Scaling benchmark of :class:`mssr_hf.memory.SampleMemory` and the replay-buffer refresh.

For each bank size N (default 1e4 1e5 1e6 1e7) it warms a memory up realistically (observe + review most of the
bank at spread-out steps with random log-normal losses, a second pass over a subset, then one ``update_hazard``), and
times, over repeated runs at increasing steps:

- ``observe_review``: ``memory.expose(ids, losses, step)`` (observe + review in one call, as MSSRTrainer does) for
  256 random ids;
- ``update_hazard``: ``memory.update_hazard(step)`` over the whole bank;
- ``strength``: ``memory.strength(None, step)``;
- ``replay_weights``: ``memory.replay_weights(None, step)``;
- ``refresh_mssr_full``: ``draw_buffer(bank_ids, 1024, strategy, memory, step, generator)`` with the ``mssr_full``
  strategy (Gumbel-top-k on the memory's log replay weights);
- ``refresh_fixed``: the same with the ``fixed`` strategy (uniform, no memory weights).

The memory and both strategies are built from ``MSSRConfig``'s defaults (``memory_from_config``,
``strategy_from_config``), as a user gets them.

It also reports the state bytes per sample (tensors of ``memory.state_dict()`` / N), the RSS growth of the warmed
memory and the peak extra RSS while each operation runs, and a torch-profiler breakdown (top ops by self CPU time)
at one size (``--profile-size``, default 1e6). Each size runs in a fresh subprocess so that sizes do not share
allocator state and the peak RSS is per size.

Run from the repository root::

    .venv/bin/python bench/scale.py                      # writes bench/results/scale.{md,json}
    .venv/bin/python bench/scale.py --sizes 1e4 1e5 --repeats 5 --threads 1
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/common.py, also when this file is loaded by path
from common import ROOT, cpu_model  # noqa: E402

from mssr_hf.memory import SampleMemory  # noqa: E402
from mssr_hf.mssr_config import MSSRConfig, memory_from_config, strategy_from_config  # noqa: E402
from mssr_hf.scheduler import draw_buffer  # noqa: E402

try:
    import psutil
except ImportError:  # pragma: no cover - optional
    psutil = None

BATCH = 256
BUFFER = 1024
BANK_OPS = ("update_hazard", "strength", "replay_weights", "refresh_mssr_full", "refresh_fixed")
ALL_OPS = ("observe_review",) + BANK_OPS

# Targets on the reference machine (2-core CPU, 1 thread).
TARGET_OBSERVE_REVIEW_MS = 0.2
TARGET_BANK_OP_MS = 50.0
TARGET_BANK_OP_AT = 10**6
TARGET_STATE_BYTES = 64.0
TARGETED_BANK_OPS = ("update_hazard", "refresh_mssr_full", "refresh_fixed")
# "About linear": least-squares slope of log(time) vs log(N) over sizes >= LINEAR_FROM (below that the whole state
# fits in the L2 cache, which makes small sizes unrepresentatively cheap per sample).
LINEAR_FROM = 10**5
LINEAR_MAX_SLOPE = 1.15


# ----------------------------------------------------------------------------------------------------------------
# Memory (RSS) helpers
# ----------------------------------------------------------------------------------------------------------------


def _proc_status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_bytes() -> int:
    if psutil is not None:
        return psutil.Process().memory_info().rss
    kib = _proc_status_kib("VmRSS")
    return -1 if kib is None else kib * 1024


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter (Linux >= 4.0: write 5 to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    kib = _proc_status_kib("VmHWM")
    if kib is None:
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, never reset
    return kib * 1024


# ----------------------------------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------------------------------


def summarize(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1e3 for s in seconds)
    q1, _, q3 = statistics.quantiles(ms, n=4, method="inclusive") if len(ms) > 1 else (ms[0], ms[0], ms[0])
    return {
        "n": len(ms), "median_ms": statistics.median(ms), "q1_ms": q1, "q3_ms": q3, "min_ms": ms[0],
        "max_ms": ms[-1], "mean_ms": statistics.fmean(ms),
    }  # fmt: skip


def time_calls(fn, args) -> dict[str, float]:
    """Wall time of each ``fn(a)`` (summarized), plus the process's user / system CPU time and minor page faults per
    call over the whole loop (getrusage, outside the timed regions). CPU time is less sensitive than wall time to
    other processes competing for the cores; system time here is almost all page faults of fresh allocations."""
    times = []
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    for a in args:
        t = time.perf_counter()
        fn(a)
        times.append(time.perf_counter() - t)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    out = summarize(times)
    out["user_ms_per_call"] = (r1.ru_utime - r0.ru_utime) * 1e3 / len(times)
    out["sys_ms_per_call"] = (r1.ru_stime - r0.ru_stime) * 1e3 / len(times)
    out["minor_faults_per_call"] = (r1.ru_minflt - r0.ru_minflt) / len(times)
    out["involuntary_switches_per_call"] = (r1.ru_nivcsw - r0.ru_nivcsw) / len(times)
    return out


def loglog_slope(points: list[tuple[int, float]]) -> float | None:
    if len(points) < 2:
        return None
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else None


# ----------------------------------------------------------------------------------------------------------------
# One size (runs in a worker subprocess)
# ----------------------------------------------------------------------------------------------------------------


def random_losses(n: int, generator: torch.Generator) -> torch.Tensor:
    """Positive, right-skewed, finite losses (log-normal with median 1), like per-sample cross-entropies."""
    return torch.exp(0.75 * torch.randn(n, generator=generator, dtype=torch.float64))


def warm_up(memory: SampleMemory, generator: torch.Generator, fraction: float) -> int:
    """Observe + review ``fraction`` of the bank in ~200 chunks at steps 5 apart (so elapsed times, strengths and
    stabilities differ), re-review a random quarter of those later, then one update_hazard. Returns the step."""
    n = len(memory)
    count = max(1, int(fraction * n))
    first = torch.randperm(n, generator=generator)[:count]
    second = first[torch.randperm(count, generator=generator)[: max(1, count // 4)]]
    step = 0
    for ids in (first, second):
        for chunk in ids.split(max(BATCH, math.ceil(ids.numel() / 200))):
            step += 5
            memory.observe(chunk, random_losses(chunk.numel(), generator), step)
            memory.review(chunk, step)
    step += 5
    memory.update_hazard(step)
    return step


def profile_ops(calls: dict, top: int) -> dict[str, list[dict]]:
    """Top torch ops by self CPU time for each operation, under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    out = {}
    for name, (fn, reps) in calls.items():
        fn()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(reps):
                fn()
        events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
        total = sum(e.self_cpu_time_total for e in events) or 1.0
        events.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
        out[name] = [
            {
                "op": e.key,
                "self_ms_per_call": e.self_cpu_time_total / 1e3 / reps,
                "share": e.self_cpu_time_total / total,
                "count_per_call": e.count / reps,
            }  # fmt: skip
            for e in events[:top]
        ]
        out[name + "__total_self_ms_per_call"] = total / 1e3 / reps
    return out


def product_config(seed: int, strategy: str = "mssr_full") -> MSSRConfig:
    """MSSRConfig's defaults (what a user gets) with the benchmark's seed, to build the memory and strategies from."""
    return MSSRConfig(output_dir=str(ROOT / "bench" / ".scale_work"), use_cpu=True, report_to=[], replay_seed=seed,
                      replay_strategy=strategy)  # fmt: skip


def prime_torch(seed: int) -> None:
    """Run every benchmarked code path once on a tiny bank, so that lazily loaded kernels and allocator pools are
    in the RSS baseline rather than counted as growth of the first size."""
    gen = torch.Generator().manual_seed(seed)
    memory = memory_from_config(product_config(seed), 4096)
    step = warm_up(memory, gen, 0.9) + 1
    memory.observe(torch.arange(BATCH), random_losses(BATCH, gen), step)
    memory.review(torch.arange(BATCH), step)
    memory.strength(None, step), memory.replay_weights(None, step)
    for name in ("mssr_full", "fixed"):
        draw_buffer(torch.arange(4096), BUFFER, strategy_from_config(product_config(seed, name)), memory, step, gen)
    del memory
    gc.collect()


def warmed_memory(n: int, args: argparse.Namespace, data_gen: torch.Generator) -> tuple[SampleMemory, int, dict]:
    """A memory of ``n`` samples built from the product's defaults and warmed up; its state and RSS figures."""
    rss0 = rss_bytes()
    t0 = time.perf_counter()
    memory = memory_from_config(product_config(args.seed), n)
    step = warm_up(memory, data_gen, args.warm_fraction)
    warm_s = time.perf_counter() - t0
    gc.collect()
    rss_state = rss_bytes()
    peak_warm = peak_rss_bytes()

    state = memory.state_dict()  # clones every tensor: measured after the warm-up peak
    tensor_bytes = {k: v.nbytes for k, v in state.items() if isinstance(v, torch.Tensor)}
    del state
    m = memory.strength(None, step)
    warm_info = {
        "seconds": warm_s, "step": step, "seen_fraction": float(memory.seen.double().mean()),
        "loss_range": list(memory.loss_range) if memory.loss_range else None,
        "stability_min": float(memory.stability.min()), "stability_mean": float(memory.stability.mean()),
        "stability_max": float(memory.stability.max()), "strength_min": float(m.min()),
        "strength_mean": float(m.mean()), "strength_max": float(m.max()),
        "distinct_hazards": int(torch.unique(memory.hazard).numel()),
    }  # fmt: skip
    figures = {"warm_info": warm_info, "tensor_bytes": tensor_bytes, "rss0": rss0, "rss_state": rss_state,
               "peak_warm": peak_warm}  # fmt: skip
    return memory, step, figures


def time_operations(calls: dict, observe_review, batch_calls: int, repeats: int) -> tuple[dict, dict, int]:
    """Wall/CPU time of observe+review (``batch_calls`` calls) and of each bank-wide op (``repeats`` calls), with the
    peak extra RSS while each runs; returns (timings, peaks, absolute peak RSS)."""
    timings: dict[str, dict] = {}
    peaks: dict[str, int] = {}  # peak RSS while the op ran, minus RSS just before
    peak_all = 0  # absolute peak RSS over all timed ops
    observe_review(batch_calls)  # untimed warm call
    gc.collect()
    gc.disable()
    try:
        reset_peak_rss()
        rss_before = rss_bytes()
        timings["observe_review"] = time_calls(observe_review, range(batch_calls))
        peak_all = max(peak_all, peak_rss_bytes())
        peaks["observe_review"] = max(0, peak_rss_bytes() - rss_before)

        for name, fn in calls.items():
            fn()  # untimed warm call
            gc.collect()
            reset_peak_rss()
            rss_before = rss_bytes()
            timings[name] = time_calls(lambda _, f=fn: f(), range(repeats))
            peak_all = max(peak_all, peak_rss_bytes())
            peaks[name] = max(0, peak_rss_bytes() - rss_before)
    finally:
        gc.enable()
    return timings, peaks, peak_all


def run_size(n: int, args: argparse.Namespace) -> dict:
    """Everything measured at bank size ``n`` (runs in a worker subprocess)."""
    torch.set_num_threads(args.threads)
    prime_torch(args.seed)
    reset_peak_rss()
    data_gen = torch.Generator().manual_seed(args.seed)
    draw_gen = torch.Generator().manual_seed(args.seed + 1)
    memory, step, figures = warmed_memory(n, args, data_gen)

    clock = [step]

    def next_step() -> int:
        clock[0] += 1
        return clock[0]

    bank_ids = torch.arange(n)
    full, fixed = (strategy_from_config(product_config(args.seed, name)) for name in ("mssr_full", "fixed"))
    bank_fns = {
        "update_hazard": lambda: memory.update_hazard(next_step()),
        "strength": lambda: memory.strength(None, next_step()),
        "replay_weights": lambda: memory.replay_weights(None, next_step()),
        "refresh_mssr_full": lambda: draw_buffer(bank_ids, BUFFER, full, memory, next_step(), draw_gen),
        "refresh_fixed": lambda: draw_buffer(bank_ids, BUFFER, fixed, memory, next_step(), draw_gen),
    }

    # Sanity: the refreshes return BUFFER distinct bank ids.
    for key in ("refresh_mssr_full", "refresh_fixed"):
        picked = bank_fns[key]()
        assert picked.numel() == min(BUFFER, n) and torch.unique(picked).numel() == picked.numel(), key

    # observe + review of a batch of random ids; ids and losses are drawn before timing.
    calls = args.batch_calls
    batch_ids = torch.randint(0, n, (calls + 1, BATCH), generator=data_gen)
    batch_losses = random_losses((calls + 1) * BATCH, data_gen).view(calls + 1, BATCH)

    def observe_review(i: int) -> None:
        s = next_step()
        memory.expose(batch_ids[i], batch_losses[i], s)  # observe + review, as MSSRTrainer calls it

    timings, peaks, peak_ops = time_operations(bank_fns, observe_review, calls, args.repeats)
    for name in BANK_OPS:
        timings[name]["ns_per_sample"] = timings[name]["median_ms"] * 1e6 / n
    timings["observe_review"]["ns_per_id"] = timings["observe_review"]["median_ms"] * 1e6 / BATCH

    profile = None
    if args.profile_size and n == args.profile_size:
        j = [0]

        def profiled_observe_review() -> None:
            j[0] = (j[0] + 1) % calls
            observe_review(j[0])

        profile = profile_ops(
            {"observe_review": (profiled_observe_review, 100), **{k: (fn, 5) for k, fn in bank_fns.items()}},
            top=args.profile_top,
        )

    tensor_bytes, rss0 = figures["tensor_bytes"], figures["rss0"]
    return {
        "n": n,
        "warmup": figures["warm_info"],
        "state_bytes_total": sum(tensor_bytes.values()),
        "state_bytes_per_sample": sum(tensor_bytes.values()) / n,
        "state_tensor_bytes": tensor_bytes,
        "rss_baseline_bytes": rss0,
        "rss_growth_warm_bytes": figures["rss_state"] - rss0,
        "peak_rss_growth_warmup_bytes": figures["peak_warm"] - rss0,
        "peak_rss_growth_bytes": max(figures["peak_warm"], peak_ops) - rss0,
        "peak_extra_rss_bytes_during_op": peaks,
        "timings": timings,
        "profile": profile,
    }


# ----------------------------------------------------------------------------------------------------------------
# Driver, targets and report
# ----------------------------------------------------------------------------------------------------------------


def parse_size(text: str, minimum: int = 1) -> int:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value.is_integer() or value < minimum:
        raise argparse.ArgumentTypeError(f"size must be an integer >= {minimum} (1e6 is fine), got {text!r}")
    return int(value)


def machine_info(args: argparse.Namespace) -> dict:
    cpu = cpu_model()
    mem_total = None
    try:
        with open("/proc/meminfo") as f:
            mem_total = int(f.readline().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_model": cpu, "logical_cpus": os.cpu_count(), "mem_total_bytes": mem_total,
        "torch_version": torch.__version__, "torch_threads": args.threads,
        "torch_interop_threads": torch.get_num_interop_threads(), "python": platform.python_version(),
        "platform": platform.platform(), "psutil": getattr(psutil, "__version__", None),
        "peak_rss_method": "VmHWM after /proc/self/clear_refs=5" if reset_peak_rss() else "ru_maxrss (not reset)",
        "glibc": " ".join(platform.libc_ver()), "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES"),
    }  # fmt: skip


def system_cpu_seconds() -> tuple[float, float] | None:
    """(busy, steal) CPU seconds of the whole machine since boot, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    hz = os.sysconf("SC_CLK_TCK")
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / hz, (v[7] if len(v) > 7 else 0) / hz


def loadavg() -> list[float] | None:
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except (OSError, ValueError):
        return None


def evaluate_targets(results: list[dict]) -> list[dict]:
    ok = [r for r in results if "error" not in r]
    targets = []
    for r in ok:
        med = r["timings"]["observe_review"]["median_ms"]
        targets.append({
            "target": f"observe+review of {BATCH} ids, N={r['n']:.0e}", "measured": f"{med:.3f} ms",
            "limit": f"<= {TARGET_OBSERVE_REVIEW_MS} ms", "pass": med <= TARGET_OBSERVE_REVIEW_MS,
        })  # fmt: skip
    at = next((r for r in ok if r["n"] == TARGET_BANK_OP_AT), None)
    for op in TARGETED_BANK_OPS:
        if at is None:
            targets.append({"target": f"{op}, N=1e6", "measured": "not run", "limit": "", "pass": None})
            continue
        med = at["timings"][op]["median_ms"]
        targets.append({
            "target": f"{op}, N=1e6", "measured": f"{med:.1f} ms", "limit": f"<= {TARGET_BANK_OP_MS:g} ms",
            "pass": med <= TARGET_BANK_OP_MS,
        })  # fmt: skip
    for op in TARGETED_BANK_OPS:
        big = [r for r in ok if r["n"] >= LINEAR_FROM]
        slope = loglog_slope([(r["n"], r["timings"][op]["median_ms"]) for r in big])
        cpu = [(r["n"], r["timings"][op]["user_ms_per_call"] + r["timings"][op]["sys_ms_per_call"]) for r in big]
        cpu_slope = loglog_slope(cpu) if all(t > 0 for _, t in cpu) else None
        user_slope = loglog_slope([(r["n"], max(r["timings"][op]["user_ms_per_call"], 1e-9)) for r in big])
        measured = "n/a" if slope is None else f"{slope:.2f}"
        if cpu_slope is not None and user_slope is not None:
            measured += f" (user+sys CPU: {cpu_slope:.2f}, user only: {user_slope:.2f})"
        targets.append({
            "target": f"{op} grows ~linearly (log-log slope of median wall time, N >= {LINEAR_FROM:.0e})",
            "measured": measured, "limit": f"<= {LINEAR_MAX_SLOPE}",
            "pass": None if slope is None else slope <= LINEAR_MAX_SLOPE,
        })  # fmt: skip
    for r in ok:
        b = r["state_bytes_per_sample"]
        targets.append({
            "target": f"state bytes per sample, N={r['n']:.0e}", "measured": f"{b:.2f} B",
            "limit": f"<= {TARGET_STATE_BYTES:g} B", "pass": b <= TARGET_STATE_BYTES,
        })  # fmt: skip
    return targets


def _mib(b: float) -> str:
    return f"{b / 2**20:.1f}"


def _verdict(p: bool | None) -> str:
    return "n/a" if p is None else ("PASS" if p else "FAIL")


def _contention_note(report: dict) -> str:
    ok = [r for r in report["results"] if "error" not in r and "other_cpu_cores" in r]
    if not ok:
        return "Machine load during the run was not measured (in-process run or no /proc/stat)."
    parts = ", ".join(f"N={r['n']:.0e}: {r['other_cpu_cores']:.2f} (steal {r['steal_cores']:.2f})" for r in ok)
    worst = max(r["other_cpu_cores"] + r["steal_cores"] for r in ok)
    free = (report["machine"]["logical_cpus"] or 1) - report["machine"]["torch_threads"]
    note = f"CPU used by other processes while each size ran, in cores: {parts}."
    if worst > max(0.25, free - 0.5):
        note += (
            " **Other processes competed for the CPUs during this run: wall times (and the pass/fail verdicts) are"
            " inflated; re-run on a quiet machine and compare the user-CPU column.**"
        )
    return note


def render_markdown(report: dict) -> str:
    info, results = report["machine"], report["results"]
    ok = [r for r in results if "error" not in r]
    lines = [
        "# Scale benchmark: SampleMemory and buffer refresh",
        "",
        "Produced by (from the repository root):",
        "",
        "```",
        report["command"],
        "```",
        "",
        f"{info['date']} · CPU: {info['cpu_model']} ({info['logical_cpus']} logical) · torch {info['torch_version']}"
        f" · torch threads: {info['torch_threads']} · python {info['python']} · repeats: {report['repeats']}"
        f" (bank-wide ops), {report['batch_calls']} calls (observe+review) · warm-up fraction:"
        f" {report['warm_fraction']}",
        "",
        _contention_note(report),
        "",
        "## Targets",
        "",
        "| target | measured | limit | result |",
        "|---|---|---|---|",
    ]
    lines += [f"| {t['target']} | {t['measured']} | {t['limit']} | {_verdict(t['pass'])} |" for t in report["targets"]]
    lines += [
        "",
        "## Timings",
        "",
        "Median over the repeats, with interquartile range and min-max; ns/sample = median / N (for observe+review:"
        f" median / {BATCH} ids). user / sys = CPU time of this process per call (mean over the repeats; sys is"
        " almost all page faults on freshly mapped memory); faults = minor page faults per call. Peak extra RSS ="
        " peak RSS while the op ran minus RSS before it (transient allocations).",
        "",
        "| op | N | median ms | IQR ms | min-max ms | ns/sample | user ms | sys ms | faults/call |"
        " peak extra RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for op in ALL_OPS:
        for r in ok:
            t = r["timings"][op]
            per = t.get("ns_per_sample", t.get("ns_per_id"))
            lines.append(
                f"| {op} | {r['n']:.0e} | {t['median_ms']:.4g} | {t['q1_ms']:.4g}-{t['q3_ms']:.4g} |"
                f" {t['min_ms']:.4g}-{t['max_ms']:.4g} | {per:.3g} | {t['user_ms_per_call']:.3g} |"
                f" {t['sys_ms_per_call']:.3g} | {t['minor_faults_per_call']:.0f} |"
                f" {_mib(r['peak_extra_rss_bytes_during_op'][op])} |"
            )
    lines += [
        "",
        "## Memory",
        "",
        "State = tensors of `memory.state_dict()` (incl. the 5 KB generator state). RSS growth is measured from a"
        " baseline taken after a priming run on a tiny bank; peak RSS covers warm-up and all timed ops (not the"
        f" profiler). Peak RSS method: {info['peak_rss_method']}.",
        "",
        "| N | state B/sample | state MiB | RSS growth, warmed memory MiB | peak RSS growth MiB | warm-up s |"
        " seen | stability min/mean/max | strength min/mean/max |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in ok:
        w = r["warmup"]
        lines.append(
            f"| {r['n']:.0e} | {r['state_bytes_per_sample']:.2f} | {_mib(r['state_bytes_total'])} |"
            f" {_mib(r['rss_growth_warm_bytes'])} | {_mib(r['peak_rss_growth_bytes'])} | {w['seconds']:.2f} |"
            f" {w['seen_fraction']:.2f} | {w['stability_min']:.2f}/{w['stability_mean']:.2f}/{w['stability_max']:.2f}"
            f" | {w['strength_min']:.3f}/{w['strength_mean']:.3f}/{w['strength_max']:.3f} |"
        )
    for r in results:
        if "error" in r:
            lines += ["", f"**N={r['n']:.0e} failed:** `{r['error']}`"]
    prof = next((r for r in ok if r.get("profile")), None)
    if prof:
        lines += [
            "",
            f"## Profile at N={prof['n']:.0e} (torch.profiler, top ops by self CPU time)",
            "",
            "Shares are of the self CPU time summed over all torch ops of one call (the profiler adds overhead,"
            " most visibly to observe+review). Calls per op call count nested dispatcher entries, so e.g. each"
            " `torch.kthvalue` shows up twice.",
            "",
            "| op | self CPU ms / call | top torch ops (share, calls per op call) |",
            "|---|---:|---|",
        ]
        for op in ALL_OPS:
            tops = ", ".join(
                f"`{e['op']}` {100 * e['share']:.0f}% (x{e['count_per_call']:g})" for e in prof["profile"][op]
            )
            lines.append(f"| {op} | {prof['profile'][op + '__total_self_ms_per_call']:.3g} | {tops} |")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", nargs="+", type=parse_size, default=[10**4, 10**5, 10**6, 10**7],
                   help="bank sizes N (floats like 1e6 are fine); default: 1e4 1e5 1e6 1e7")  # fmt: skip
    p.add_argument("--repeats", type=int, default=11, help="timed runs per bank-wide op and size (default 11)")
    p.add_argument("--batch-calls", type=int, default=1000, help="timed observe+review calls per size (default 1000)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--warm-fraction", type=float, default=0.9, help="fraction of the bank warmed up (default 0.9)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile-size", type=lambda t: parse_size(t, minimum=0), default=10**6,
                   help="size at which to run torch.profiler on each op (default 1e6; 0 disables)")  # fmt: skip
    p.add_argument("--profile-top", type=int, default=5, help="torch ops listed per profiled op (default 5)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results",
                   help="directory for scale.json and scale.md (default bench/results)")  # fmt: skip
    p.add_argument("--in-process", action="store_true", help="run all sizes in this process (no subprocesses)")
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    return p


def worker_argv(args: argparse.Namespace, n: int) -> list[str]:
    return [
        sys.executable, str(Path(__file__).resolve()), "--worker", str(n), "--repeats", str(args.repeats),
        "--batch-calls", str(args.batch_calls), "--threads", str(args.threads), "--warm-fraction",
        str(args.warm_fraction), "--seed", str(args.seed), "--profile-size", str(args.profile_size),
        "--profile-top", str(args.profile_top),
    ]  # fmt: skip


def measure_size(n: int, args: argparse.Namespace) -> dict:
    """:func:`run_size` in a fresh worker (or in this process with ``--in-process``), plus the wall time and the CPU
    other processes used meanwhile."""
    print(f"[scale] N={n:.0e} ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    sys0, own0 = system_cpu_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN)
    if args.in_process:
        res = run_size(n, args)
    else:
        proc = subprocess.run(worker_argv(args, n), capture_output=True, text=True)
        if proc.returncode != 0:
            err = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
            print(f"[scale] N={n:.0e} failed: {err}", file=sys.stderr, flush=True)
            return {"n": n, "error": err, "returncode": proc.returncode}
        res = json.loads(proc.stdout.strip().splitlines()[-1])
    wall = time.perf_counter() - t0
    sys1, own1 = system_cpu_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN)
    if sys0 and sys1 and not args.in_process:
        own = (own1.ru_utime - own0.ru_utime) + (own1.ru_stime - own0.ru_stime)
        # CPU used by other processes while this size ran, in cores (0 = quiet machine).
        res["other_cpu_cores"] = max(0.0, (sys1[0] - sys0[0]) - own) / wall
        res["steal_cores"] = (sys1[1] - sys0[1]) / wall
    res["wall_seconds"] = wall
    res["loadavg_after"] = loadavg()
    t = res["timings"]
    print(
        f"[scale] N={n:.0e} done in {time.perf_counter() - t0:.1f}s: observe+review "
        f"{t['observe_review']['median_ms']:.3f} ms, update_hazard {t['update_hazard']['median_ms']:.2f} ms, "
        f"refresh mssr_full {t['refresh_mssr_full']['median_ms']:.2f} ms, "
        f"{res['state_bytes_per_sample']:.2f} B/sample",
        file=sys.stderr,
        flush=True,
    )
    return res


def render(report: dict, out: Path) -> str:
    """Write ``scale.json`` and ``scale.md`` (with the targets) into ``out``; returns the Markdown."""
    report["targets"] = evaluate_targets(report["results"])
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale.json").write_text(json.dumps(report, indent=2) + "\n")
    md = render_markdown(report)
    (out / "scale.md").write_text(md)
    return md


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.repeats < 1 or args.batch_calls < 1 or args.threads < 1:
        raise SystemExit("--repeats, --batch-calls and --threads must be >= 1")
    if args.worker is not None:
        print(json.dumps(run_size(args.worker, args)))
        return 0

    torch.set_num_threads(args.threads)
    shown = Path(sys.executable)
    try:
        shown = shown.relative_to(Path.cwd())
    except ValueError:
        pass
    command = shlex.join([str(shown), os.path.relpath(Path(__file__).resolve()), *sys.argv[1:]])
    if os.environ.get("GLIBC_TUNABLES"):  # the allocator setting changes the results at large N: record it
        command = f"GLIBC_TUNABLES={shlex.quote(os.environ['GLIBC_TUNABLES'])} {command}"
    load_start = loadavg()
    results = [measure_size(n, args) for n in args.sizes]
    report = {
        "command": command, "cwd": os.getcwd(), "machine": machine_info(args), "sizes": args.sizes,
        "repeats": args.repeats, "batch_calls": args.batch_calls, "batch": BATCH, "buffer": BUFFER,
        "warm_fraction": args.warm_fraction, "seed": args.seed, "loadavg_start": load_start, "results": results,
    }  # fmt: skip
    print(render(report, args.out))
    failed = any(t["pass"] is False for t in report["targets"]) or any("error" in r for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
