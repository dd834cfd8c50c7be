"""The agent's de-duplication window (`agent/service/seen_ids.py`): ids found by name, dropped
oldest first by count or by step, and copied newest-last for snapshots."""

from __future__ import annotations

from gpualloc.agent.service.seen_ids import SeenIds


def window(n: int) -> SeenIds:
    return SeenIds((f"e{k}", k // 10, f"d{k}") for k in range(n))


def test_it_finds_ids_and_their_digests():
    seen = window(5)
    assert "e3" in seen and "e9" not in seen and seen.digest("e3") == "d3" and len(seen) == 5
    seen.add("old", 0, None)  # an entry of a snapshot without digests
    assert seen.digest("old") is None


def test_it_drops_the_oldest_first():
    seen = window(30)
    seen.keep_newest(12)
    assert len(seen) == 12 and "e17" not in seen and "e18" in seen
    seen.forget_before(2)  # steps 0 and 1: ids e0-e19
    assert len(seen) == 10 and "e19" not in seen and "e20" in seen
    seen.forget_before(2)
    assert len(seen) == 10  # nothing older is left


def test_snapshots_copy_the_newest_in_arrival_order():
    seen = window(6)
    assert seen.newest() == [(f"e{k}", 0, f"d{k}") for k in range(6)]
    assert seen.newest(2) == [("e4", 0, "d4"), ("e5", 0, "d5")] and seen.newest(0) == [] and len(seen.newest(99)) == 6
    copy = seen.newest()
    seen.add("e6", 0, "d6")
    assert len(copy) == 6  # a copy: the window goes on without it
    assert SeenIds(seen.newest()).newest() == seen.newest()  # what a snapshot restores
