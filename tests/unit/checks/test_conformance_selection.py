"""Which conformance scenarios notebook 07 runs: ``conformance.scenarios`` by name, else the set
``conformance.short`` chooses."""

from __future__ import annotations

import pytest

from helpers.checks.conformance import SCENARIOS, run_scenarios, short_set
from helpers.errors import ParamsError
from helpers.params import load_params


def test_the_ci_parameters_name_one_known_scenario_of_the_short_set() -> None:
    """The notebook tier's notebook 07 runs one short-set scenario; the integration tier runs the
    short set on both engines."""
    names = load_params("ci").conformance.scenarios
    assert len(names) == 1 and set(names) <= set(SCENARIOS) and set(names) <= set(short_set())


def test_the_local_default_names_none_so_the_short_set_runs() -> None:
    params = load_params("local")
    assert params.conformance.scenarios == () and params.conformance.short


def test_a_scenario_name_set_on_the_command_line_is_a_tuple() -> None:
    params = load_params("local", {"conformance.scenarios": ["deletes_postgres"]})
    assert params.conformance.scenarios == ("deletes_postgres",)


def test_an_unknown_scenario_fails_naming_the_known_ones_before_anything_runs() -> None:
    params = load_params("local", {"conformance.scenarios": ["deletes_oracle"]})
    with pytest.raises(ParamsError, match=r"deletes_oracle.*deletes_postgres"):
        run_scenarios(params, params.conformance.scenarios)
