"""Episodes as video: frames of an env's "rgb_array" render written to an MP4 by imageio
with imageio-ffmpeg (the `video` extra; imageio-ffmpeg's wheel carries its ffmpeg
binary, so recording downloads nothing).

    recorder = VideoRecorder("out.mp4")        # ImportError naming the extra without an encoder
    vec = make_vector(rendering_env("cartpole"), num_envs=1)   # envs made with render_mode="rgb_array"
    recorder.capture(vec)                      # vec.render() (its env 0) is the next frame
    recorder.close()

`puffercore.ppo.evaluate(..., video=PATH)`, `puffercore eval --video PATH` and training's
`--capture-video` (`puffercore.ppo.evaluation`) use it; `gif_preview(path)` is the small
animated GIF of an MP4 that TensorBoard's image tab plays.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import inspect
import math
import os
from typing import Any

import gymnasium
import numpy as np
from gymnasium.envs.registration import load_env_creator

from puffercore import env_sources

INSTALL = 'pip install "puffercore[video]"'
DEFAULT_FPS = 30  # for envs whose metadata names no render_fps
FULL_DISK = 1 << 20  # bytes free below which a write that failed is put down to a full disk


def rendering_env(env: Any, mode: str = "rgb_array") -> env_sources.EnvSource:
    """The EnvSource of `env` (anything `env_sources.resolve` takes) that makes its envs with
    render_mode=`mode` ("rgb_array" for video, "ansi" for text); ValueError when they
    can't render so."""
    source = env_sources.resolve(env)
    if source.creator is None:
        raise ValueError(f"{source.name}: a vector env made by the caller can't be rendered or recorded; give its env "
                         f"class or creator")
    modes = _declared_modes(source.creator)
    if modes is not None and mode not in modes:
        raise ValueError(f"{source.name} has no {mode} render (its render modes: {modes})")
    if not _takes_render_mode(source.creator):
        raise ValueError(f"{source.name} takes no render_mode argument; to render it, accept render_mode "
                         f"(gymnasium's convention) and pass it on to the env")
    return dataclasses.replace(source, creator=functools.partial(source.creator, render_mode=mode))


def render_modes(env: Any) -> list[str] | None:
    """The render modes `env`'s class declares in its metadata (a gymnasium id's are its
    registered class's); None when there is no class to read them from."""
    return _declared_modes(env_sources.resolve(env).creator)


def _declared_modes(creator) -> list[str] | None:
    while isinstance(creator, functools.partial):
        if creator.func is gymnasium.make:  # partial(gymnasium.make, id): the registered entry point
            entry_point = gymnasium.spec(creator.args[0]).entry_point
            creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
        else:
            creator = creator.func
    modes = getattr(creator, "metadata", {}).get("render_modes")
    return None if modes is None else list(modes)


def _takes_render_mode(creator) -> bool:
    try:
        parameters = inspect.signature(creator).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a compiled callable): the call will tell
        return True
    return any(parameter.name == "render_mode" or parameter.kind is parameter.VAR_KEYWORD for parameter in parameters)


class VideoError(ValueError):
    """A video that could not be written; the message names the file and the cause."""


class VideoRecorder:
    """Frames of a vector env's render into an MP4 at `path`, opened at the first frame
    and played at the env's `render_fps` (DEFAULT_FPS when its metadata has none). A
    write that fails (a full disk, the encoder gone) raises VideoError naming the file
    and the cause; the recorder is then closed and the unplayable file removed."""

    def __init__(self, path: str):
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"{path}: the folder {folder} does not exist")
        self.path = path
        self.frames = 0
        self._imageio = require_encoder()
        self._writer = None

    def capture(self, vec) -> None:
        """Append `vec.render()`, a uint8 [height, width, 3] frame, to the video."""
        frame = rgb_frame(vec)
        try:
            if self._writer is None:
                # H.264 in yuv420p (what every player plays) needs even sides; macro_block_size=2
                # pads odd ones by a pixel instead of imageio's default resize to multiples of 16.
                self._writer = self._imageio.get_writer(self.path, format="FFMPEG", codec="libx264",
                                                        macro_block_size=2,
                                                        fps=vec.metadata.get("render_fps") or DEFAULT_FPS)
            self._writer.append_data(frame)
        except (OSError, RuntimeError) as error:
            self._failed(error)
        self.frames += 1

    def close(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except (OSError, RuntimeError) as error:
                self._failed(error)
            self._writer = None

    def _failed(self, error: Exception):
        writer, self._writer = self._writer, None
        with contextlib.suppress(Exception):  # the encoder is gone already; its own error is the one to tell
            if writer is not None:
                writer.close()
        with contextlib.suppress(OSError):
            os.remove(self.path)
        raise VideoError(f"could not write the video {self.path}: {_cause(error, self.path)} "
                         f"(the unfinished file is removed)") from None


def _cause(error: Exception, path: str) -> str:
    """Why writing `path` failed: the system's reason; for a broken pipe (the encoder,
    ffmpeg, stopped: it prints its own reason to stderr), a full disk when it is one."""
    if isinstance(error, OSError) and error.strerror and error.errno != errno.EPIPE:
        return error.strerror  # e.g. "No space left on device"
    folder = os.path.dirname(os.path.abspath(path))
    with contextlib.suppress(OSError):
        stats = os.statvfs(folder)
        if stats.f_bavail * stats.f_frsize < FULL_DISK:
            return f"No space left on device ({folder} has {stats.f_bavail * stats.f_frsize} bytes free)"
    detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return f"the encoder (ffmpeg) stopped: {detail}"


def require_encoder():
    """imageio's v2 API, after checking that imageio-ffmpeg is there to encode MP4s;
    ImportError naming the extra otherwise."""
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg  # noqa: F401  (imageio's FFMPEG plugin runs the ffmpeg this ships)
    except ImportError as error:
        raise ImportError(f"recording video needs imageio and imageio-ffmpeg ({error.name} is missing): "
                          f"{INSTALL}") from None
    return imageio


def rgb_frame(vec) -> np.ndarray:
    """`vec.render()` (its env 0), checked to be a uint8 [height, width, 3] frame;
    ValueError naming what the env gave instead."""
    frame = vec.render()
    if not (isinstance(frame, np.ndarray) and frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3):
        got = f"{frame.dtype} {list(frame.shape)}" if isinstance(frame, np.ndarray) else repr(frame)[:40]
        raise ValueError(f"the env has no rgb_array render: render() gave {got}, not a uint8 [height, width, 3] "
                         f"frame (its render modes: {vec.metadata.get('render_modes')})")
    return frame


def gif_preview(path: str, max_width: int = 320, max_fps: float = 10.0) -> tuple[bytes, int, int]:
    """The MP4 at `path` as a small animated GIF, for an event file that holds every video
    a run logs: its sides cut by the smallest whole step that makes it at most
    `max_width` wide, and every k-th frame kept, the smallest k that plays it at most at
    `max_fps` (encoding the GIF takes most of the time: a 500-frame CartPole episode took
    5 s at 50 fps, 1 s at 10), at the same speed. Returns (GIF bytes, height, width)."""
    imageio = require_encoder()
    with imageio.get_reader(path, format="FFMPEG") as reader:
        fps = reader.get_meta_data().get("fps") or DEFAULT_FPS
        every = math.ceil(fps / max_fps)
        frames = [frame for index, frame in enumerate(reader) if index % every == 0]
    if not frames:
        raise ValueError(f"{path} holds no frames")
    step = -(-frames[0].shape[1] // max_width)
    frames = np.stack(frames)[:, ::step, ::step]
    import imageio.v3

    data = imageio.v3.imwrite("<bytes>", frames, extension=".gif", duration=1000 * every / fps, loop=0)
    return data, frames.shape[1], frames.shape[2]
