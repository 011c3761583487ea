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


def run_python(code: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, **kwargs)


def test_views_stay_readable_after_close_and_garbage_collection():
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
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
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
    time.sleep(0.5)  # the workers, orphaned by the kill, go with the same signal
    assert not set(os.listdir("/dev/shm")) - before
