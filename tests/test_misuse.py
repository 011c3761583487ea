"""Misuse of native objects raises a Python exception, never a segfault: each case runs
in a fresh interpreter, so a crash fails the test instead of killing pytest."""

import subprocess
import sys

import pytest

CASES = {
    "drain_info after close": (
        "import numpy as np\nfrom puffercore.ocean import CartPole\nenv = CartPole(num_envs=2)\nenv.reset()\n"
        "for _ in range(30):\n    env.step(np.ones(2, np.int32))\nenv.close()\nenv.drain_info()",
        "RuntimeError: CartPole is closed"),
    "closing the env under a threads vector": (
        "import numpy as np, puffercore\nfrom puffercore.ocean import CartPole\n"
        "vec = puffercore.vector.make(CartPole, 4, backend='threads')\nvec.reset()\nvec.env.close()",
        "RuntimeError: CartPole is stepped by a Threads vector env; close that instead"),
    "a GameState made without a game": (
        "from puffercore.games import GameState\nGameState.__new__(GameState).is_terminal()",
        "TypeError: this GameState was not created by Game.new_state()"),
    "a Game made without __init__": (
        "from puffercore.games import Game\nGame.__new__(Game).new_state()",
        "TypeError: Game was not initialized"),
    "searching a bare GameState": (
        "from puffercore.games import Connect4, GameState\nfrom puffercore.alphazero import BatchedMCTS, uniform_evaluator\n"
        "BatchedMCTS(Connect4(), batch_size=1, num_simulations=2).search([GameState.__new__(GameState)], uniform_evaluator)",
        "TypeError: this GameState was not created by Game.new_state()"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_misuse_raises_instead_of_crashing(case):
    code, expected = CASES[case]
    result = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, f"exit {result.returncode} (negative: a signal)\n{result.stderr[-2000:]}"
    assert expected in result.stderr.strip().splitlines()[-1], result.stderr[-2000:]


def test_a_closed_threads_vector_still_closes_its_env():
    import numpy as np

    import puffercore.vector
    from puffercore.ocean import CartPole

    vec = puffercore.vector.make(CartPole, 4, backend="threads")
    vec.reset()
    vec.close()
    with pytest.raises(RuntimeError, match="CartPole is closed"):
        vec.env.step(np.zeros(4, np.int32))


def test_an_env_instance_for_a_creator_and_a_closed_staggered_vector_get_clear_messages():
    import gymnasium
    import numpy as np

    import puffercore.vector
    from puffercore.ocean import CartPole

    for instance in (CartPole(num_envs=2), gymnasium.make("CartPole-v1")):
        for backend in ("serial", "threads"):
            with pytest.raises(TypeError, match="must be an env class or a function returning a new env"):
                puffercore.vector.make(instance, 4, backend=backend)
    vec = puffercore.vector.make(CartPole, 4, backend="threads", batch_size=2)
    vec.close()
    with pytest.raises(RuntimeError, match="step\\(\\) called on a closed vector env"):
        vec.step(np.zeros(4, np.int32))
