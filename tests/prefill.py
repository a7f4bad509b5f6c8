"""The prefill path's check, shared by the engine tests: a prompt fed in blocks is bit for bit the
run token after token."""
import numpy as np
import torch


def same_run(engine, ids, block, head=()):
    """`ids` as a prompt in blocks of `block` against token by token (both after the prompt `head`
    run the same way): the same logits, states, conv windows and margins, bit for bit."""
    runs = []
    for b in (block, 1):
        state = engine.new_state()
        if head:
            engine.forward(head, state, block=b)
        runs.append((engine.forward(ids, state, block=b).clone(), state))
    (got, s1), (want, s2) = runs
    assert torch.equal(got, want)
    assert np.array_equal(s1.recurrent, s2.recurrent) and np.array_equal(s1.conv, s2.conv)
    assert (s1.length, s1.residual_worst, s1.noise_worst, s1.noise_at) == \
        (s2.length, s2.residual_worst, s2.noise_worst, s2.noise_at)
    return got
