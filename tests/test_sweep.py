"""Many runs (puffercore.sweep): seeds side by side with their mean and spread, Optuna
sweeps from a config file's [sweep] table (parallel trials, pruning, a SQLite study that
resumes, the best config written out), and Ctrl-C through all of them."""

import fcntl
import json
import os
import signal
import sys
import types

import pytest

from puffercore import checkpoint, run
from puffercore.__main__ import main
from puffercore.config_files import puffercore_version
from puffercore.many_runs import Interrupted
from puffercore.sweep import Parameter, Study, _objective, search_space

# CartPole's preset, cut short: 40 updates of 256 envs x 4 steps on one torch thread
SHORT = {"total_timesteps": 40_960, "num_envs": 256, "horizon": 4, "minibatch_size": 1024, "update_epochs": 2,
         "tensorboard": False}
FLAG_GROUPS = {"total_timesteps": "", "tensorboard": "", "num_envs": "vec."}  # each field's flag prefix


# ---- seeds ----------------------------------------------------------------------------------
def test_seeds_train_side_by_side_and_report_mean_and_spread(tmp_path, capsys):
    main(["train", "cartpole", "--seeds", "1", "2", "--run-dir", str(tmp_path / "cp"),
          *[f"--{FLAG_GROUPS.get(name, 'train.')}{name}={value}" for name, value in SHORT.items()]])
    out = capsys.readouterr().out
    for seed in (1, 2):
        assert f"seed {seed}: done: 40,960 steps" in out
        saved = checkpoint.load(tmp_path / f"cp-seed{seed}" / run.CHECKPOINT_NAME)
        assert saved["config"]["seed"] == seed and saved["counters"]["global_step"] == 40_960
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("seeds 1 2: final return (mean of each run's last 20 episodes) ")
    assert "(std over 2 seeds), min " in summary


def test_seeds_flags_are_checked(capsys):
    for arguments, message in ((["--seeds", "1", "2", "--seed", "3"], "give no --resume and no --seed"),
                               (["--jobs", "2"], "--jobs is for --seeds"),
                               (["--seeds", "1", "1"], "seeds must be distinct")):
        with pytest.raises(SystemExit):
            main(["train", "cartpole", *arguments])
        assert message in capsys.readouterr().err


# ---- the search space -------------------------------------------------------------------------
def test_a_sweep_table_becomes_parameters():
    space = search_space({"train.learning_rate": {"low": 1e-4, "high": 1e-2, "log": True},
                          "train.update-epochs": {"low": 2, "high": 8, "step": 2},
                          "policy.hidden_size": [32, 64], "policy.activation": ["tanh", "relu"],
                          "total_timesteps": [1000, 2000], "train": {"ent_coef": {"low": 0, "high": 0.02}}})
    assert space == [Parameter("learning_rate", low=1e-4, high=1e-2, log=True),
                     Parameter("update_epochs", integer=True, low=2, high=8, step=2),
                     Parameter("hidden_size", choices=(32, 64)), Parameter("activation", choices=("tanh", "relu")),
                     Parameter("total_timesteps", choices=(1000, 2000)), Parameter("ent_coef", low=0, high=0.02)]


@pytest.mark.parametrize("table, message", [
    ({"train.learning_rte": [1e-3]}, "unknown setting 'train.learning_rte'; did you mean train.learning_rate\\?"),
    ({"policy.learning_rate": [1e-3]}, "unknown setting 'policy.learning_rate'; did you mean train.learning_rate\\?"),
    ({"run.seed": [1, 2]}, "unknown setting 'run.seed'; did you mean seed\\?"),
    ({"train.gamma": [0.9], "train": {"gamma": [0.99]}}, "train.gamma is searched twice"),
    ({"train.update_epochs": {"low": 2.5, "high": 8}}, "bounds of the field's type \\(int\\)"),
    ({"policy.activation": {"low": 0, "high": 1}}, "give a list of choices"),
    ({"train.learning_rate": {"low": 0.0, "high": 1e-2, "log": True}}, "need low < high"),
    ({"train.learning_rate": {"low": 1e-2, "high": 1e-3}}, "need low < high"),
    ({"train.learning_rate": {"low": 1e-3}}, "expected {low = ..., high = ...}"),
    ({"policy.hidden_size": []}, "a list of choices must hold ints"),
    ({"policy.hidden_size": [32, True]}, "a list of choices must hold ints"),
    ({}, "must map settings to ranges or lists"),
])
def test_a_wrong_sweep_entry_is_named(table, message):
    with pytest.raises(ValueError, match=message):
        search_space(table)


def test_a_bare_field_in_a_sweep_table_still_works_with_a_warning():
    with pytest.warns(FutureWarning, match=r"bare names \(learning_rate\): deprecated .* \"train.learning_rate\""):
        assert search_space({"learning_rate": [1e-3]}) == [Parameter("learning_rate", choices=(1e-3,))]


# ---- trials -------------------------------------------------------------------------------------
def test_a_trial_reports_its_learning_curve_and_a_poor_one_is_pruned(tmp_path):
    optuna = pytest.importorskip("optuna")
    study = optuna.create_study(direction="maximize",
                                pruner=optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=10_000))
    shared = Study("", "test", str(tmp_path), "cartpole", {**SHORT, "quiet": True}, (), "median", 0)
    stop = types.SimpleNamespace(value=0)  # what in_processes shares: the number of the signal it received
    good = study.ask()
    value = _objective(good, {"learning_rate": 7e-3}, shared, 1, stop)
    study.tell(good, value)
    reported = sorted(study.trials[0].intermediate_values)  # at every 20th of the run, once 20 episodes ended
    assert set(reported) <= {40_960 * k // 20 for k in range(1, 20)} and len(reported) >= 15 and reported[-1] == 38_912
    poor = study.ask()
    with pytest.raises(optuna.TrialPruned, match="pruned at .* steps, recent return"):
        _objective(poor, {"learning_rate": 1e-7}, shared, 1, stop)  # learns nothing: below the median
    stop.value = int(signal.SIGINT)
    with pytest.raises(Interrupted, match="interrupted at 1,024 steps"):
        _objective(study.ask(), {"learning_rate": 7e-3}, shared, 1, stop)


SWEEP_FILE = """env = "cartpole"
total_timesteps = 20480
tensorboard = false
"vec.num_envs" = 256

[train]
horizon = 4
minibatch_size = 1024
update_epochs = 2

[sweep]
"train.learning_rate" = {low = 1e-3, high = 2e-2, log = true}

[sweep.policy]
hidden_size = [16, 32]
"""


def test_sweep_runs_trials_in_processes_resumes_and_writes_the_best_config(tmp_path, monkeypatch, capsys):
    optuna = pytest.importorskip("optuna")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lr.toml").write_text(SWEEP_FILE)
    main(["sweep", "lr.toml", "--trials", "3", "--jobs", "2", "--pruner", "none"])
    out = capsys.readouterr().out
    assert "3 of 3 trials finished (0 pruned)" in out
    assert "best config: sweeps/lr/best_config.json  (train it: puffercore train --config sweeps/lr/best_config.json)" \
        in out and "dashboard: optuna-dashboard sqlite:///sweeps/lr/study.db" in out
    study = optuna.load_study(study_name="lr", storage="sqlite:///sweeps/lr/study.db")
    assert [trial.state for trial in study.trials] == [optuna.trial.TrialState.COMPLETE] * 3
    for trial in study.trials:
        assert os.path.isfile(os.path.join("sweeps", "lr", f"trial-{trial.number}", "checkpoint.pt"))
    with open("sweeps/lr/best_config.json") as file:
        best = json.load(file)
    assert best == {"puffercore_version": puffercore_version(), "env": "cartpole", "total_timesteps": 20480,
                    "tensorboard": False, "vec": {"num_envs": 256},
                    "train": {"learning_rate": study.best_params["learning_rate"], "horizon": 4,
                              "minibatch_size": 1024, "update_epochs": 2},
                    "policy": {"hidden_size": study.best_params["hidden_size"]}}

    main(["train", "--config", "sweeps/lr/best_config.json", "--run-dir", "best", "--quiet"])
    assert checkpoint.load(tmp_path / "best" / run.CHECKPOINT_NAME)["config"]["learning_rate"] == \
        study.best_params["learning_rate"]

    main(["sweep", "lr.toml", "--trials", "4", "--pruner", "none"])  # the same study, one trial more
    assert "4 of 4 trials finished" in capsys.readouterr().out
    assert len(optuna.load_study(study_name="lr", storage="sqlite:///sweeps/lr/study.db").trials) == 4

    (tmp_path / "lr.toml").write_text(SWEEP_FILE.replace("20480", "40960"))
    with pytest.raises(SystemExit):
        main(["sweep", "lr.toml", "--trials", "5"])
    assert "holds a sweep of another config than lr.toml" in capsys.readouterr().err
    with open("sweeps/lr/lock", "w") as lock:  # a sweep running there
        fcntl.flock(lock, fcntl.LOCK_EX)
        with pytest.raises(SystemExit):
            main(["sweep", "lr.toml", "--trials", "5", "--dir", "sweeps/lr"])
    assert "another `puffercore sweep` is running on sweeps/lr" in capsys.readouterr().err


def test_sweep_file_errors_and_a_missing_optuna_are_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "plain.json").write_text('{"env": "cartpole"}')
    with pytest.raises(SystemExit):
        main(["sweep", str(tmp_path / "plain.json")])
    assert "has no [sweep] table" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna now raises ImportError
    with pytest.raises(SystemExit):
        main(["sweep", str(tmp_path / "plain.json")])
    assert 'needs Optuna, which is not installed: pip install "puffercore[sweep]"' in capsys.readouterr().err


def test_ctrl_c_stops_a_sweep_which_resumes_with_the_interrupted_params(tmp_path, interrupt_command):
    optuna = pytest.importorskip("optuna")
    (tmp_path / "long.toml").write_text(SWEEP_FILE.replace("20480", "2000000"))
    trials = tmp_path / "sweeps" / "long"
    done = interrupt_command(["sweep", "long.toml", "--trials", "2", "--jobs", "2"], tmp_path,
                             ready=lambda: all(os.path.isfile(trials / f"trial-{n}" / "metrics.csv") for n in (0, 1)))
    assert done.returncode == 128 + signal.SIGINT, done.stderr  # the shell's convention, as for one run
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
    assert "0 of 2 trials finished (0 pruned); interrupted: `puffercore sweep long.toml --trials 2` resumes" \
        in done.stdout
    study = optuna.load_study(study_name="long", storage=f"sqlite:///{trials}/study.db")
    failed = [trial.params for trial in study.trials if trial.state == optuna.trial.TrialState.FAIL]
    waiting = [trial.system_attrs["fixed_params"] for trial in study.trials
               if trial.state == optuna.trial.TrialState.WAITING]
    assert len(failed) == 2 and sorted(map(str, failed)) == sorted(map(str, waiting))  # queued to run again
    for number in (0, 1):  # each run saved where it was
        assert os.path.isfile(trials / f"trial-{number}" / "checkpoint.pt")


@pytest.mark.parametrize("number, whole_group", [(signal.SIGINT, True), (signal.SIGTERM, False)],
                         ids=["ctrl-c", "sigterm-to-the-command"])
def test_a_signal_stops_seeds_which_save_and_say_how_to_resume(tmp_path, interrupt_command, number, whole_group):
    done = interrupt_command(["train", "cartpole", "--seeds", "1", "2", "--total-timesteps", "5000000",
                              "--run-dir", "cp"], tmp_path,
                             ready=lambda: all(os.path.isfile(tmp_path / f"cp-seed{n}" / "metrics.csv") for n in (1, 2)),
                             number=number, whole_group=whole_group)
    assert done.returncode == 128 + number, done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
    for seed in (1, 2):
        assert f"seed {seed}: interrupted by {signal.Signals(number).name}" in done.stdout
        assert f"(checkpoint saved: puffercore train --resume cp-seed{seed})" in done.stdout
    assert "2 interrupted before the end" in done.stdout
