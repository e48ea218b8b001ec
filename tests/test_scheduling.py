"""The xdist order of long trials (:mod:`tests.scheduling`): the longest first, one to each worker."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.scheduling import cost, deal, worksteal


@dataclass
class _Item:
    name: str
    seconds: float | None

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        assert name == "trial_seconds"
        return None if self.seconds is None else pytest.mark.trial_seconds(self.seconds).mark


def test_the_longest_trials_head_one_hand_each_and_the_rest_keep_their_order() -> None:
    items = [_Item("a", None), _Item("kafka", 1100), _Item("b", None), _Item("files", 510), _Item("kill", 200),
             _Item("c", None), _Item("both", 190)]
    dealt = deal(items, 2)  # type: ignore[arg-type]
    assert [i.name for i in dealt] == ["kafka", "kill", "a", "c", "files", "both", "b"]
    assert cost(dealt[0]) == 1100 and cost(dealt[4]) == 510  # type: ignore[arg-type]
    assert [i.name for i in deal(items, 1)] == ["kafka", "files", "kill", "both", "a", "b", "c"]  # type: ignore[arg-type]


def test_worksteal_is_read_from_the_command_line_in_either_spelling() -> None:
    assert worksteal(["pytest", "-q", "-n", "2", "--dist", "worksteal", "-m", "crash_trials"])
    assert worksteal(["pytest", "--dist=worksteal"])
    assert not worksteal(["pytest", "-n", "2", "--dist", "load", "worksteal"])
    assert not worksteal(["pytest", "-n", "2"])
