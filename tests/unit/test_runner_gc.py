"""Engine starts without full collections of the worker's heap, and without leaks: what an engine
allocates is never frozen, so the collection at unload frees it (harness.runners.vllm_engine)."""

import gc
import weakref

import pytest

from harness.runners import freeze_what_is_alive
from harness.runners.vllm_engine import heap_kept_frozen


class Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the garbage collector frees it


@pytest.fixture(autouse=True)
def _unfreeze_after():
    yield
    gc.unfreeze()


def test_what_an_engine_allocates_is_freed_by_the_collection_at_unload():
    with heap_kept_frozen(freeze_first=True):
        engine = Node()
        gc.freeze()  # what vLLM's engine core does at the end of its start: here, nothing
        alive = weakref.ref(engine)
    with heap_kept_frozen(freeze_first=False):
        gc.unfreeze()  # and at shutdown
        gc.collect()
    del engine
    gc.collect()
    assert alive() is None


def test_vllms_freeze_counts_again_after_the_block_even_if_the_start_failed():
    real = gc.freeze, gc.unfreeze
    with pytest.raises(RuntimeError), heap_kept_frozen(freeze_first=True):
        raise RuntimeError("engine start failed")
    assert (gc.freeze, gc.unfreeze) == real
    before = gc.get_freeze_count()
    keep = [Node() for _ in range(10)]
    gc.freeze()
    assert gc.get_freeze_count() >= before + len(keep)


def test_what_is_alive_before_a_load_is_frozen_and_garbage_is_not():
    gc.unfreeze()
    kept, dropped = Node(), Node()
    dropped_ref = weakref.ref(dropped)
    del dropped
    freeze_what_is_alive()
    assert dropped_ref() is None  # collected, not frozen forever
    assert not any(
        o is kept for o in gc.get_objects()
    )  # in the permanent generation: never scanned
