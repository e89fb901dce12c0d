"""Property tests: random compositions of the library's operators pass gradcheck and gradgradcheck."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import reference_engine as engine
from formulas import at

MASK = engine.tensor(np.array([[True, False, True], [False, True, True]]))
MATRIX = engine.tensor(np.array([[0.5, -1.0, 0.2], [0.3, 0.8, -0.4], [1.1, 0.1, 0.6]]))

# Each step maps (x, y), both of shape (2, 3), to a new (2, 3) tensor; smooth everywhere.
STEPS = {
    "sin": lambda x, y: x.sin(),
    "cos": lambda x, y: at.cos(x),
    "tanh": lambda x, y: x.tanh(),
    "sigmoid": lambda x, y: x.sigmoid(),
    "exp_of_tanh": lambda x, y: x.tanh().exp(),
    "neg": lambda x, y: -x,
    "mul": lambda x, y: x * y,
    "add_alpha": lambda x, y: at.add(x, y, alpha=0.5),
    "sub": lambda x, y: x - y,
    "div": lambda x, y: x / (y * y + 1.0),
    "square": lambda x, y: x ** 2,
    "sqrt": lambda x, y: (x * x + 1.0).sqrt(),
    "log": lambda x, y: (x * x + 1.0).log(),
    "softmax": lambda x, y: at._softmax(x, 1, False),
    "log_softmax": lambda x, y: at._log_softmax(x, 0, False),
    "row_sum_broadcast": lambda x, y: x.sum([1], True) * y,
    "column_mean": lambda x, y: x - x.mean([0], True),
    "mean_all": lambda x, y: x * x.mean(),
    "max_dim": lambda x, y: x.max(1, True)[0].expand([2, 3]) + x,
    "transpose_mm": lambda x, y: (x.t() @ y).sum([0], True).expand([2, 3]),
    "mm_constant": lambda x, y: x @ MATRIX,
    "addmm": lambda x, y: at.addmm(y, x, MATRIX, beta=0.5, alpha=2.0),
    "reshape_permute": lambda x, y: x.reshape(3, 2).permute(1, 0).reshape(2, 3),
    "cat_narrow": lambda x, y: at.narrow(at.cat([x, y], 1), 1, 2, 3),
    "where": lambda x, y: at.where(MASK, x, y),
    "unsqueeze_view": lambda x, y: x.unsqueeze(0).view([2, 3]),
}


def _program(steps):
    def run(x, y):
        for name in steps:
            x, y = STEPS[name](x, y), x
        return x
    return run


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return tuple(engine.tensor(rng.uniform(-1.0, 1.0, (2, 3)), requires_grad=True) for _ in range(2))


programs = st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=5)
seeds = st.integers(0, 2**32 - 1)


@settings(max_examples=60, deadline=None)
@given(steps=programs, seed=seeds)
def test_random_compositions_gradcheck(steps, seed):
    assert engine.gradcheck(_program(steps), _inputs(seed), atol=1e-6, rtol=1e-4)


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=3), seed=seeds)
def test_random_compositions_gradgradcheck(steps, seed):
    assert engine.gradgradcheck(_program(steps), _inputs(seed), atol=1e-5, rtol=1e-3)


def test_every_step_is_exercised_on_its_own():
    for name in STEPS:
        assert engine.gradgradcheck(_program([name]), _inputs(0)), name
