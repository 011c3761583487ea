# cython: language_level=3, boundscheck=False, wraparound=False
"""Azul RL-env binding; the env is in azul.h, the rules in puffercore/games/azul.h."""

import gymnasium
import numpy as np

from libc.stdint cimport int32_t
from puffercore.env cimport PcEnvSpec, spec_capsule

from puffercore.games import Azul as AzulGame
from puffercore.checks import check_choice, check_int
from puffercore.ocean.native import ILLEGAL_MOVES, NativeEnv
from puffercore.spaces import masked_observation_tree

cdef extern from "azul.h":
    int AZUL_NUM_ACTIONS, AZUL_OBS_SIZE, AZULENV_OBS_SIZE, AZULENV_MASK_OFFSET, AZULENV_BOARD_OFFSET
    int AZULENV_GREEDY, AZULENV_RANDOM, AZULENV_SCORE_MARGIN, AZULENV_WIN_LOSS, AZULENV_RANDOM_SEAT
    int PC_GAME_MAX_PLAYERS
    ctypedef struct CAzul "Azul":
        pass
    ctypedef struct CAzulEnv "AzulEnv":
        int32_t num_players, opponent, seat, reward, agent
        CAzul game
    int azulenv_action_is_legal(const void* env, const void* actions)
    int azul_render(const CAzul* game, char* out, int32_t capacity)
    const PcEnvSpec AZUL_ENV_SPEC

OPPONENTS = {"greedy": AZULENV_GREEDY, "random": AZULENV_RANDOM}
REWARDS = {"score_margin": AZULENV_SCORE_MARGIN, "win_loss": AZULENV_WIN_LOSS}


class AzulEnv(NativeEnv):
    """Azul (2-4 players) for one agent seat against built-in opponents, which play their
    turns inside the same step.

    num_players: 2, 3 or 4.
    opponent: "greedy" (puffercore's greedy bot, the same for every opponent seat:
        immediate points, floor penalties, line completion; deterministic) or "random"
        (a uniformly random legal move, drawn from the env's seeded RNG).
    agent_seat: the agent's seat, 0 (moves first in the first round) to num_players - 1,
        or None (a seat drawn per episode from the env's RNG, so the agent learns them
        all). Opponents seated before the agent have moved in the first observation.
    reward: "score_margin" (default, the AlphaZero seed's outcome): at the game's end
        (agent's score - mean score of all seats) / 100, so +-margin/200 with 2 players;
        "win_loss": +1 if the agent alone wins (highest score, ties to more complete wall
        rows), 0 if it shares the win, -1 otherwise. 0 on every other step.
    illegal_move: "error" (default): a step with an illegal move raises ValueError naming
        the env, and none of this object's envs moves (nor any env of a threads vector
        over it). "lose": the move ends the episode with reward -1, a loss.

    Discrete(300) actions: the game's action index, (source * 5 + colour) * 6 +
    destination (see puffercore.azul). Games end terminal, never truncated. Observation:
    580 float32, the flat row of `observation_tree` = SpaceTree(Dict(action_mask=[300],
    board=[280])): the legal-move mask (all zeros in the final observation of a finished
    game), then the game's observation from the agent's seat (puffercore.azul; the
    agent's board first, then the others in turn order). `game_state(i)` returns env i's
    position as a puffercore.games.Azul state. Episode info: episode_return,
    episode_length (agent moves), score (agent's final score), score_margin (agent's
    score - the best opponent's), win_rate, loss_rate, draw_rate (shared wins),
    illegal_move_rate.
    """

    def __init__(self, num_envs=1, seed=0, buffers=None, render_mode=None, *, num_players=2,
                 opponent="greedy", agent_seat=None, reward="score_margin", illegal_move="error"):
        self.num_players = check_int(num_players, "num_players", 2, PC_GAME_MAX_PLAYERS)
        self.opponent = check_choice(opponent, "opponent", OPPONENTS)
        self.agent_seat = None if agent_seat is None else check_int(agent_seat, "agent_seat", 0, self.num_players - 1)
        self.reward = check_choice(reward, "reward", REWARDS)
        self.illegal_move = check_choice(illegal_move, "illegal_move", ILLEGAL_MOVES)
        # scores above 100 give board entries above 1
        board = gymnasium.spaces.Box(0.0, np.inf, (AZUL_OBS_SIZE,), np.float32)
        self.observation_tree = masked_observation_tree(
            AZUL_NUM_ACTIONS, board, layout=(AZULENV_MASK_OFFSET, AZULENV_BOARD_OFFSET, AZULENV_OBS_SIZE),
            header="azul.h")
        super().__init__(spec_capsule(&AZUL_ENV_SPEC), num_envs, seed, buffers, render_mode)
        if illegal_move == "error":
            self.reject_illegal_actions(<size_t>&azulenv_action_is_legal)

    def _configure(self, size_t address):
        cdef CAzulEnv* env = <CAzulEnv*>address
        env.num_players = self.num_players
        env.opponent = OPPONENTS[self.opponent]
        env.seat = AZULENV_RANDOM_SEAT if self.agent_seat is None else self.agent_seat
        env.reward = REWARDS[self.reward]

    def game_state(self, index=0):
        """Sub-env `index`'s game as a puffercore.games.Azul state (a copy), between
        steps: the agent's turn, or a finished game's next one."""
        cdef CAzulEnv* env = <CAzulEnv*><size_t>self.env_address(index)
        return AzulGame().state_from_bytes((<char*>&env.game)[:sizeof(CAzul)])

    def agent_seats(self):
        """Each sub-env's agent seat in its current episode, int32 [num_envs]."""
        return np.array([(<CAzulEnv*><size_t>self.env_address(i)).agent for i in range(self.num_envs)], np.int32)

    def _describe_illegal_action(self, row, env_index):
        source, color, destination = AzulGame.describe(int(self.actions[row]))
        return (f"action {self.actions[row]} (source {source}, colour {color}, destination {destination}) "
                f"of env {env_index} breaks the rules in this position")

    def _render_ansi(self, size_t address):
        """The game's board text, then who plays which seat."""
        cdef CAzulEnv* env = <CAzulEnv*>address
        cdef char text[4096]  # a 4-player board takes about 1200 characters
        azul_render(&env.game, text, sizeof(text))
        return text.decode() + f"agent: player {env.agent}; {self.opponent} opponents\n"
