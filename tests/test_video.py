"""rgb_array renders of the native CartPole and Snake (puffercore.render) and
`eval --video` (puffercore.video): MP4s decoded back, frozen normalization, error paths.
Tests that encode skip without imageio-ffmpeg."""

import os
import sys

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import puffercore.vector
from puffercore import ppo, render
from puffercore.__main__ import main
from puffercore.env import GymnasiumView
from puffercore.ocean import CartPole, Snake
from puffercore.video import VideoRecorder, rendering_env

TINY_RUN = ["--total-timesteps", "1024", "--vec.num-envs", "8", "--train.horizon", "32", "--train.minibatch-size", "64",
            "--policy.hidden_size", "16", "--quiet", "--tensorboard", "false"]


def needs_encoder():
    pytest.importorskip("imageio_ffmpeg", reason="the video extra (pip install 'puffercore[video]')")


def decode(path: str) -> tuple[int, np.ndarray]:
    """How many frames the MP4 at `path` holds, and its first."""
    import imageio.v2 as imageio

    with imageio.get_reader(path, format="FFMPEG") as reader:
        count, first = 0, None
        for frame in reader:  # one at a time: a thousand 600 x 400 frames would be 700 MB
            count, first = count + 1, frame if first is None else first
    return count, first


# ---- renders ---------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [CartPole, Snake], ids=["cartpole", "snake"])
def test_rgb_array_renders_are_uint8_pictures_that_follow_the_state(make):
    env = make(num_envs=2, render_mode="rgb_array")
    env.reset(seed=0)
    first = env.render()
    assert first.dtype == np.uint8 and first.ndim == 3 and first.shape[2] == 3
    for _ in range(3):
        env.step(np.ones(env.num_agents, np.int64))
    later = env.render()
    assert later.shape == first.shape and not np.array_equal(later, first)
    env.close()


def test_rgb_array_passes_gymnasiums_env_checker():
    env = CartPole(render_mode="rgb_array")
    check_env(GymnasiumView(env), skip_render_check=False)
    env.close()


def test_cartpole_picture_is_gymnasiums():
    pytest.importorskip("pygame", reason="gymnasium's CartPole draws with pygame")
    reference = gymnasium.make("CartPole-v1", render_mode="rgb_array")
    reference.reset(seed=0)
    for x, theta in ((0.0, 0.0), (1.3, 0.15), (-2.0, -0.2)):
        reference.unwrapped.state = np.array([x, 0.0, theta, 0.0])
        differs = np.abs(reference.render().astype(int) - render.cartpole(x, theta)).max(axis=2) > 60
        assert differs.mean() < 0.005  # pygame anti-aliases the edges; the shapes are the same
    reference.close()


def test_snake_picture_has_a_colour_per_kind_of_cell():
    cells = np.array([[0, 1], [3, 4]], np.uint8)  # empty, food / snake 0, snake 1
    heads = np.array([[False, False], [True, False]])
    picture = render.snake(cells, heads, scale=4)
    assert picture.shape == (16, 16, 3) and picture.dtype == np.uint8
    colour = {name: tuple(picture[4 * r + 1, 4 * c + 1]) for name, (r, c) in
              {"wall": (0, 0), "empty": (1, 1), "food": (1, 2), "head 0": (2, 1), "body 1": (2, 2)}.items()}
    assert len(set(colour.values())) == 5
    body_0 = tuple(render.snake(cells, np.zeros_like(heads), scale=4)[9, 5])
    assert body_0 != colour["head 0"] and body_0 != colour["body 1"]


def test_snake_ansi_and_rgb_array_show_the_same_grid():
    ansi, rgb = Snake(render_mode="ansi", seed=3), Snake(render_mode="rgb_array", seed=3)
    for env in (ansi, rgb):
        env.reset()
        env.step(np.zeros(env.num_agents, np.int64))
    # The text's cells back to codes: '.' empty, '*' food, snake k's letter (upper case: its head).
    inside = [row[1:-1] for row in ansi.render().splitlines()[1:-1]]
    cells = np.array([[{".": 0, "*": 1}.get(char, 3 + ord(char.lower()) - ord("a")) for char in row]
                      for row in inside], np.uint8)
    heads = np.array([[char.isupper() for char in row] for row in inside])
    assert heads.sum() == 4 and (cells == 1).sum() == 4
    np.testing.assert_array_equal(rgb.render(), render.snake(cells, heads))


# ---- eval --video ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    """A tiny cartpole run with normalized observations and rewards."""
    run_dir = str(tmp_path_factory.mktemp("cartpole"))
    main(["train", "cartpole", *TINY_RUN, "--train.norm-obs", "--train.norm-reward", "--run-dir", run_dir])
    return run_dir


def test_eval_video_writes_an_mp4_of_every_step(cartpole_run, tmp_path, capsys):
    needs_encoder()
    path = str(tmp_path / "cartpole.mp4")
    returns = ppo.evaluate(cartpole_run, episodes=2, seed=5, video=path)
    count, first = decode(path)
    # CartPole pays 1 a step, so the returns are the episode lengths: one frame per step.
    assert count == sum(returns)
    assert first.shape == (400, 600, 3) and first.dtype == np.uint8
    assert (first < 100).any() and (first > 200).any()  # a picture (black cart, white sky), not a blank
    # Recording changes nothing: the same returns with the checkpoint's frozen statistics.
    assert ppo.evaluate(cartpole_run, episodes=2, seed=5) == returns

    main(["eval", "--checkpoint", cartpole_run, "--episodes", "1", "--seed", "5", "--video", path])
    assert f"video: {path}" in capsys.readouterr().out
    assert decode(path)[0] == returns[0]


def test_eval_video_on_the_threads_backend_and_of_a_gymnasium_env(tmp_path):
    needs_encoder()
    pytest.importorskip("pygame", reason="gymnasium's CartPole draws with pygame")
    for env, backend in (("snake", "threads"), ("CartPole-v1", "serial")):
        run_dir = str(tmp_path / env)
        main(["train", env, *TINY_RUN, "--vec.backend", backend, "--run-dir", run_dir])
        path = str(tmp_path / f"{env}.mp4")
        ppo.evaluate(run_dir, episodes=1, max_steps=30, video=path)
        count, first = decode(path)
        assert 1 <= count <= 30
        assert first.shape == (((16 + 2) * 16, (16 + 2) * 16, 3) if env == "snake" else (400, 600, 3))


class NoRender(gymnasium.Env):
    """Accepts render_mode, as gymnasium asks, but draws nothing."""

    metadata = {"render_modes": ["rgb_array"]}
    observation_space = gymnasium.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 0.0, False, False, {}

    def render(self):
        return None


def test_envs_that_cannot_be_recorded_are_refused_by_name():
    with pytest.raises(ValueError, match=r"squared has no rgb_array render \(its render modes: \['ansi'\]\)"):
        rendering_env("squared")
    with pytest.raises(ValueError, match="takes no render_mode argument"):
        rendering_env(lambda: NoRender())
    vec = puffercore.vector.make(CartPole, 1)
    with pytest.raises(ValueError, match="a vector env made by the caller can.t be rendered or recorded"):
        rendering_env(vec)
    vec.close()


def test_a_render_that_is_no_rgb_frame_is_refused(tmp_path):
    needs_encoder()
    vec = puffercore.vector.make(rendering_env(NoRender).creator, 1)
    vec.reset()
    recorder = VideoRecorder(str(tmp_path / "none.mp4"))
    with pytest.raises(ValueError, match=r"no rgb_array render: render\(\) gave None"):
        recorder.capture(vec)
    recorder.close()
    vec.close()
    assert not os.path.exists(tmp_path / "none.mp4")  # nothing half-written


def test_a_missing_encoder_names_the_extra(cartpole_run, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # import imageio_ffmpeg now raises ImportError
    with pytest.raises(ImportError, match=r'pip install "puffercore\[video\]"'):
        VideoRecorder(str(tmp_path / "out.mp4"))
    with pytest.raises(SystemExit):
        main(["eval", "--checkpoint", cartpole_run, "--video", str(tmp_path / "out.mp4")])
    assert "puffercore[video]" in capsys.readouterr().err
    monkeypatch.undo()
    pytest.importorskip("imageio_ffmpeg")  # the folder is checked once an encoder is there
    with pytest.raises(FileNotFoundError, match="does not exist"):
        VideoRecorder(str(tmp_path / "no" / "such" / "folder.mp4"))
