"""The processes backend under abuse: views used after close, the caller SIGKILLed,
several envs failing at once, hung envs, creators spawn cannot pickle by name, workers
that die while starting. Each failure is a clear Python exception, never a crash,
hang or leak."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import puffercore.vector
from puffercore.testing import CountingEnv


def test_views_stay_readable_after_close_and_garbage_collection(run_python):
    # In a subprocess: reading freed memory segfaults, which must fail this test, not kill pytest.
    result = run_python("""
        import gc
        import numpy as np
        import puffercore.vector
        from puffercore.testing import CountingEnv

        vec = puffercore.vector.make(CountingEnv, 4, backend="processes", num_workers=2)
        reset_obs, _ = vec.reset(seed=0)
        obs, rewards, *_ = vec.step(np.ones(4, dtype=np.int64))
        expected = obs.copy()
        vec.close()
        assert (obs == expected).all() and rewards.sum() == 4
        del vec
        gc.collect()
        assert (obs == expected).all() and reset_obs.shape == (4, 3)
        obs[:] = 0  # still ours to write
        print("ok")
    """)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_sigkill_of_the_process_group_leaves_no_shared_memory():
    before = set(os.listdir("/dev/shm"))
    child = subprocess.Popen([sys.executable, "-P", "-c", textwrap.dedent("""
        import time
        import puffercore.vector
        from puffercore.testing import CountingEnv

        vec = puffercore.vector.make(CountingEnv, 4, backend="processes", num_workers=2)
        vec.reset(seed=0)
        print("ready", flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert child.stdout.readline().strip() == "ready"
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    # The workers, orphaned by the kill, go with the same signal; whatever they named in
    # /dev/shm would be gone once they are (a generous bound: the machine may be loaded).
    deadline = time.monotonic() + 30
    while set(os.listdir("/dev/shm")) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not set(os.listdir("/dev/shm")) - before


class FailsOnce(CountingEnv):
    """Raises on its `fail_at`-th step only; episodes of two steps."""

    def __init__(self, fail_at=3, buffers=None):
        super().__init__(episode_length=2, buffers=buffers)
        self.fail_at = fail_at

    def step(self, actions):
        if self._total_steps + 1 == self.fail_at:
            self._total_steps += 1
            raise ValueError("failed on purpose, once")
        return super().step(actions)


def test_envs_raising_in_two_workers_at_once_leave_no_stale_message():
    vec = puffercore.vector.make(FailsOnce, 2, backend="processes", num_workers=2, start_method="fork")
    actions = np.ones(2, dtype=np.int64)
    try:
        vec.reset(seed=0)
        vec.step(actions)
        assert vec.step(actions)[4]["episodes"] == 2
        both = r"(?s)env \d raised in worker \d:.*once.*env \d raised in worker \d too"
        with pytest.raises(RuntimeError, match=both):
            vec.step(actions)
        for call in (lambda: vec.step(actions), lambda: vec.send(actions), vec.recv):
            with pytest.raises(RuntimeError, match=r"after env \d raised in worker \d: call reset\(\)"):
                call()
        assert vec.reset()[1] == {}
        assert vec.step(actions)[4] == {}  # the infos of this step, not a late or stale message
        info = vec.step(actions)[4]
        assert info["episodes"] == 2 and info["episode_length"] == 2
    finally:
        vec.close()


def test_infos_and_errors_larger_than_a_pipe_buffer_reach_the_caller(run_python):
    # A worker used to write its message before marking the command done: one larger than
    # the pipe's buffer (~200 KB) waited for a caller that was waiting for the worker.
    result = run_python("""
        import numpy as np
        import puffercore.vector
        from puffercore.testing import CountingEnv

        KEYS = 20_000  # ~400 KB pickled

        class LargeInfo(CountingEnv):
            def step(self, actions):
                *results, _ = super().step(actions)
                return (*results, {"episodes": 1.0, **{f"key_{i}": float(i) for i in range(KEYS)}})

        class LargeError(CountingEnv):
            def step(self, actions):
                raise ValueError("x" * 1_000_000)

        actions = np.ones(2, dtype=np.int64)
        vec = puffercore.vector.make(LargeInfo, 2, backend="processes", num_workers=2, start_method="fork",
                                     timeout=60)
        vec.reset(seed=0)
        for _ in range(3):
            info = vec.step(actions)[4]
            assert len(info) == KEYS + 1 and info["episodes"] == 2 and info[f"key_{KEYS - 1}"] == KEYS - 1
        vec.close()

        vec = puffercore.vector.make(LargeError, 2, backend="processes", num_workers=2, start_method="fork",
                                     timeout=60)
        vec.reset(seed=0)
        try:
            vec.step(actions)
        except RuntimeError as error:
            assert "x" * 1_000_000 in str(error) and str(error).count("raised in worker") == 2, str(error)[:300]
        else:
            raise AssertionError("the envs' errors were lost")
        assert vec.reset()[0].shape == (2, 3)  # no stale message left on a pipe
        vec.close()
        print("ok")
    """)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


class HangsInEnv1(CountingEnv):
    """Env 1 of the vector never returns from its second step."""

    def step(self, actions):
        if self.env_index_base == 1 and self._total_steps == 1:
            time.sleep(3600)
        return super().step(actions)


def test_timeout_names_the_hung_worker_and_close_kills_it():
    vec = puffercore.vector.make(HangsInEnv1, 2, backend="processes", num_workers=2, timeout=2.0, start_method="fork")
    processes = list(vec._processes)
    actions = np.zeros(2, dtype=np.int64)
    try:
        vec.reset(seed=0)
        vec.step(actions)
        start = time.monotonic()
        hung = r"step of envs 1-1 in worker 1 \(pid \d+\): not finished within timeout=2.0 s"
        with pytest.raises(TimeoutError, match=hung):
            vec.step(actions)
        assert 2.0 <= time.monotonic() - start < 30  # the timeout waited out; the upper bound only catches a hang
        with pytest.raises(RuntimeError, match=r"step\(\) after worker 1 timed out: call reset\(\)"):
            vec.step(actions)
        with pytest.raises(TimeoutError, match="worker 1"):  # still hung: a reset waits for it again
            vec.reset()
    finally:
        start = time.monotonic()
        vec.close()
        assert time.monotonic() - start < 30  # a hang check: close() kills the hung worker rather than waiting
    assert not any(process.is_alive() for process in processes)


def test_timeout_argument_is_checked():
    for bad in (0, -1.0, "1", True, float("nan")):
        with pytest.raises(ValueError, match="timeout must be None or a positive number of seconds"):
            puffercore.vector.make(CountingEnv, 2, backend="processes", timeout=bad)
    with pytest.raises(ValueError, match="timeout is an option of the processes backend only"):
        puffercore.vector.make(CountingEnv, 2, backend="serial", timeout=1.0)


def test_lambdas_and_closures_reach_spawned_workers():
    import gymnasium

    vec = puffercore.vector.make(lambda: gymnasium.make("CartPole-v1"), num_envs=2, backend="processes")
    try:
        obs, _ = vec.reset(seed=0)
        assert obs.shape == (2, 4) and vec.step(np.zeros(2, dtype=np.int64))[0].shape == (2, 4)
    finally:
        vec.close()

    episode_length = 2  # reaches the workers only inside the closure

    def counting(buffers=None):
        return CountingEnv(episode_length=episode_length, buffers=buffers)

    vec = puffercore.vector.make(counting, num_envs=2, backend="processes", num_workers=2)
    try:
        vec.reset(seed=0)
        vec.step(np.zeros(2, dtype=np.int64))
        assert vec.step(np.zeros(2, dtype=np.int64))[4]["episode_length"] == episode_length
    finally:
        vec.close()


@pytest.mark.parametrize("how, status", [
    (lambda: os._exit(3), r"exit code 3$"),
    (lambda: os.kill(os.getpid(), signal.SIGKILL), r"exit code -9 \(killed by signal 9: Killed\)$"),
])
def test_worker_dying_while_building_its_envs_reports_how(how, status):
    caller = os.getpid()

    def creator(buffers=None):
        if os.getpid() != caller:  # in the workers only, after the probe in the caller
            how()
        return CountingEnv(buffers=buffers)

    with pytest.raises(RuntimeError, match=r"^worker \d \(pid \d+\) died with " + status):
        puffercore.vector.make(creator, 2, backend="processes", num_workers=2)


def test_a_script_without_main_guard_fails_in_one_line(tmp_path):
    # Spawned workers import the script; without the guard each would make the vector
    # env again. The caller's error names the guard; the workers print nothing.
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent("""
        import puffercore.vector
        from puffercore.testing import CountingEnv
        envs = puffercore.vector.make(CountingEnv, num_envs=2, num_workers=2, backend="processes")
    """))
    result = subprocess.run([sys.executable, "-P", str(script)], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.count("Traceback") == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: ") and 'if __name__ == "__main__":' in last, result.stderr
