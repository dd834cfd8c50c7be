"""GPU sets as the contract writes them: runs of consecutive GPUs [first, end), a few bytes a
run whatever the pool's size."""

from __future__ import annotations

from collections.abc import Iterable


def gpu_runs(mask: int) -> list[tuple[int, int]]:
    """The runs of consecutive GPUs [first, end) of a bitmask, lowest first: GPUs 0-3 and 8 are
    (0, 4), (8, 9). Numbers no larger than the pool whatever its size, a few bytes a run as JSON."""
    out: list[tuple[int, int]] = []
    first = 0
    while mask:
        gap = (mask & -mask).bit_length() - 1
        mask >>= gap
        first += gap
        length = (mask ^ (mask + 1)).bit_length() - 1  # the run of ones now at bit 0
        out.append((first, first + length))
        mask >>= length
        first += length
    return out


def mask_of_runs(runs: Iterable[tuple[int, int]]) -> int:
    """The bitmask of `gpu_runs` (ValueError for a run that is not [first, end), 0 <= first < end)."""
    mask = 0
    for first, end in runs:
        if not 0 <= first < end:
            raise ValueError(f"GPU run [{first}, {end}) is not [first, end) with 0 <= first < end")
        mask |= ((1 << (end - first)) - 1) << first
    return mask


def flat_runs(mask: int) -> list[int]:
    """A GPU set as its runs [first, end) laid flat, as ledger records write it: GPUs 0-3 and 8
    are [0, 4, 8, 9]."""
    return [g for run in gpu_runs(mask) for g in run]


def mask_of_flat(runs: list[int]) -> int:
    """`flat_runs`'s list back to a bitmask (ValueError for an odd count or a run that is not one)."""
    if len(runs) % 2:
        raise ValueError(f"GPU runs: {len(runs)} numbers, not pairs [first, end)")
    return mask_of_runs(zip(runs[::2], runs[1::2]))
