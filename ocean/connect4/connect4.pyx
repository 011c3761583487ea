# cython: language_level=3, boundscheck=False, wraparound=False
"""Connect4 binding; the env is in connect4.h, the rules in puffercore/games/connect4.h."""

import gymnasium
import numpy as np

cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t
from puffercore.env cimport PcEnvSpec, spec_capsule

from puffercore.checks import check_choice
from puffercore.ocean.native import ILLEGAL_MOVES, NativeEnv
from puffercore.spaces import masked_observation_tree

cnp.import_array()

cdef extern from "connect4.h":
    int C4_ROWS, C4_COLS, C4ENV_OBS_SIZE, C4ENV_MASK_OFFSET, C4ENV_BOARD_OFFSET
    int C4ENV_RANDOM, C4ENV_HEURISTIC, C4ENV_AGENT_FIRST, C4ENV_OPPONENT_FIRST, C4ENV_COIN_FLIP
    ctypedef struct CConnect4 "Connect4":
        int8_t heights[7]
    ctypedef struct CConnect4Env "Connect4Env":
        int32_t opponent, first_mover, agent
        CConnect4 game
    int c4env_action_is_legal(const void* env, const void* actions)
    int c4_game_render(const void* state, char* out, int capacity)
    const PcEnvSpec CONNECT4_SPEC

OPPONENTS = {"random": C4ENV_RANDOM, "heuristic": C4ENV_HEURISTIC}
FIRST_MOVERS = {True: C4ENV_AGENT_FIRST, False: C4ENV_OPPONENT_FIRST, None: C4ENV_COIN_FLIP}


class Connect4Env(NativeEnv):
    """Connect Four against a built-in opponent that replies within the same step.

    opponent: "heuristic" (wins if it can, else blocks the agent's immediate win, else
        avoids handing the agent a win on top of its piece; random among equals) or
        "random" (a uniformly random open column).
    agent_first: True (the agent always moves first), False (always second; the
        opponent's opening move is in the first observation) or None (a coin flip per
        episode from the env's seeded RNG, so the agent learns both seats).
    illegal_move: "error" (default): a step that plays a full column raises ValueError
        naming the env, and none of this object's envs moves (nor any env of a threads
        vector over it; a serial or processes vector steps its sub-envs one by one, so
        those before the offending one have moved). "lose": the move ends the episode
        as a loss (reward -1), for policies that do not use the action mask.

    Discrete(7) actions: the column. Reward +1 win, -1 loss, 0 otherwise; games end
    terminal (never truncated). Observation: 91 float32, the flat row of
    `observation_tree` = SpaceTree(Dict(action_mask=[7], board=[2, 6, 7])):
    columns 0..6 of the row are the legal-move mask, then the board as the agent sees
    it (plane 0 its pieces, plane 1 the opponent's, row 0 at the bottom), so
    `env.observation_tree.unflatten(obs)["action_mask"]` is a view of the masks, as for
    PettingZoo envs. Episode info: episode_return, episode_length (agent moves),
    win_rate, loss_rate, draw_rate, illegal_move_rate.
    """

    def __init__(self, num_envs=1, seed=0, buffers=None, render_mode=None, *,
                 opponent="heuristic", agent_first=None, illegal_move="error"):
        check_choice(opponent, "opponent", OPPONENTS)
        if agent_first is not None and not isinstance(agent_first, (bool, np.bool_)):
            raise TypeError(f"agent_first must be True, False or None (a coin flip per episode), got {agent_first!r}")
        check_choice(illegal_move, "illegal_move", ILLEGAL_MOVES)
        self.opponent = opponent
        self.agent_first = None if agent_first is None else bool(agent_first)
        self.illegal_move = illegal_move
        self.observation_tree = masked_observation_tree(
            C4_COLS, gymnasium.spaces.Box(0.0, 1.0, (2, C4_ROWS, C4_COLS), np.float32),
            layout=(C4ENV_MASK_OFFSET, C4ENV_BOARD_OFFSET, C4ENV_OBS_SIZE), header="connect4.h")
        super().__init__(spec_capsule(&CONNECT4_SPEC), num_envs, seed, buffers, render_mode)
        if illegal_move == "error":
            self.reject_illegal_actions(<size_t>&c4env_action_is_legal)

    def _configure(self, size_t address):
        cdef CConnect4Env* env = <CConnect4Env*>address
        env.opponent = OPPONENTS[self.opponent]
        env.first_mover = FIRST_MOVERS[self.agent_first]

    def _describe_illegal_action(self, row, env_index):
        return f"column {self.actions[row]} of env {env_index} is full"

    def _render_ansi(self, size_t address):
        """The board (X moved first), the column numbers, and who plays which colour."""
        cdef CConnect4Env* env = <CConnect4Env*>address
        cdef char text[256]
        c4_game_render(&env.game, text, sizeof(text))
        agent, other = "XO"[env.agent], "XO"[1 - env.agent]
        return text.decode() + f"agent {agent}, {self.opponent} opponent {other}\n"

