"""support.memory.fragmentation on the CPU: the plan, and the fill/free/search procedure against two fake
allocators whose answers are known: one that hands out contiguous ranges (holes stay holes) and one that can
give any free byte to any request (as remapping pages would). The GPU allocators run in chapter 4."""

from __future__ import annotations

import sys
from dataclasses import asdict
from types import SimpleNamespace

import pytest

from support.fresh_process import environment
from support.memory import fragmentation
from support.memory.fragmentation import Allocator, FragmentPlan, fragment_and_probe, largest_request_that_fits
from support.memory.pools import MemorySetupError
from support.units import GIB, MIB


class FirstFitArena:
    """Contiguous ranges of a fixed arena, first fit, no moving: a pool that cannot remap."""

    def __init__(self, cap: int):
        self.cap, self.live = cap, {}  # start -> size

    def allocate(self, size: int) -> int:
        start = 0
        for begin in sorted(self.live):
            if begin - start >= size:
                break
            start = begin + self.live[begin]
        else:
            if self.cap - start < size:
                raise MemoryError(f"no hole of {size} bytes")
        self.live[start] = size
        return start

    def release(self, start: int) -> None:
        del self.live[start]


class Remapping:
    """Any free byte serves any request: only the total counts."""

    def __init__(self, cap: int):
        self.cap, self.used, self.next = cap, {}, 0

    def allocate(self, size: int) -> int:
        if sum(self.used.values()) + size > self.cap:
            raise MemoryError("full")
        self.next += 1
        self.used[self.next] = size
        return self.next

    def release(self, handle: int) -> None:
        del self.used[handle]


def as_allocator(fake) -> Allocator:
    return Allocator(fake.allocate, fake.release)


def test_the_plan_is_seeded_and_refuses_a_cap_too_small_for_its_blocks():
    plan = FragmentPlan(cap_bytes=64 * MIB, smallest=MIB, largest=4 * MIB)
    sizes = plan.sizes()
    assert sizes == FragmentPlan(cap_bytes=64 * MIB, smallest=MIB, largest=4 * MIB).sizes()
    assert sum(sizes) >= 2 * plan.cap_bytes and all(MIB <= s <= 4 * MIB and s % 4096 == 0 for s in sizes)
    assert sizes != FragmentPlan(cap_bytes=64 * MIB, smallest=MIB, largest=4 * MIB, seed=1).sizes()
    with pytest.raises(ValueError, match="fewer than four of the largest blocks"):
        FragmentPlan(cap_bytes=8 * MIB, largest=4 * MIB)
    with pytest.raises(ValueError, match="0 < smallest <= largest"):
        FragmentPlan(smallest=4 * MIB, largest=MIB)


def test_the_search_finds_the_largest_hole_of_a_contiguous_arena():
    arena = FirstFitArena(16 * MIB)
    for start in (0, 3 * MIB, 9 * MIB):  # holes: 1-3 MiB (2 MiB), 4-9 MiB (5 MiB), 10-16 MiB (6 MiB)
        arena.live[start] = MIB
    assert largest_request_that_fits(as_allocator(arena), 13 * MIB, MIB) == 6 * MIB
    assert largest_request_that_fits(as_allocator(arena), 4 * MIB, MIB) == 4 * MIB  # capped by the ceiling
    assert len(arena.live) == 3  # every probe was released


def test_holes_limit_a_contiguous_allocator_and_not_a_remapping_one():
    plan = FragmentPlan(cap_bytes=64 * MIB, smallest=MIB, largest=4 * MIB)
    contiguous = fragment_and_probe("arena", as_allocator(FirstFitArena(plan.cap_bytes)), plan)
    remapping = fragment_and_probe("remap", as_allocator(Remapping(plan.cap_bytes)), plan)
    assert contiguous.blocks_filled == remapping.blocks_filled > 10
    assert contiguous.kept_bytes == remapping.kept_bytes
    # the contiguous arena's largest hole is at most two freed blocks and its tail: far below half the memory
    assert contiguous.largest_fit <= 3 * plan.largest and contiguous.usable_share < 0.5, contiguous
    # the remapping one gives all its free memory, to the search's step
    assert remapping.free_bytes - remapping.largest_fit < plan.step, remapping
    row = contiguous.row()
    assert row["allocator"] == "arena" and row["usable in one piece"].endswith("%")


def test_an_allocator_that_never_refuses_is_reported():
    plan = FragmentPlan(cap_bytes=64 * MIB, smallest=MIB, largest=4 * MIB)
    with pytest.raises(RuntimeError, match="without refusing: its cap of 64.00 MiB is not in force"):
        fragment_and_probe("unbounded", as_allocator(Remapping(10 * plan.cap_bytes)), plan)


def test_the_experiment_refuses_a_cap_the_gpu_cannot_spare_and_unknown_allocators():
    fragmentation.check_room(GIB, free=4 * GIB)
    with pytest.raises(MemorySetupError, match="only 1.50 GiB is free"):
        fragmentation.check_room(GIB, free=GIB + GIB // 2)
    with pytest.raises(ValueError, match="unknown allocator 'malloc'"):
        fragmentation.measure_in_fresh_process("malloc")
    assert set(fragmentation.ALLOCATORS) == set(fragmentation._MAKERS)


def test_each_process_gets_only_its_own_pytorch_setting():
    inherited = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "PATH": "/bin"}  # the old name
    plain = environment(fragmentation.process_environment("PyTorch caching allocator"), inherited)
    assert plain == {"PATH": "/bin"}
    expandable = environment(fragmentation.process_environment("PyTorch, expandable segments"), inherited)
    assert (
        expandable["PYTORCH_ALLOC_CONF"] == "expandable_segments:True" and "PYTORCH_CUDA_ALLOC_CONF" not in expandable
    )


def test_a_plan_that_crossed_into_a_fresh_process_as_a_dict_is_read_back_as_a_plan(monkeypatch):
    fake_cupy = SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(memGetInfo=lambda: (80 * GIB, 80 * GIB))))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    seen = {}
    monkeypatch.setitem(fragmentation._MAKERS, "RMM pool", lambda cap: seen.setdefault("cap", cap))
    monkeypatch.setattr(fragmentation, "fragment_and_probe", lambda name, allocator, plan: plan)
    plan = FragmentPlan(2 * GIB, 16 * MIB, 64 * MIB)
    assert fragmentation.measure("RMM pool", asdict(plan)) == plan
    assert seen["cap"] == 2 * GIB
