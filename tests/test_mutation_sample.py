"""The summary of ``tools/mutation_sample.py`` (the sampled mutation score of issue 7).

The script's verdict is only as good as its arithmetic: the interval, the status of each
exit code and the per-module split are checked here against values computed by hand.
Running mutmut itself is ``tox -e mutation-sample``'s job, not the suite's.
"""

import pytest
from _files import load_module


@pytest.fixture(scope="module")
def tool():
    return load_module("tools/mutation_sample.py", "mutation_sample_under_test")


def test_wilson_interval_matches_hand_computation(tool):
    # 8 of 10, z = 1.96: centre (0.8 + 0.19208) / 1.38416 = 0.71674,
    # half 1.96 * sqrt(0.016 + 0.009604) / 1.38416 = 0.22658
    low, high = tool.wilson(8, 10)
    assert low == pytest.approx(0.71674 - 0.22658, abs=1e-4)
    assert high == pytest.approx(0.71674 + 0.22658, abs=1e-4)
    # all caught: the upper end is 1, the lower end is below 1 (k/n +- z*se would say [1, 1])
    low, high = tool.wilson(50, 50)
    assert high == pytest.approx(1.0) and low == pytest.approx(50 / (50 + 1.96**2), abs=1e-4)


def test_summary_counts_caught_per_module_and_lists_survivors(tool):
    sample = [
        "convs2s_edu.train.x_train__mutmut_1",  # killed
        "convs2s_edu.train.x_train__mutmut_2",  # survived
        "convs2s_edu.cli.xǁ_Parserǁerror__mutmut_1",  # timeout counts as caught
        "convs2s_edu.cli.x_main__mutmut_4",  # no test covers it: not caught
        "convs2s_edu.metrics.x_evaluate__mutmut_9",  # skipped: not counted
    ]
    codes = dict(zip(sample, [1, 0, 36, 33, 34]))
    summary = tool.summarise(sample, codes, seed=3, population=40)
    assert (summary["caught"], summary["counted"]) == (2, 4)
    assert summary["score"] == pytest.approx(0.5)
    assert summary["not_caught"] == [
        "convs2s_edu.cli.x_main__mutmut_4",
        "convs2s_edu.train.x_train__mutmut_2",
    ]
    assert summary["per_module"]["convs2s_edu.cli"] == {"timeout": 1, "no tests": 1}
    assert summary["per_module"]["convs2s_edu.train"] == {"killed": 1, "survived": 1}
    assert summary["per_module"]["convs2s_edu.metrics"] == {"skipped": 1}
    assert summary["not_run"] == []
    # a mutant the run never reached is reported, not silently scored
    codes[sample[0]] = None
    assert tool.summarise(sample, codes, 3, 40)["not_run"] == [sample[0]]
