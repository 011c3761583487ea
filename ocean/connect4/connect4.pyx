# cython: language_level=3, boundscheck=False, wraparound=False
"""Connect4 binding; the env is in connect4.h, the rules in puffercore/games/connect4.h."""

import gymnasium
import numpy as np

cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t, int64_t
from puffercore.env cimport PcEnvSpec, spec_capsule

from puffercore.emulation import SpaceTree
from puffercore.ocean.native import NativeEnv

cnp.import_array()

cdef extern from "connect4.h":
    int C4_ROWS, C4_COLS, C4ENV_OBS_SIZE, C4ENV_MASK_OFFSET, C4ENV_BOARD_OFFSET
    int C4ENV_RANDOM, C4ENV_HEURISTIC, C4ENV_AGENT_FIRST, C4ENV_OPPONENT_FIRST, C4ENV_COIN_FLIP
    ctypedef struct CConnect4 "Connect4":
        int8_t heights[7]
    ctypedef struct CConnect4Env "Connect4Env":
        int32_t opponent, first_mover, agent
        CConnect4 game
    int c4_column_open(const CConnect4* game, int col)
    int c4_game_render(const void* state, char* out, int capacity)
    const PcEnvSpec CONNECT4_SPEC

OPPONENTS = {"random": C4ENV_RANDOM, "heuristic": C4ENV_HEURISTIC}
FIRST_MOVERS = {True: C4ENV_AGENT_FIRST, False: C4ENV_OPPONENT_FIRST, None: C4ENV_COIN_FLIP}
ILLEGAL_MOVES = ("error", "lose")


class Connect4(NativeEnv):
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
        if not isinstance(opponent, str) or opponent not in OPPONENTS:
            raise ValueError(f"opponent must be one of {sorted(OPPONENTS)}, got {opponent!r}")
        if agent_first is not None and not isinstance(agent_first, (bool, np.bool_)):
            raise TypeError(f"agent_first must be True, False or None (a coin flip per episode), got {agent_first!r}")
        if not isinstance(illegal_move, str) or illegal_move not in ILLEGAL_MOVES:
            raise ValueError(f"illegal_move must be one of {ILLEGAL_MOVES}, got {illegal_move!r}")
        self.opponent = opponent
        self.agent_first = None if agent_first is None else bool(agent_first)
        self.illegal_move = illegal_move
        self.observation_tree = _observation_tree()
        self.single_observation_space = self.observation_tree.flat_space
        self.single_action_space = gymnasium.spaces.Discrete(C4_COLS)
        super().__init__(spec_capsule(&CONNECT4_SPEC), num_envs, seed, buffers, render_mode)

    def _configure(self, size_t address):
        cdef CConnect4Env* env = <CConnect4Env*>address
        env.opponent = OPPONENTS[self.opponent]
        env.first_mover = FIRST_MOVERS[self.agent_first]

    def write_actions(self, actions, begin=0, end=-1):
        """NativeEnv's checks, then (illegal_move="error") that every column is open:
        step and the vector backends write actions through here."""
        NativeEnv.write_actions(self, actions, begin, end)
        if self.illegal_move == "error":
            end = self.num_agents if end < 0 else end
            row = _first_full_column(self.envs_address, self.env_size, self.actions, begin, end)
            if row >= 0:
                raise ValueError(
                    f"column {self.actions[row]} of env {self.env_index_base + row} is full (an illegal move); "
                    "choose among the columns whose action_mask entry is 1 "
                    "(observation_tree.unflatten(obs)['action_mask']), or pass illegal_move='lose'")

    def _render_ansi(self, size_t address):
        """The board (X moved first), the column numbers, and who plays which colour."""
        cdef CConnect4Env* env = <CConnect4Env*>address
        cdef char text[256]
        c4_game_render(&env.game, text, sizeof(text))
        agent, other = "XO"[env.agent], "XO"[1 - env.agent]
        return text.decode() + f"agent {agent}, {self.opponent} opponent {other}\n"


def _observation_tree():
    """The Dict space of one observation, laid out as connect4.h writes its rows."""
    tree = SpaceTree(gymnasium.spaces.Dict({
        "action_mask": gymnasium.spaces.Box(0.0, 1.0, (C4_COLS,), np.float32),
        "board": gymnasium.spaces.Box(0.0, 1.0, (2, C4_ROWS, C4_COLS), np.float32),
    }))
    layout = (tree.leaf("action_mask").start, tree.leaf("board").start, tree.size)
    if layout != (C4ENV_MASK_OFFSET, C4ENV_BOARD_OFFSET, C4ENV_OBS_SIZE):
        raise RuntimeError(f"connect4.h writes rows laid out as {(C4ENV_MASK_OFFSET, C4ENV_BOARD_OFFSET, C4ENV_OBS_SIZE)} "
                           f"(mask offset, board offset, size), the observation tree as {layout}")
    return tree


def _first_full_column(size_t envs_address, size_t env_size, cnp.ndarray actions, int64_t begin, int64_t end):
    """The first row in [begin, end) whose action is a full column, or -1. Reads the
    envs' own boards, so the answer holds whatever was written to the observations."""
    cdef const int32_t* columns = <const int32_t*>cnp.PyArray_DATA(actions)
    cdef char* envs = <char*>envs_address
    cdef int64_t row
    for row in range(begin, end):
        if not c4_column_open(&(<CConnect4Env*>(envs + row * env_size)).game, columns[row]):
            return row
    return -1
