"""The experiment record: written once, read back as the runner gives it, stale when the code
or the budget changed, and spot-checked by retraining.

A two-arm experiment of tiny models (``tiny_experiment``) stands in for the registry, so that
the whole record trains in seconds.
"""

from __future__ import annotations

import json
import math
import os

import pytest

from convs2s_edu.cli import main
from convs2s_edu.lab.experiments import Budget, load_record, run_experiment, spot_check
from convs2s_edu.lab.experiments import record as record_mod
from convs2s_edu.lab.experiments import registry as registry_mod

pytestmark = pytest.mark.usefixtures("single_thread")

TINY = Budget(seeds=2, steps=4, width=8, n_valid=16, n_test=16, eval_every=2, beam_sizes=(1,))


@pytest.fixture
def recorded(tiny_experiment, tmp_path, monkeypatch):
    """A record of the tiny experiment alone, at the tiny budget, in ``tmp_path / "rec"``."""
    monkeypatch.setattr(record_mod, "EXPERIMENTS", {"tiny": tiny_experiment})
    monkeypatch.setattr(record_mod, "budget", lambda quick=None, *args: TINY)
    cache = tmp_path / "cache"
    where = record_mod.make_record(tmp_path / "rec", workers=1, progress=False, cache=cache)
    return load_record(where), cache


def test_the_record_reads_back_what_the_runner_gives(recorded, tmp_path):
    record, cache = recorded
    assert record.header["made"]["runs"] == len(record.runs) == 4  # 2 arms x 2 seeds
    from_record = record.result("tiny")
    live = run_experiment("tiny", custom_budget=TINY, workers=1, progress=False, directory=cache)
    assert [r.keys() for r in from_record.runs] == [r.keys() for r in live.runs]
    for a, b in zip(from_record.runs, live.runs):
        assert all(a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a)
    assert from_record.rows[0]["test_loss"] == live.rows[0]["test_loss"]
    for run in record.runs.values():  # provenance of every run, from its worker
        p = run["provenance"]
        assert p["threads"] == 1 and p["path"] and p["cpu"] and p["wall_seconds"] > 0
        assert run["curve"][-1][0] == 4  # the learning curve to the budget's last step
    # JSON without NaN: a level never reached is null in the file, NaN again when read
    text = (record.path / "runs.jsonl").read_text()
    assert "NaN" not in text and json.loads(text.splitlines()[0])
    assert math.isnan(from_record.runs[0]["steps_to_0.95"])


def test_fresh_record_and_stale_ones_name_what_changed(recorded, monkeypatch):
    record, _ = recorded
    assert record.stale() == ""
    assert "made by this code" in record.describe()
    files = record.header["code"]["files"]
    monkeypatch.setitem(files, "lab/experiments/registry.py", "0" * 16)
    message = record.stale()
    assert "lab/experiments/registry.py" in message and "tox -e experiments" in message
    assert "convs2s.py" not in message
    assert message in record.describe()


def test_the_pages_refuse_a_stale_record_and_say_what_changed(recorded, monkeypatch):
    from convs2s_edu.lab.experiments import experiment_result

    record, _ = recorded
    assert experiment_result("tiny", record, say=False).rows  # fresh: read
    # a budget edited in the registry (a planted change to the code the record fingerprints)
    monkeypatch.setitem(record.header["code"]["files"], "lab/experiments/registry.py", "0" * 16)
    with pytest.raises(RuntimeError, match="stale: code changed since it was made: lab/exp"):
        experiment_result("tiny", record, say=False)


def test_a_budget_the_registry_no_longer_gives_is_stale(recorded, monkeypatch):
    record, _ = recorded
    monkeypatch.setattr(
        record_mod,
        "budget",
        lambda quick=None, *a: TINY.__class__(**{**TINY.__dict__, "steps": 6}),
    )
    assert "budget" in record.stale() and "run(s) of the registry" in record.stale()


def test_spot_check_is_exact_on_this_machine_and_catches_a_wrong_number(recorded):
    record, _ = recorded
    checks = spot_check(record, n=4, seed=3)  # every run
    assert all(c["ok"] and c["exact"] for c in checks)
    assert all(now == before for c in checks for before, now, _ in c["scores"].values())
    wrong = next(iter(record.runs.values()))
    wrong["scores"]["base"]["test_loss"] += 1e-6  # one recorded number, planted wrong
    with pytest.raises(ValueError, match=rf"run {wrong['run']}\): test_loss recorded"):
        spot_check(record, n=4, seed=3, strict=True)
    wrong["scores"]["base"]["test_loss"] -= 1e-6
    wrong["scores"]["base"]["sequence_errors"] += 1  # no one-sequence leeway here
    with pytest.raises(ValueError, match=r"sequence_errors recorded"):
        spot_check(record, n=4, seed=3, strict=True)


def test_spot_check_elsewhere_allows_the_arms_seed_spread(recorded, monkeypatch):
    record, _ = recorded
    for run in record.runs.values():  # as if another CPU had made the record
        run["provenance"]["cpu"] = "another CPU"
    checks = spot_check(record, n=4, seed=0)
    assert all(not c["exact"] for c in checks)
    spreads = {c["arm"]: c["scores"]["test_loss"][2] for c in checks}
    assert all(s > 0 for s in spreads.values())  # two seeds of an arm differ
    run = next(iter(record.runs.values()))
    run["scores"]["base"]["test_loss"] += 2 * spreads["/".join(run["arms"][0])]
    with pytest.raises(ValueError, match="spot check"):
        spot_check(record, n=4, seed=0, strict=True)


def test_spot_check_compares_a_run_with_every_run_of_its_arms(recorded):
    """A run serves every arm of its configuration and lists them in the experiments'
    order (the full record's reference runs list the encoder-decoder arm before the beam
    arm; one more seed serves the beam arm alone): off the recording machine, every run
    of any of its arms is a peer, whichever it lists first; a run with none is refused."""
    record, _ = recorded
    for run in record.runs.values():  # as if another CPU had made the record
        run["provenance"]["cpu"] = "another CPU"
    first, second = sorted(
        (r for r in record.runs.values() if r["arms"][0][1] == "conv"), key=lambda r: r["seed"]
    )
    # seed 0 also serves an arm of another experiment, listed first; seed 1 only "conv"
    first["arms"].insert(0, ["other", "shared"])
    checks = spot_check(record, runs=[first["run"], second["run"]])
    assert [c["arm"] for c in checks] == ["other/shared", "tiny/conv"]
    alarm = record_mod.SPOT_FALSE_ALARM / (record_mod.SPOT_INDEPENDENT_SCORES * 2)
    factor = record_mod.spot_range_factor(2, alarm)
    for check, peer in zip(checks, (second, first)):
        assert not check["exact"]
        recorded_loss, now, allowed = check["scores"]["test_loss"]
        peer_loss = peer["scores"]["base"]["test_loss"]
        assert peer_loss != now  # so the tolerance is the factor times their distance
        assert allowed == pytest.approx(factor * abs(peer_loss - now))
    del record.runs[first["run"]]  # the arm's only run
    with pytest.raises(ValueError, match=rf"run {second['run']} \(tiny/conv seed 1\) has no"):
        spot_check(record, runs=[second["run"]])


def test_spot_check_elsewhere_lets_a_count_move_by_one_sequence(recorded):
    """Off the recording machine a run may make one error more or less than recorded even
    where the arm's other seeds all made as many errors as the retrained run (a range of 0):
    one more is allowed, two are not; exact match likewise by 1 / n_test."""
    record, _ = recorded
    for run in record.runs.values():  # as if another CPU had made the record
        run["provenance"]["cpu"] = "another CPU"
    run = next(iter(record.runs.values()))
    base = run["scores"]["base"]
    (check,) = spot_check(record, runs=[run["run"]])
    errors, match = check["scores"]["sequence_errors"][1], check["scores"]["exact_match"][1]
    peers = [r for r in record.runs.values() if r["arms"] == run["arms"] and r is not run]
    for peer in peers:  # every other seed as the retrained run
        peer["scores"]["base"] |= {"sequence_errors": errors, "exact_match": match}
    for off, ok in ((1, True), (2, False)):
        base["sequence_errors"] = errors + off
        (check,) = spot_check(record, runs=[run["run"]])
        assert check["scores"]["sequence_errors"][2] == 1.0 and check["ok"] is ok, off
    base["sequence_errors"] = errors
    step = 1 / record.budget.n_test
    for off, ok in ((1, True), (2, False)):
        base["exact_match"] = match + off * step if match < 0.5 else match - off * step
        (check,) = spot_check(record, runs=[run["run"]])
        assert check["scores"]["exact_match"][2] == pytest.approx(step), off
        assert check["ok"] is ok, off
    # one sequence of 2,000 apart is 0.9995 - 0.999 in floating point, a hair above 1 / 2000
    assert 0.9995 - 0.999 > 1 / 2000 and not record_mod._beyond(0.9995 - 0.999, 1 / 2000)
    assert record_mod._beyond(0.9995 - 0.9985, 1 / 2000)  # two sequences
    assert record_mod._beyond(1e-17, 0.0)  # on the recording machine: equal, or flagged
    assert record_mod._beyond(float("nan"), 1.0)  # a retraining that diverged


def test_pages_read_the_record_when_there_is_one(recorded, monkeypatch, capsys):
    record, _ = recorded
    monkeypatch.setenv(record_mod.RECORD_ENV, str(record.path.parent))
    monkeypatch.setattr(record_mod, "record_dir", lambda quick=None, pilot=False: record.path)
    result = record_mod.experiment_result("tiny")
    assert result.curves is not None and "from the experiment record" in capsys.readouterr().out


def test_the_command_line_refuses_options_that_change_the_budget(tmp_path, capsys):
    assert main(["experiment", "--all", "--seeds", "3", "--record", str(tmp_path)]) == 2
    assert "--all records every experiment" in capsys.readouterr().err
    assert main(["experiment"]) == 2
    assert "name an experiment, or --all" in capsys.readouterr().err


def test_the_registry_runs_are_distinct_and_serve_every_arm():
    b = registry_mod.budget(quick=True)
    runs = record_mod.distinct_runs(b)
    served = {tuple(a) for r in runs.values() for a in r["arms"]}
    every = {(n, a.name) for n, e in registry_mod.EXPERIMENTS.items() for a in e.arms}
    assert served == {(n, a) for n, a in every} and len(runs) < len(every) * b.seeds


def test_verify_on_the_command_line_names_a_planted_wrong_number(recorded, capsys):
    record, _ = recorded
    args = ["experiment", "--verify", "--record", str(record.path), "--spot", "4"]
    assert main(args) == 0 and capsys.readouterr().out.count(": equal") == 4
    path = record.path / "runs.jsonl"
    runs = [json.loads(line) for line in path.read_text().splitlines()]
    runs[1]["scores"]["base"]["exact_match"] = 0.5  # planted: no tiny run gets there
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"run {runs[1]['run']}): exact_match recorded 0.5, retrained" in err


def test_the_smallest_matrix_on_a_two_worker_dask_cluster(tiny_experiment, tmp_path, monkeypatch):
    from distributed import LocalCluster

    monkeypatch.setattr(record_mod, "EXPERIMENTS", {"tiny": tiny_experiment})
    monkeypatch.setattr(record_mod, "budget", lambda quick=None, *args: TINY)
    from distributed import Client

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
    with cluster, Client(cluster) as client:
        cluster_pids = set(client.run(os.getpid).values())
        where = record_mod.make_record(
            tmp_path / "rec",
            progress=False,
            cache=tmp_path / "cache",
            address=cluster.scheduler_address,
        )
    record = load_record(where)
    pids = {int(r["provenance"]["worker"].rsplit(":", 1)[1]) for r in record.runs.values()}
    # both of the cluster's workers ran runs, and neither is this process
    assert pids == cluster_pids and len(pids) == 2 and os.getpid() not in pids
    assert record.header["made"]["cluster"].startswith("tcp://") and record.stale() == ""


@pytest.mark.parametrize(
    "args, message",
    [
        (["encoder_decoder", "--address", "tcp://x:1"], "--address goes with --all"),
        (["encoder_decoder", "--claim", "3"], "--claim goes with --verify"),
        (["encoder_decoder", "--record", "x"], "--record goes with --all or --verify"),
        (["--all", "--verify"], "one at a time"),
    ],
)
def test_options_of_another_mode_are_refused_not_ignored(args, message, capsys):
    assert main(["experiment", *args]) == 2
    assert message in capsys.readouterr().err


def test_a_run_is_the_same_run_on_either_path():
    # the record is read on machines that choose other paths (TrainConfig.fast=None):
    # the path a run took is its provenance, not part of what it is
    cfg = record_mod.experiment_configs("positions", registry_mod.budget(quick=True))[0][2]
    assert cfg.fast is None
    keys = {record_mod._run_key(cfg.replace(fast=f)) for f in (None, True, False)}
    assert len(keys) == 1
    assert record_mod._run_key(cfg) != record_mod._run_key(cfg.replace(seed=cfg.seed + 1))


def test_a_claims_runs_are_its_pairs_on_the_seeds_both_arms_have():
    from pathlib import Path

    from convs2s_edu.lab.experiments import CLAIMS, budget
    from convs2s_edu.lab.experiments.record import Record, _run_key, claim_runs
    from convs2s_edu.lab.experiments.runner import experiment_configs

    full = budget(quick=False)
    # gru+conv against three arms; in the full build it has 14 seeds, the GRU 13 and
    # the other two 19: each pair is compared on the seeds both of its arms have
    claim = next(c for c in CLAIMS if c.key == "rnn-cnn-best")
    arms = ["gru+conv", "convs2s", "gru", "conv+gru"]
    every = experiment_configs(claim.experiment, full, arms)
    runs = {_run_key(cfg): {"run": f"{arm.name}/{seed}"} for arm, seed, cfg in every}
    record = Record({"budget": json.loads(json.dumps(full.__dict__))}, runs, Path("."))
    first, n = full.first_seed, {a: len(full.seeds_of(claim.experiment, a)) for a in arms}
    assert (n["gru+conv"], n["gru"]) == (14, 13) and n["convs2s"] == n["conv+gru"] == 19
    expected = [f"gru+conv/{s}" for s in range(first, first + 14)]
    expected += [f"gru/{s}" for s in range(first, first + 13)]
    expected += [f"{a}/{s}" for a in ("convs2s", "conv+gru") for s in range(first, first + 14)]
    assert sorted(claim_runs(record, claim)) == sorted(expected)


def test_spot_check_rate_is_the_rule_spot_check_applies_elsewhere():
    """The simulated rates against a plain loop over the rule as spot_check states it: the
    retrained value may differ from the recorded one by spot_range_factor times the range
    of the arm's other seeds and the retrained value, the recorded one left out; an
    honest run drifting as far as another seed has a score flagged SPOT_FALSE_ALARM
    divided by the scores checked, so that a check flags an honest record at most
    SPOT_FALSE_ALARM of the time."""
    import random

    def by_hand(n_seeds, shift, n_runs=2, draws=80_000):
        alarm = record_mod.SPOT_FALSE_ALARM / (record_mod.SPOT_INDEPENDENT_SCORES * n_runs)
        factor = record_mod.spot_range_factor(n_seeds, alarm)
        rng, flagged = random.Random(1), 0
        for _ in range(draws):
            others = [rng.gauss(0, 1) for _ in range(n_seeds - 1)]
            now, recorded = rng.gauss(0, 1), rng.gauss(shift, 1)
            allowed = factor * (max(others + [now]) - min(others + [now]))
            flagged += abs(recorded - now) > allowed
        return flagged / draws

    per_score = record_mod.SPOT_FALSE_ALARM / (record_mod.SPOT_INDEPENDENT_SCORES * 2)
    for n_seeds in (2, 5, 20):  # the stated false alarm, on another random stream
        alarm = by_hand(n_seeds, 0.0)
        assert alarm == pytest.approx(per_score, abs=0.001), n_seeds
        assert record_mod.spot_check_rate(n_seeds) == pytest.approx(alarm, abs=0.001)
    assert record_mod.spot_check_rate(5, 3.0) == pytest.approx(by_hand(5, 3.0), abs=0.01)
    # more runs checked: each score held to less, so a wider factor
    assert by_hand(5, 0.0, n_runs=10) < per_score / 2
    assert record_mod.spot_range_factor(5, 0.001) > record_mod.spot_range_factor(5, 0.01)
    # fewer seeds, a wider factor: a shift of 3 SDs is caught less often
    assert record_mod.spot_check_rate(5, 3.0) < record_mod.spot_check_rate(20, 3.0)
    assert record_mod.spot_check_rate(5, shift=60.0) > 0.99  # a number far off: caught
    with pytest.raises(ValueError, match="n_seeds must be at least 2 .*, got 1"):
        record_mod.spot_check_rate(1)
    with pytest.raises(ValueError, match=r"false_alarm must be in \(0, 1\), got 0"):
        record_mod.spot_range_factor(5, false_alarm=0)
