"""A pass changes the pool only when it succeeds, by one rule that holds for all of its state.

The rule every part of the pool's state keeps (the pool, its planner, the forecasters; checked by
`tests/unit/test_state_fork.py`): its fields hold immutable values (numbers, strings, tuples and
named tuples, frozen dataclasses), containers of them (dict, list, set), or further parts (a
dataclass that is not frozen); a change replaces an entry of a container, never changes one in
place. So `fork` need only give each part shallow copies of its containers for a pass to change
nothing it found: it returns what it found, which `restore` puts back should the pass fail. A new
field is forked with the others: there is no list of what a pass may change.

A part whose containers hold entries it changes in place (the forecasters' learned models, too
large to replace at each lesson) copies each before its first change in a pass, and says so with a
`forked` method, which `fork` calls to start its record of what the pass has copied afresh.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple


class _Part(NamedTuple):
    """A part of the state as a fork found it: the object, kept, and what its fields held."""

    part: Any
    found: dict[str, Any]


def is_part(value: Any) -> bool:
    """Is `value` a part of the state, forked field by field (a dataclass that is not frozen)?"""
    return (
        dataclasses.is_dataclass(value) and not isinstance(value, type) and not value.__dataclass_params__.frozen  # type: ignore[attr-defined]
    )


def fork(state: Any) -> dict[str, Any]:
    """Give `state` (a part) and the parts it holds copies of their containers, in place (whoever
    holds them keeps holding the same objects); returns what their fields held, for `restore`."""
    found: dict[str, Any] = {}
    for f in dataclasses.fields(state):
        value = getattr(state, f.name)
        if isinstance(value, (dict, list, set)):
            found[f.name] = value
            setattr(state, f.name, value.copy())
        elif is_part(value):
            found[f.name] = _Part(value, fork(value))
        else:
            found[f.name] = value
    forked = getattr(state, "forked", None)
    if forked is not None:
        forked()
    return found


def restore(state: Any, found: dict[str, Any]) -> None:
    """Put back what `fork` found: `state` is as it was before the fork, whatever changed since."""
    for name, value in found.items():
        if isinstance(value, _Part):
            restore(value.part, value.found)
            value = value.part
        setattr(state, name, value)
