"""bench/retention.py: the harness runs a sequence end to end, matches replay budgets, and records calibration."""

import importlib.util
import json
import math
import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_bench(name="retention"):
    """``bench/<name>.py`` as a module (the harnesses are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"{name}_bench", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_spearman_by_hand():
    bench = load_bench()
    # ranks x = 1 2 3, y = 1 3 2: rho = 1 - 6 * (0 + 1 + 1) / (3 * (9 - 1)) = 0.5
    assert bench.spearman([1, 2, 3], [10, 30, 20]) == pytest.approx(0.5)
    assert bench.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ties take the average rank: x ranks 0, 1.5, 1.5, 3 against y ranks 0, 1, 2, 3
    assert bench.spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486833, abs=1e-6)
    assert math.isnan(bench.spearman([1, 1, 1], [1, 2, 3]))


def test_frontier_variants_and_paired_differences():
    frontier = load_bench().frontier
    plan = frontier.frontier_variants(
        [0.1, 0.3], {"uniform": ("fixed", {}), "memory": ("mssr_spl", {"replay_zeta": 2})}
    )
    assert [name for name, _, _ in plan] == ["uniform@0.1", "memory@0.1", "uniform@0.3", "memory@0.3"]
    name, strategy, settings = plan[3]
    assert strategy == "mssr_spl" and settings == {
        "replay_staleness_cap": 0, "replay_zeta": 2, "replay_lambda0": 0.3, "replay_lambda_min": 0.0,
        "replay_first_interval": 1,
    }  # fmt: skip
    assert plan[0][2]["replay_fixed_interval"] == 1 and frontier.parse_name("er") is None

    def record(variant, seed, final):
        return {"variant": variant, "seed": seed, "metrics": {"final_average": final}}

    # memory - uniform at 0.1: seed 0: 0.5 - 0.4 = +0.1, seed 1: 0.3 - 0.4 = -0.1, seed 2 has no uniform run
    records = [record("uniform@0.1", 0, 0.4), record("memory@0.1", 0, 0.5), record("uniform@0.1", 1, 0.4),
               record("memory@0.1", 1, 0.3), record("memory@0.1", 2, 0.9), record("er", 0, 1.0)]  # fmt: skip
    diffs = frontier.paired_differences(records, "final_average")
    assert list(diffs) == [("memory", 0.1)]
    assert diffs[("memory", 0.1)]["mean"] == pytest.approx(0.0)
    assert (diffs[("memory", 0.1)]["positive"], diffs[("memory", 0.1)]["negative"]) == (1, 1)


def test_parse_variant():
    bench = load_bench()
    assert bench.parse_variant("nocap=mssr_full,replay_staleness_cap=0,replay_zeta=0.5") == (
        "nocap",
        "mssr_full",
        {"replay_staleness_cap": 0, "replay_zeta": 0.5},
    )
    assert bench.parse_variant("plain=fixed") == ("plain", "fixed", {})
    for bad in ("nocap", "x=sometimes", "x=fixed,replay_zeta"):
        with pytest.raises(SystemExit, match="--variant"):
            bench.parse_variant(bad)


@pytest.mark.slow
def test_harness_runs_a_sequence_end_to_end(tmp_path):
    """Two synthetic tasks, a few steps: every variant gets a record, er_budget replays what mssr_full replayed,
    replaying runs carry calibration rows, and the summary files are written."""
    bench = load_bench()
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "tier: S\nname: tiny\ntasks: [syn_copy, syn_reverse]\nhidden_size: 32\nsteps: 8\nbatch_size: 8\n"
        "train_size: 64\neval_size: 8\neval_batch_size: 8\nseeds: [0]\n"
    )
    out, work = tmp_path / "out", tmp_path / "work"
    strategies = ["none", "fixed", "mssr_full", "er", "er_budget", "recommended"]
    argv = ["--config", str(config), "--strategies", *strategies, "--out", str(out), "--workdir", str(work),
            "--variant", "er_zeta0=mssr_spl,replay_first_interval=1,replay_zeta=0",
            "--frontier", "0.3", "--rules", "uniform", "task_gap"]  # fmt: skip
    assert bench.main(argv) == 0

    records = {p.stem: json.loads(p.read_text()) for p in (out / "tiny" / "runs").glob("*.json")}
    frontier_rows = ["uniform@0.3", "task_gap@0.3"]
    assert sorted(records) == sorted(f"{s}-seed0" for s in [*strategies, "er_zeta0", *frontier_rows])
    # The preset's row is the frontier's task_gap rule at er's share, and er is uniform@0.3: trained once.
    assert records["recommended-seed0"]["resolved"]["replay_strategy"] == "mssr_spl"
    assert records["recommended-seed0"]["resolved"]["replay_staleness_cap"] == 0
    assert records["recommended-seed0"]["resolved"]["replay_task_gap_weight"] == 1.0
    for twin, first in (("uniform@0.3", "er"), ("task_gap@0.3", "recommended")):
        assert records[f"{twin}-seed0"]["same_run_as"] == first
        assert records[f"{twin}-seed0"]["matrix"] == records[f"{first}-seed0"]["matrix"]
    assert records["recommended-seed0"]["resolved"] != records["er-seed0"]["resolved"]
    # One earlier task: the preset's tilt has nothing to share, its draws are er's (common random numbers), and so is
    # the whole run, down to the calibration log.
    assert records["recommended-seed0"]["matrix"] == records["er-seed0"]["matrix"]
    assert records["recommended-seed0"]["calibration"] == records["er-seed0"]["calibration"]
    # The extra row: every step replays, with its settings applied.
    assert records["er_zeta0-seed0"]["strategy"] == "mssr_spl" and records["er_zeta0-seed0"]["replayed_samples"] == 16
    assert records["er_zeta0-seed0"]["settings"]["replay_first_interval"] == 1
    for record in records.values():
        assert len(record["matrix"]) == 2 and record["matrix"][0][1] is None
        assert record["replayed_samples"] == pytest.approx(record["replay_share"] * 8 * 8)  # stage 2: 8 steps x 8
    assert records["none-seed0"]["replayed_samples"] == 0 and records["none-seed0"]["calibration"] is None
    # er replays round(0.3 * 8) = 2 samples at each of the 8 steps of stage 2
    assert records["er-seed0"]["replayed_samples"] == 16
    calibration = records["er-seed0"]["calibration"]
    assert calibration["exposures"] == 16 and -1 <= calibration["spearman_forgetting"] <= 1
    budget, matched = records["mssr_full-seed0"]["replayed_samples"], records["er_budget-seed0"]["replayed_samples"]
    assert budget > 0 and abs(matched - budget) <= 8  # same budget, up to one step's batch
    summary = json.loads((out / "tiny" / "summary.json").read_text())["summary"]
    assert summary["fixed"]["train_time_vs_fixed"] == pytest.approx(1.0)
    assert "calibration" in summary["er"] and "calibration" not in summary["none"]
    assert (out / "tiny" / "summary.md").read_text().count("| `") >= 2 * len(strategies)
    assert (out / "tiny" / "retention.png").is_file()
    assert not (work / "tiny" / "runs").exists() or not any((work / "tiny" / "runs").iterdir())  # cleaned up

    # A run drawn by an older sampler (its record's "draws") is not reused under another name: trained again.
    assert all(record["draws"] == bench.DRAWS for record in records.values())
    assert all(record["machine"] == bench.cpu_model() for record in records.values())
    old_er = {**records["er-seed0"], "draws": bench.DRAWS - 1}
    (out / "tiny" / "runs" / "er-seed0.json").write_text(json.dumps(old_er))
    (out / "tiny" / "runs" / "uniform@0.3-seed0.json").unlink()
    assert bench.main([*argv[:2], "--strategies", "er", "--out", str(out), "--workdir", str(work),
                       "--frontier", "0.3", "--rules", "uniform"]) == 0  # fmt: skip
    again = json.loads((out / "tiny" / "runs" / "uniform@0.3-seed0.json").read_text())
    assert "same_run_as" not in again and again["draws"] == bench.DRAWS
    assert again["matrix"] == records["er-seed0"]["matrix"]  # training is deterministic

    # The summary counts each machine's runs; re-rendered, it keeps the line of runs that record none (not nested).
    meta = json.loads((out / "tiny" / "summary.json").read_text())["meta"]
    assert meta["machine"] == bench.machine_line() and meta["machines"].startswith(f"{bench.cpu_model()} (")
    assert bench.main([*argv[:2], "--strategies", "er", "--out", str(out), "--summary-only"]) == 0
    again_meta = json.loads((out / "tiny" / "summary.json").read_text())["meta"]
    assert (again_meta["machine"], again_meta["machines"]) == (meta["machine"], meta["machines"])


@pytest.mark.slow
def test_dynamics_scores_earlier_tasks_within_a_stage(tmp_path):
    """bench/dynamics.py: every `--every` steps of the second stage, the first task is scored; the run's final
    matrix is retention.py's, and the plot is written."""
    dynamics = load_bench("dynamics")
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "tier: S\nname: tiny\ntasks: [syn_copy, syn_reverse]\nhidden_size: 32\nsteps: 8\nbatch_size: 8\n"
        "train_size: 64\neval_size: 8\neval_batch_size: 8\nseeds: [0]\n"
    )
    out = tmp_path / "out"
    argv = ["--config", str(config), "--variants", "uniform@0.25", "--every", "4", "--out", str(out),
            "--workdir", str(tmp_path / "work")]  # fmt: skip
    assert dynamics.main(argv) == 0
    record = json.loads((out / "tiny" / "uniform@0.25-seed0.json").read_text())
    assert [(c["stage"], c["step"], c["global_step"]) for c in record["curve"]] == [(1, 4, 12), (1, 8, 16)]
    assert all(len(c["scores"]) == 1 and 0 <= c["scores"][0] <= 1 for c in record["curve"])
    # the last scoring is at the stage's end: the same model the matrix scores after stage 2
    assert record["curve"][-1]["scores"][0] == pytest.approx(record["matrix"][1][0])
    assert (out / "tiny" / "dynamics.png").is_file()


def test_sign_test_by_hand():
    pooled = load_bench("pooled")
    # 5 of 5 above: 2 * (1/32) = 0.0625; 4 against 1: 2 * (5 + 1) / 32 = 0.375; an even split is 1
    assert pooled.sign_test(5, 0) == pytest.approx(0.0625)
    assert pooled.sign_test(1, 4) == pytest.approx(0.375)
    assert pooled.sign_test(3, 3) == 1.0 and pooled.sign_test(0, 0) == 1.0


def test_pooled_pairs_over_sequences(tmp_path):
    pooled = load_bench("pooled")

    def write(sequence, variant, seed, final, forgetting, diagonal=(1.0, 0.9), replays=None):
        runs = tmp_path / sequence / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        metrics = {"final_average": final, "average_forgetting": forgetting}
        matrix = [[diagonal[0], None], [0.5, diagonal[1]]]
        record = {"variant": variant, "seed": seed, "metrics": metrics, "matrix": matrix}
        if replays is not None:
            record["calibration"] = {"replays_by_stage_task": replays}
        (runs / f"{variant}-seed{seed}.json").write_text(json.dumps(record))

    # sequence a: seed 0 +0.10, seed 1 -0.02; sequence b: seed 0 +0.04; seed 1 of b has no base run
    # replays per "stage/task": seed 0 of a moves 30 of 100 (stage 2: 60/40 against 30/70), seed 1 none
    write("a", "er", 0, 0.80, 0.10, replays={"1/0": 50, "2/0": 30, "2/1": 70})
    write("a", "new", 0, 0.90, 0.05, replays={"1/0": 50, "2/0": 60, "2/1": 40})
    write("a", "er", 1, 0.90, 0.02, (0.7, 1.0), replays={"1/0": 50})
    write("a", "new", 1, 0.88, 0.04, replays={"1/0": 50})
    write("b", "er", 0, 0.50, 0.30), write("b", "new", 0, 0.54, 0.30), write("b", "new", 1, 0.99, 0.00)
    text = pooled.main([str(tmp_path / "a"), str(tmp_path / "b"), "--pair", "new:er", "--out", str(tmp_path / "p")])
    result = json.loads((tmp_path / "p" / "pooled.json").read_text())["results"][0]
    final = result["final_average"]
    assert final["pairs"] == 3 and final["mean"] == pytest.approx(0.04)
    # s.d. of (0.10, -0.02, 0.04) is 0.06, over sqrt(3)
    assert final["stderr"] == pytest.approx(0.06 / math.sqrt(3))
    assert (final["positive"], final["negative"]) == (2, 1) and final["sign_test_p"] == pytest.approx(1.0)
    assert final["per_sequence"] == pytest.approx({"a": 0.04, "b": 0.04}) and final["sequences_positive"] == 2
    forgetting = result["average_forgetting"]  # -0.05, +0.02, 0.00: the tie counts on neither side
    assert (forgetting["positive"], forgetting["negative"]) == (1, 1)
    assert forgetting["mean"] == pytest.approx(-0.01)
    assert "`new` − `er` | final_average | 3 | +0.0400" in text
    # the two pairs that recorded replays (b's did not): 30 / 150 and 0 / 50
    assert result["placed_elsewhere"] == {"pairs": 2, "mean": pytest.approx(0.1), "min": 0.0,
                                          "max": pytest.approx(0.2), "none": 1}  # fmt: skip
    assert "| `new` − `er` | 2 | 10.0% | 0.0%-20.0% | 1 |" in text
    # the diagonal, not the final row, says whether a task was learned: er seed 1 of a scored 0.7 after stage 1
    learned = json.loads((tmp_path / "p" / "pooled.json").read_text())["learned"]
    assert learned["er"] == {"runs": 3, "learned": 2, "lowest": pytest.approx(0.7)}
    assert learned["new"] == {"runs": 4, "learned": 4, "lowest": pytest.approx(0.9)}
    assert "| `er` | 3 | 2 | 0.70 |" in text
    with pytest.raises(SystemExit, match="VARIANT:BASE"):
        pooled.main([str(tmp_path / "a"), "--pair", "new", "--out", str(tmp_path / "p")])


def test_pooled_pairs_count_rounding_as_a_tie(tmp_path):
    # two runs with the same six scores in total: their means differ by rounding only, which is neither side
    pooled = load_bench("pooled")
    er, new = sum([1, 1, 0.99, 1, 0.99, 0.98]) / 6, sum([1, 1, 0.97, 1, 1, 0.99]) / 6
    assert er != new and abs(er - new) < 1e-12
    runs = tmp_path / "a" / "runs"
    runs.mkdir(parents=True)
    for variant, final in (("er", er), ("new", new)):
        record = {"variant": variant, "seed": 0, "matrix": [[1.0]],
                  "metrics": {"final_average": final, "average_forgetting": 0.0}}  # fmt: skip
        (runs / f"{variant}-seed0.json").write_text(json.dumps(record))
    final = pooled.pooled_pairs({"a": pooled.load_runs(tmp_path / "a")}, "new", "er")["final_average"]
    sides = ("positive", "negative", "sequences_positive", "sequences_negative")
    assert [final[side] for side in sides] == [0, 0, 0, 0]


def test_pooled_pairs_runs_of_one_machine_only(tmp_path):
    # seed 0: both on machine X (+0.1); seed 1: X against Y (not a pair); seed 2: the base records no machine (+0.3)
    pooled = load_bench("pooled")
    runs = tmp_path / "a" / "runs"
    runs.mkdir(parents=True)
    for variant, seed, final, machine in (
        ("er", 0, 0.5, "X"),
        ("new", 0, 0.6, "X"),
        ("er", 1, 0.5, "X"),
        ("new", 1, 0.9, "Y"),
        ("er", 2, 0.5, None),
        ("new", 2, 0.8, "Y"),
    ):
        record = {
            "variant": variant,
            "seed": seed,
            "matrix": [[1.0]],
            "metrics": {"final_average": final, "average_forgetting": 0.0},
        }
        if machine:
            record["machine"] = machine
        (runs / f"{variant}-seed{seed}.json").write_text(json.dumps(record))
    text = pooled.main([str(tmp_path / "a"), "--pair", "new:er", "--out", str(tmp_path / "p")])
    result = json.loads((tmp_path / "p" / "pooled.json").read_text())["results"][0]
    assert result["other_machine"] == 1
    assert result["final_average"]["pairs"] == 2 and result["final_average"]["mean"] == pytest.approx(0.2)
    assert "different CPU models: `new` − `er` 1." in text


def test_a_run_is_reused_under_another_name_on_its_own_machine_only(tmp_path, monkeypatch):
    # uniform@0.3 resolves to er's settings: er's run is that run, unless another CPU model made it
    bench = load_bench()
    runs = tmp_path / "seq" / "runs"
    runs.mkdir(parents=True)
    tier = {**bench.TIERS["S"], "seeds": [0]}
    ((_, er_strategy, er_overrides),) = bench.variants(None, ["er"])
    plan = bench.frontier.frontier_variants([0.3], {"uniform": bench.frontier.SELECTIONS["uniform"]})
    resolved = bench.resolved_replay_settings(tier, er_strategy, er_overrides, 0)
    trained = []

    def run_one(tier, tasks, variant, *args, **kwargs):
        trained.append(variant)
        metrics = {"final_average": 1.0, "average_forgetting": 0.0}
        return {"variant": variant, "seed": 0, "metrics": metrics, "replayed_samples": 0, "train_seconds": 0.0}

    monkeypatch.setattr(bench, "run_one", run_one)
    for machine, expected in (("another CPU", ["uniform@0.3"]), (bench.cpu_model(), [])):
        trained.clear()
        (runs / "uniform@0.3-seed0.json").unlink(missing_ok=True)
        er = {"variant": "er", "seed": 0, "resolved": resolved, "draws": bench.DRAWS, "machine": machine}
        (runs / "er-seed0.json").write_text(json.dumps(er))
        bench.run_missing(plan, tier, [], "seq", tmp_path / "seq", tmp_path / "work")
        assert trained == expected
    assert json.loads((runs / "uniform@0.3-seed0.json").read_text())["same_run_as"] == "er"


def test_a_summary_names_the_machines_its_runs_were_made_on():
    bench = load_bench()
    before = "AMD EPYC, 2 cores, no GPU"
    assert bench.machines_line([{}, {}], before) == before
    runs = [{"machine": "X"}, {"machine": "Y"}, {"machine": "X"}, {}]
    assert bench.machines_line(runs, before) == "X (2 runs); Y (1 run); 1 run not recording its machine: " + before


def test_machines_pairs_the_same_runs_of_two_roots(tmp_path):
    machines = load_bench("machines")

    def write(root, sequence, variant, seed, final, machine=None):
        runs = tmp_path / root / sequence / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        record = {"variant": variant, "seed": seed, "matrix": [[1.0]],
                  "metrics": {"final_average": final, "average_forgetting": 1 - final}}  # fmt: skip
        if machine:
            record["machine"] = machine
        (runs / f"{variant}-seed{seed}.json").write_text(json.dumps(record))

    # sequence a: er seeds 0-2 on both roots (+0.10, -0.02, 0.00); b exists on the first root only; new is not asked
    for seed, (x, y) in enumerate([(0.9, 0.8), (0.7, 0.72), (0.5, 0.5)]):
        write("one", "a", "er", seed, x, "X"), write("two", "a", "er", seed, y)
    write("one", "a", "new", 0, 0.1, "X"), write("two", "a", "new", 0, 0.9), write("one", "b", "er", 0, 0.3, "X")
    (tmp_path / "two" / "a" / "summary.json").write_text(json.dumps({"meta": {"machine": "Y, 2 cores, no GPU"}}))
    text = machines.main(
        [str(tmp_path / "one"), str(tmp_path / "two"), "--variants", "er", "--out", str(tmp_path / "o")]
    )
    result = json.loads((tmp_path / "o" / "machines.json").read_text())
    final = result["final_average"]
    assert final["pairs"] == 3 and final["mean"] == pytest.approx(0.08 / 3)
    assert final["stdev"] == pytest.approx(statistics.stdev([0.1, -0.02, 0.0]))
    assert (final["positive"], final["negative"], final["equal"]) == (1, 1, 1)
    assert final["mean_abs"] == pytest.approx(0.04) and final["largest"]["seed"] == 0
    assert result["machines"] == {"a": {"first": "X", "second": "Y, 2 cores, no GPU"}}
    assert result["average_forgetting"]["mean"] == pytest.approx(-0.08 / 3)
    assert "| a | X | Y, 2 cores, no GPU |" in text and "| final_average | 3 | +0.0267 ± " in text
