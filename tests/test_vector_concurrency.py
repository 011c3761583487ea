"""A vector env used from several threads, and threads the OS refuses. One public call
runs at a time: a second, from another thread, raises a RuntimeError naming the call in
progress on every backend, never hangs or frees envs under the first; close() refuses
too. Each case runs in a fresh interpreter, so a crash or hang fails the test rather
than the suite."""

import numpy as np
import pytest

import puffercore.vector
from puffercore.testing import CountingEnv

# The step in progress lasts STEP_SECONDS: long enough for the other thread's calls.
STEP_SECONDS = 1.0
SLOW_VECTORS = {
    "serial": f"""puffercore.vector.make(CountingEnv, 2, backend="serial", step_cost={STEP_SECONDS / 2})""",
    "processes": f"""puffercore.vector.make(CountingEnv, 2, backend="processes", num_workers=2, start_method="fork",
                                            step_cost={STEP_SECONDS})""",
    "threads": f"""puffercore.vector.make(Busy, 2, backend="threads", num_workers=2,
                                          min_cost_us={STEP_SECONDS * 1e6}, max_cost_us={STEP_SECONDS * 1e6})""",
}


@pytest.mark.parametrize("backend", sorted(SLOW_VECTORS))
def test_a_call_beside_a_step_in_another_thread_raises_naming_it(backend, run_python):
    result = run_python(f"""
        import threading, time
        import numpy as np
        import puffercore.vector
        from puffercore.ocean import Busy
        from puffercore.testing import CountingEnv

        vec = {SLOW_VECTORS[backend]}
        vec.reset(seed=0)
        actions = np.ones(2, dtype=np.int32)  # reward 1 in both envs
        stepper = threading.Thread(target=vec.step, args=(actions,))
        stepper.start()
        while vec._call_guard.call != "step":  # the step under way, however loaded the machine
            time.sleep(0.001)
        name = type(vec).__name__
        calls = dict(step=lambda: vec.step(actions), reset=vec.reset, async_reset=vec.async_reset,
                     send=lambda: vec.send(actions), recv=vec.recv, render=vec.render, close=vec.close)
        for call, method in calls.items():
            try:
                method()
            except RuntimeError as error:
                expected = name + "." + call + "() called while " + name + ".step() is running in another thread"
                assert str(error).startswith(expected), error
            else:
                raise AssertionError(call + "() ran beside step()")
        stepper.join(timeout=60)
        assert not stepper.is_alive(), "the step never finished"
        assert (vec.step(actions)[1] == 1).all()  # the vector is unharmed
        vec.close()
        print("ok")
    """)
    assert result.returncode == 0 and result.stdout.strip() == "ok", f"exit {result.returncode}\n{result.stderr[-3000:]}"


def test_close_while_another_thread_waits_in_a_staggered_recv_refuses(run_python):
    # close() used to free the envs that the waiting recv() was stepping (the caller of
    # recv steps still unclaimed units itself): a segfault.
    result = run_python(f"""
        import threading, time
        import numpy as np
        import puffercore.vector
        from puffercore.ocean import Busy

        vec = puffercore.vector.make(Busy, 2, backend="threads", num_workers=1, batch_size=1,
                                     min_cost_us={STEP_SECONDS * 1e6}, max_cost_us={STEP_SECONDS * 1e6})
        vec.async_reset(seed=0)
        for _ in range(2):  # both envs (the reset's batches) sent off to step
            vec.recv()
            vec.send(np.ones(1, dtype=np.int32))
        received = []
        receiver = threading.Thread(target=lambda: received.append(vec.recv()))
        receiver.start()
        while vec._call_guard.call != "recv":  # the recv under way, however loaded the machine
            time.sleep(0.001)
        for method in (vec.close, vec.recv):
            try:
                method()
            except RuntimeError as error:
                expected = "Threads." + method.__name__ + "() called while Threads.recv() is running in another thread"
                assert str(error).startswith(expected), error
            else:
                raise AssertionError(method.__name__ + "() ran beside recv()")
        receiver.join(timeout=60)
        assert not receiver.is_alive(), "the recv never returned"
        batch = received[0]
        assert batch.rewards[0] == 1 and batch.observations[0, 0] == 1 / 1000  # one step of 1000
        vec.close()
        try:
            vec.recv()
        except RuntimeError as error:
            assert "closed" in str(error), error
        print("ok")
    """)
    assert result.returncode == 0 and result.stdout.strip() == "ok", f"exit {result.returncode}\n{result.stderr[-3000:]}"


def test_a_worker_thread_the_os_refuses_raises_and_stops_the_started_ones(run_python):
    # The engine used to throw from its constructor with workers running: std::terminate.
    result = run_python("""
        import ctypes, os, re, resource
        import numpy as np
        import puffercore.vector
        from puffercore.ocean import CartPole

        # Large thread stacks make the address-space limit below refuse the third thread,
        # whatever else the interpreter maps meanwhile.
        STACK = 64 << 20
        libc = ctypes.CDLL(None)
        attr = ctypes.create_string_buffer(256)  # a pthread_attr_t (56 or 64 bytes)
        assert libc.pthread_attr_init(attr) == 0
        assert libc.pthread_attr_setstacksize(attr, ctypes.c_size_t(STACK)) == 0
        assert libc.pthread_setattr_default_np(attr) == 0

        def mapped_bytes():
            with open("/proc/self/status") as status:
                return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))

        threads_before = len(os.listdir("/proc/self/task"))
        resource.setrlimit(resource.RLIMIT_AS, (mapped_bytes() + int(2.5 * STACK), resource.RLIM_INFINITY))
        try:
            puffercore.vector.make(CartPole, 8, backend="threads", num_workers=8)
        except RuntimeError as error:
            message = str(error)
        else:
            raise AssertionError("8 workers started within the limit")
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        refused = re.fullmatch(r"engine: could not start worker thread (\\d+) of num_workers=8 \\(.+\\); "
                               r"the (\\d+) already started were stopped", message)
        assert refused and int(refused[2]) == int(refused[1]) - 1 >= 1, message
        assert len(os.listdir("/proc/self/task")) == threads_before  # every started worker joined
        vec = puffercore.vector.make(CartPole, 8, backend="threads", num_workers=8)
        vec.reset(seed=0)
        assert vec.step(np.ones(8, dtype=np.int32))[0].shape == (8, 4)
        vec.close()
        print("ok")
    """)
    assert result.returncode == 0 and result.stdout.strip() == "ok", f"exit {result.returncode}\n{result.stderr[-3000:]}"


def test_close_from_inside_a_call_on_the_same_thread_is_refused():
    # A callback (or a signal handler) closing the vector would free what the call it
    # interrupted is stepping.
    vectors = []

    class ClosesItsVector(CountingEnv):
        def step(self, actions):
            vectors[0].close()

    vec = puffercore.vector.make(ClosesItsVector, 2, backend="serial")
    vectors.append(vec)
    vec.reset(seed=0)
    with pytest.raises(RuntimeError, match=r"^Serial\.close\(\) called while Serial\.step\(\) is running in this thread"):
        vec.step(np.ones(2, dtype=np.int64))
    vec.close()
    with pytest.raises(RuntimeError, match="closed"):
        vec.reset()
