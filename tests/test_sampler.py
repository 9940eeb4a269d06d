"""MixedReplaySampler on its own: the stream it yields, and the state it resumes from (and refuses)."""

import pytest
import torch

from mssr_hf.sampler import MixedReplaySampler

LAYOUT = dict(world_size=2, per_device_train_batch_size=2, gradient_accumulation_steps=1)


def test_state_round_trip_continues_the_stream():
    """A sampler restored from another's state at step 3 yields what the original yields from step 3 on."""
    a = MixedReplaySampler(torch.arange(10), 4, 6, seed=3, layout=LAYOUT)
    a.set_plan(4, torch.tensor([20, 21]))
    stream = list(a)  # 6 steps x 4 rows
    b = MixedReplaySampler(torch.arange(10), 4, 6, seed=3, layout=LAYOUT)
    b.set_plan(4, torch.tensor([20, 21]))
    for _ in range(2):
        b.batch_for_step(b.next_step)
        b.next_step += 1
    c = MixedReplaySampler(torch.arange(10), 4, 4, seed=3, layout=LAYOUT)
    c.load_state_dict(b.state_dict())
    assert c.next_step == 3 and list(c) == stream[2 * 4 :]
    assert stream[3 * 4 : 4 * 4].count(20) == 1  # step 4 holds its planned replay rows


def test_state_records_and_checks_what_the_sampler_was_built_with():
    """Resuming with another world size (so another global batch) or seed is refused, naming saved vs now."""
    state = MixedReplaySampler(torch.arange(10), 4, 5, seed=3, layout=LAYOUT).state_dict()
    assert state["built_with"] == {**LAYOUT, "global_batch": 4, "seed": 3}
    fewer = MixedReplaySampler(torch.arange(10), 2, 5, seed=3, layout={**LAYOUT, "world_size": 1})
    with pytest.raises(ValueError, match=r"world_size: saved 2, now 1; global_batch: saved 4, now 2"):
        fewer.load_state_dict(state)
    reseeded = MixedReplaySampler(torch.arange(10), 4, 5, seed=4, layout=LAYOUT)
    with pytest.raises(ValueError, match=r"seed: saved 3, now 4"):
        reseeded.load_state_dict(state)
    same = MixedReplaySampler(torch.arange(10), 4, 5, seed=3, layout=LAYOUT)
    same.load_state_dict(state)
    assert same.next_step == 1
