"""Tests of ``convs2s_edu._threads``: the OpenMP defaults are set before torch loads, never over
a user's own setting, and leave one core to the rest of the machine."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from convs2s_edu._threads import THREAD_DEFAULTS, apply_defaults

ROOT = Path(__file__).resolve().parents[1]
N_THREADS = THREAD_DEFAULTS["OMP_NUM_THREADS"]


def policy_after(code: str, **env) -> str:
    """OMP_WAIT_POLICY as seen by a fresh interpreter after running ``code``."""
    environ = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    environ.update(env)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            code + "\nimport os\nprint(os.environ.get('OMP_WAIT_POLICY', '<unset>'))",
        ],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_importing_the_package_sets_the_passive_wait_policy():
    assert policy_after("import convs2s_edu") == "PASSIVE"


def test_a_users_setting_is_kept():
    assert policy_after("import convs2s_edu", OMP_WAIT_POLICY="ACTIVE") == "ACTIVE"


def test_nothing_is_set_once_torch_is_loaded():
    # too late to change OpenMP: leave the environment as the user had it
    assert policy_after("import torch\nimport convs2s_edu") == "<unset>"


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({}, {"OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": N_THREADS}),
        ({"OMP_WAIT_POLICY": "active"}, {"OMP_NUM_THREADS": N_THREADS}),
        ({"OMP_WAIT_POLICY": "active", "OMP_NUM_THREADS": "4"}, {}),
    ],
)
def test_apply_defaults_fills_in_only_what_is_missing(environ, expected):
    before = dict(environ)
    assert apply_defaults(environ) == expected
    assert environ == {**THREAD_DEFAULTS, **before}


def test_one_core_is_left_to_the_rest_of_the_machine(monkeypatch):
    from convs2s_edu import _threads

    for cores, expected in ((1, "1"), (2, "1"), (16, "15")):
        monkeypatch.setattr(_threads.os, "sched_getaffinity", lambda pid, n=cores: set(range(n)))
        assert _threads._default_threads() == expected
