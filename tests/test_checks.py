"""One check for int arguments (`puffercore.checks.check_int(value, name, low, high)`)
across env bindings, games, search, vectors and transforms: the same exception types and
words everywhere (TypeError for a non-int, ValueError for one out of range)."""

import numpy as np
import pytest

import puffercore.vector
from puffercore.alphazero import BatchedMCTS
from puffercore.checks import check_choice, check_int
from puffercore.games import Connect4
from puffercore.ocean import CartPole, Snake
from puffercore.transforms import FrameStack


@pytest.mark.parametrize("make, error, message", [
    (lambda: Snake(num_envs=1, width="8"), TypeError, "width must be an int in [2, 255], got '8'"),
    (lambda: Snake(num_envs=1, width=1), ValueError, "width must be an int in [2, 255], got 1"),
    (lambda: Connect4().new_state().apply(2.0), TypeError, "action must be an int in [0, 6], got 2.0"),
    (lambda: Connect4().new_state().apply(7), ValueError, "action must be an int in [0, 6], got 7"),
    (lambda: BatchedMCTS(Connect4(), batch_size=True, num_simulations=2), TypeError,
     "batch_size must be an int in [1, 1048576], got True"),
    (lambda: puffercore.vector.make(CartPole, np.float64(2.0), backend="serial"), TypeError,
     "num_envs must be an int >= 1, got np.float64(2.0)"),
    (lambda: puffercore.vector.make(CartPole, 0, backend="serial"), ValueError, "num_envs must be an int >= 1, got 0"),
    (lambda: FrameStack(None, 1), ValueError, "frames must be an int >= 2, got 1"),
])
def test_int_arguments_are_refused_alike_everywhere(make, error, message):
    with pytest.raises(error) as raised:
        make()
    assert str(raised.value) == message


def test_check_int_accepts_numpy_ints_and_names_its_argument_order():
    assert check_int(np.int16(3), "n", 0, 5) == 3 and type(check_int(np.int16(3), "n", 0)) is int
    with pytest.raises(TypeError, match=r"check_int takes \(value, name, low, high\): name must be a str, got 4"):
        check_int("length", 4, 2, 10)  # the order the env bindings' helper used to take
    assert check_choice("lose", "illegal_move", ("error", "lose")) == "lose"
    with pytest.raises(ValueError, match=r"illegal_move must be one of \['error', 'lose'\], got 'skip'"):
        check_choice("skip", "illegal_move", ("error", "lose"))
