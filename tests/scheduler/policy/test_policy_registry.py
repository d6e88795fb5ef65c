"""The named policies and the injected interference memo."""

from __future__ import annotations

import pytest

from scheduler.plugins.sim_interference import InterferenceMemo
from scheduler.policy import DEFAULT_POLICY, POLICY_NAMES, get_policy, plan_cycle
from scheduler.policy.registry import with_memo


def test_the_registry_names_the_simulators_seven_policies_and_defaults_to_ours() -> None:
    assert POLICY_NAMES == ("k8s", "fifo", "sjf", "tiresias", "gandiva", "gpushare", "ours")
    assert DEFAULT_POLICY == "ours"
    ours = get_policy("ours")
    assert (ours.order, ours.share, ours.las_inner) == ("las", "half", "gittins")
    assert ours.preemptive and ours.unpack_on_idle and ours.defragment
    assert not get_policy("k8s").preemptive


def test_an_unknown_policy_name_is_refused_with_the_known_names() -> None:
    with pytest.raises(ValueError, match="known: k8s, fifo"):
        get_policy("nope")


def test_plan_cycle_refuses_something_that_is_not_a_policy() -> None:
    from scenario import view

    with pytest.raises(TypeError, match="Policy"):
        plan_cycle(view({"n1": 1}, running=[], queue=[]), 42)


def test_the_memo_is_injected_into_the_interference_plugin_and_shared_by_its_instances() -> None:
    memo = InterferenceMemo()
    built = with_memo(get_policy("ours").profile, memo).build()
    plugins = [p for p in [*built.filters, *(s for s, _ in built.scores)] if p.name == "sim_interference"]
    assert len(plugins) == 2
    assert plugins[0]._memo is plugins[1]._memo  # one table set, the memo's
    assert memo._tables and next(iter(memo._tables.values())).sets is plugins[0]._memo
    # A profile without the plugin is returned as it is.
    k8s = get_policy("k8s").profile
    assert with_memo(k8s, memo) is k8s
