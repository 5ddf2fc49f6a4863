"""The pause of Python's cycle collector around bulk reading."""

import gc

import pytest

from roofline.program.gc_pause import gc_paused


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_inside_and_on_again_after(collector_on):
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_what_a_paused_block_kept_goes_to_the_oldest_generation(collector_on):
    # Young collections would trace it twice more and count it toward a full collection.
    with gc_paused():
        kept = [[index] for index in range(2000)]
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(item) in oldest for item in kept)
    assert gc.get_count()[0] < 100   # nothing left young to trace (a few made since)


def test_a_caller_that_turned_the_collector_off_keeps_it_off(collector_on):
    gc.disable()
    with gc_paused():
        kept = [[index] for index in range(10)]
    assert not gc.isenabled()
    young = {id(o) for o in gc.get_objects(generation=0)}
    assert all(id(item) in young for item in kept)   # left where the caller's pause put it
