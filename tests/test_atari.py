"""AtariEnv against gymnasium's own Atari wrappers, frame by frame, and end to end in PPO.

gymnasium's AtariPreprocessing resizes with OpenCV (INTER_AREA), so the comparisons need
cv2 (opencv-python-headless, in the test extra); AtariEnv's resize (a C kernel) gives the
same bytes, which the comparison checks on every frame."""

import numpy as np
import pytest

ale_py = pytest.importorskip("ale_py")
import gymnasium  # noqa: E402
import torch  # noqa: E402

from puffercore.atari import AreaResize, AtariEnv, ale_id  # noqa: E402

gymnasium.register_envs(ale_py)


def reference(game: str, terminal_on_life_loss: bool):
    pytest.importorskip("cv2")
    env = gymnasium.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=0.0)
    env = gymnasium.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84,
                                                terminal_on_life_loss=terminal_on_life_loss, grayscale_obs=True)
    return gymnasium.wrappers.FrameStackObservation(env, 4)


def run_both(game: str, steps: int, seed: int, episodic_life: bool):
    """Step AtariEnv and the reference on one seed and one action sequence, checking
    that observations, raw rewards and flags are identical; both reset (unseeded: the
    next random stream) when a game ends. With episodic_life it stops at the first
    terminal (gymnasium then restarts the game, AtariEnv continues it). Returns the
    steps taken and the episodes ended."""
    ours = AtariEnv(game, episodic_life=episodic_life, fire_reset=False, clip_rewards=False)
    theirs = reference(game, terminal_on_life_loss=episodic_life)
    rng = np.random.default_rng(seed)
    obs, _ = ours.reset(seed=seed)
    ref, _ = theirs.reset(seed=seed)
    np.testing.assert_array_equal(obs, ref)
    ended = 0
    for step in range(steps):
        action = int(rng.integers(ours.action_space.n))
        obs, reward, terminal, truncation, _ = ours.step(action)
        ref, ref_reward, ref_terminal, ref_truncation, _ = theirs.step(action)
        np.testing.assert_array_equal(obs, ref, err_msg=f"step {step}")
        assert (reward, terminal, truncation) == (ref_reward, ref_terminal, ref_truncation), f"step {step}"
        if terminal or truncation:
            ended += 1
            if episodic_life:
                return step + 1, ended
            obs, _ = ours.reset()
            ref, _ = theirs.reset()
            np.testing.assert_array_equal(obs, ref, err_msg=f"reset after step {step}")
    return steps, ended


def test_breakout_matches_gymnasium_wrappers_across_games():
    # Random play without FIRE ends a Breakout game in ~200 steps: two games or more.
    assert run_both("Breakout", steps=450, seed=0, episodic_life=False) == (450, 2)


def test_pong_matches_gymnasium_wrappers():
    assert run_both("Pong", steps=300, seed=3, episodic_life=False)[0] == 300


def test_life_loss_is_terminal_where_gymnasium_says_so():
    steps, ended = run_both("Breakout", steps=300, seed=1, episodic_life=True)
    assert ended == 1 and steps < 100  # random play loses the first life early


def test_game_goes_on_after_a_life_and_logs_the_raw_score():
    env = AtariEnv("Breakout", clip_rewards=True)
    env.reset(seed=2)
    rng = np.random.default_rng(2)
    lives_lost, clipped, infos = 0, [], []
    while True:
        obs, reward, terminal, truncation, info = env.step(int(rng.integers(4)))
        assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
        clipped.append(reward)
        if terminal and info.get("episode_continues"):
            lives_lost += 1
            lives = env.ale.lives()
            env.reset()
            assert env.ale.lives() == lives, "reset after a lost life must continue the game"
        elif terminal or truncation:
            infos.append(info)
            break
    assert lives_lost == 4  # Breakout has 5 lives
    assert set(clipped) <= {0.0, 1.0}
    assert infos[0]["episode_return"] >= sum(clipped)  # raw bricks score 1-7 points each
    env.reset()
    assert env.ale.lives() == 5, "reset after the game ended must start a new one"


def test_stack_is_the_last_frames_in_order():
    env = AtariEnv("Pong", fire_reset=False)
    first, _ = env.reset(seed=0)
    assert all((first[i] == first[0]).all() for i in range(4))  # filled with the first frame
    frames = []
    for _ in range(6):
        obs, *_ = env.step(2)
        frames.append(obs[-1].copy())
        np.testing.assert_array_equal(obs[max(0, 4 - len(frames)):], np.stack(frames[-4:]))


def test_area_resize_of_constant_and_checkerboard():
    resize, out = AreaResize((210, 160), (84, 84)), np.empty((84, 84), np.uint8)
    resize(np.full((210, 160), 200, np.uint8), out)
    assert (out == 200).all()
    board = (np.indices((210, 160)).sum(0) % 2 * 255).astype(np.uint8)
    resize(board, out)
    assert np.abs(out.astype(int) - 128).max() <= 26  # area averaging blurs to the mean


@pytest.mark.parametrize("shape_in, shape_out", [((210, 160), (84, 84)), ((250, 160), (84, 84)), ((97, 61), (13, 29))])
def test_area_resize_equals_opencv_inter_area(shape_in, shape_out):
    cv2 = pytest.importorskip("cv2")
    resize, out = AreaResize(shape_in, shape_out), np.empty(shape_out, np.uint8)
    for seed in range(5):
        image = np.random.default_rng(seed).integers(0, 256, shape_in, dtype=np.uint8)
        resize(image, out)
        np.testing.assert_array_equal(out, cv2.resize(image, shape_out[::-1], interpolation=cv2.INTER_AREA))


def test_area_resize_refuses_an_image_of_another_shape():
    resize, out = AreaResize((210, 160), (84, 84)), np.empty((84, 84), np.uint8)
    with pytest.raises(ValueError, match="image must have shape"):
        resize(np.zeros((100, 160), np.uint8), out)
    with pytest.raises(ValueError, match="taps do not fit"):
        resize(np.zeros((210, 160), np.uint8), np.empty((80, 84), np.uint8))
    from puffercore import _image

    taps, weights = np.full((84, 3), 500, np.intp), np.ones((84, 3), np.float32)
    with pytest.raises(ValueError, match="row taps"):
        _image.area_resize(np.zeros((210, 160), np.uint8), np.empty((84, 84), np.uint8),
                           taps, weights, resize.cols, resize.col_weights)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="game"):
        ale_id("NoSuchGame")
    with pytest.raises(ValueError, match="frame_skip"):
        AtariEnv("Pong", frame_skip=0)
    with pytest.raises(ValueError, match="action"):
        AtariEnv("Pong").step(99)


def test_adapter_logs_one_episode_per_game_in_raw_score():
    from puffercore.emulation import GymnasiumEnv
    from puffercore.env import derive_seed

    env = GymnasiumEnv(lambda: AtariEnv("Breakout"))
    unclipped = AtariEnv("Breakout", clip_rewards=False)  # the same game, for its raw rewards
    env.reset(seed=6)
    unclipped.reset(seed=derive_seed(6, 0))  # the seed the adapter gives its env
    rng = np.random.default_rng(6)
    terminals, steps, raw_score = 0, 0, 0.0
    while True:
        action = int(rng.integers(4))
        _, _, ends, _, info = env.step(np.array([action], np.int32))
        _, reward, _, _, _ = unclipped.step(action)
        terminals, steps, raw_score = terminals + int(ends[0]), steps + 1, raw_score + reward
        if info:
            break
        if ends[0]:
            unclipped.reset()
    assert terminals == 5 and info["episodes"] == 1.0  # five lives, one logged game
    assert info["episode_return"] == raw_score > 0 and info["episode_length"] == steps


def test_nature_cnn_policy_keeps_uint8_and_mlp_path():
    from gymnasium import spaces

    from puffercore.ppo.default_policy import DefaultPolicy

    image = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    policy = DefaultPolicy(image, spaces.Discrete(4), shared_trunk=True)
    assert isinstance(policy.encoder[0], torch.nn.Conv2d) and policy.critic_encoder is None
    out = policy(torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8))
    assert out.params.shape == (3, 4) and out.value.shape == (3,)
    assert policy.encoder[-2].out_features == 512
    flat = spaces.Box(-1, 1, (8,), np.float32)
    assert isinstance(DefaultPolicy(flat, spaces.Discrete(2)).encoder[0], torch.nn.Linear)  # the MLP, as before
    assert isinstance(DefaultPolicy(image, spaces.Discrete(4), encoder="mlp").encoder[0], torch.nn.Linear)
    with pytest.raises(ValueError, match="encoder"):
        DefaultPolicy(flat, spaces.Discrete(2), encoder="cnn")


def test_train_and_evaluate_atari_end_to_end(tmp_path):
    from puffercore import env_sources, ppo
    from puffercore.ppo import PPOConfig

    assert env_sources.resolve("ALE/Breakout-v5").creator.func is AtariEnv
    config = PPOConfig.for_env("atari:Breakout", total_timesteps=2 * 2 * 32, num_envs=2, num_workers=1, horizon=32,
                               minibatch_size=32, update_epochs=1, quiet=True, tensorboard=False, run_dir=str(tmp_path))
    assert (config.backend, config.clip_coef, config.shared_trunk) == ("ale", 0.1, True)
    trainer = ppo.train(config, "atari:Breakout")
    assert trainer.global_step == 128 and isinstance(trainer.policy.encoder[0], torch.nn.Conv2d)
    assert trainer.rollout["obs"].dtype == torch.uint8  # frames stay bytes in the rollout
    assert len(ppo.evaluate(str(tmp_path), episodes=1, max_steps=200)) == 1


def ale_vector(num_envs=1, seed=3, **options):
    import functools

    import puffercore.vector

    return puffercore.vector.make(functools.partial(AtariEnv, "Breakout", **options), num_envs, backend="ale",
                                  num_workers=1, seed=seed)


def test_ale_backend_frames_rewards_and_flags_are_atari_envs():
    """Without the no-op start and FIRE (random), the same actions give AtariEnv's
    frames, raw rewards and flags through a whole game; the stack differs only at the
    start (ale-py fills it with black frames, AtariEnv with the first frame)."""
    options = dict(noop_max=0, fire_reset=False, clip_rewards=False, episodic_life=False)
    ours = AtariEnv("Breakout", **options)
    with ale_vector(**options) as vec:
        obs, _ = vec.reset()
        ref, _ = ours.reset(seed=3)
        np.testing.assert_array_equal(obs[0, -1], ref[-1])
        assert not obs[0, :-1].any()
        rng = np.random.default_rng(0)
        for step in range(2000):
            action = int(rng.integers(4))
            obs, reward, terminal, truncation, info = vec.step(np.array([action], np.int32))
            ref, ref_reward, ref_terminal, ref_truncation, ref_info = ours.step(action)
            assert (reward[0], terminal[0], truncation[0]) == (ref_reward, ref_terminal, ref_truncation), step
            if terminal[0]:
                np.testing.assert_array_equal(vec.final_observations[0, -1], ref[-1])
                assert info["episode_return"] == ref_info["episode_return"] and info["episodes"] == 1
                assert info["episode_length"] == step + 1
                break
            np.testing.assert_array_equal(obs[0, -1], ref[-1], err_msg=f"step {step}")
            if step >= 3:
                np.testing.assert_array_equal(obs[0], ref, err_msg=f"step {step}")
        else:
            pytest.fail("the game never ended")


def test_ale_backend_batches_lives_scores_and_seeds():
    """The batch contract (views of the buffers, all envs at once); a lost life ends the
    learner's episode while the game goes on; infos carry whole games in raw score;
    rewards are clipped; a seed fixes the run."""
    runs = []
    for _ in range(2):
        with ale_vector(num_envs=4, seed=7) as vec:
            vec.async_reset()
            rng = np.random.default_rng(1)
            terminals = games = 0
            frames = []
            for step in range(700):
                batch = vec.recv()
                assert batch.rows == slice(0, 4) and np.shares_memory(batch.observations, vec.observations)
                np.testing.assert_array_equal(batch.env_ids, np.arange(4))
                assert set(np.unique(batch.rewards)) <= {0.0, 1.0} and batch.masks.all()
                terminals += int(batch.terminals.sum())
                if batch.info:
                    games += batch.info["episodes"]
                    assert batch.info["episode_return"] >= 0 and batch.info["episode_length"] > 20
                frames.append(batch.observations[:, -1].copy())
                vec.send(rng.integers(0, 4, 4).astype(np.int32))
            runs.append(np.stack(frames))
        assert games >= 4 and terminals >= 4 * games  # Breakout: five lives a game
    np.testing.assert_array_equal(runs[0], runs[1])


@pytest.mark.parametrize("creator, kwargs, error, match", [
    (lambda: None, {}, TypeError, "env_creator must be puffercore.atari.AtariEnv"),
    (AtariEnv, {"render_mode": "rgb_array"}, TypeError, "does not take render_mode"),
    (AtariEnv, {"batch_size": 2}, ValueError,
     "batch_size must equal num_envs=4 on the ale backend .* got 2; backend .processes. steps staggered"),
    (AtariEnv, {"game": "NoSuchGame"}, ValueError, "game='NoSuchGame'"),
])
def test_ale_backend_refuses_what_it_cannot_run(creator, kwargs, error, match):
    import puffercore.vector

    with pytest.raises(error, match=match):
        puffercore.vector.make(creator, 4, backend="ale", **kwargs)


def test_train_atari_on_the_processes_backend(tmp_path):
    """The preset's backend is ale (the end-to-end test above); AtariEnv in worker
    processes, CleanRL's preprocessing exactly, trains too."""
    from puffercore import ppo
    from puffercore.ppo import PPOConfig

    config = PPOConfig.for_env("atari:Breakout", backend="processes", total_timesteps=2 * 2 * 32, num_envs=2, num_workers=1,
                               horizon=32, minibatch_size=32, update_epochs=1, quiet=True, tensorboard=False,
                               run_dir=str(tmp_path))
    trainer = ppo.train(config, "atari:Breakout")
    assert trainer.global_step == 128 and np.isfinite(trainer.losses["loss/loss"])
