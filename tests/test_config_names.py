"""One name per setting (issue 48's frictions 2, 7, 8, 9 and its checked files): GROUP.FIELD
on the command line, in config files (nested tables, dotted keys, bare names for a
release), in sweeps and in config.json; "did you mean" for flags, keys and envs;
--print-config and --help with the preset; custom policies refuse policy.* flags; RUN by
position; saved configs checked field by field; a config file never chooses code."""

import dataclasses
import json
import os
import re

import pytest

from puffercore import checkpoint, run
from puffercore.__main__ import build_parser, main
from puffercore.alphazero.config import AlphaZeroConfig
from puffercore.config_files import VERSION_KEY, file_form, puffercore_version, settings_of
from puffercore.flags import settings
from puffercore.ppo import PPOConfig

TINY = ["--total-timesteps", "256", "--vec.num-envs", "8", "--train.horizon", "16", "--train.minibatch-size", "64",
        "--quiet", "--tensorboard", "false"]
POLICY_MODULE = """
from torch import nn
from puffercore import ppo

class Tiny(ppo.ActorCritic):
    def __init__(self, observation_space, action_space, observation_tree=None):
        super().__init__(observation_space, action_space, observation_tree)
        self.actor = nn.Linear(observation_space.shape[0], self.head.size)
        self.critic = nn.Linear(observation_space.shape[0], 1)

    def forward(self, observations):
        return self.actor(observations.float()), self.critic(observations.float()).squeeze(-1)
"""


def fail(arguments, capsys) -> str:
    """The CLI's stderr for arguments it refuses: exit 2, one line and the help hint."""
    with pytest.raises(SystemExit) as exit_info:
        main(arguments)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err, err
    return err


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("trained") / "run")
    main(["train", "cartpole", *TINY, "--run-dir", run_dir])
    return run_dir


# ---- names ------------------------------------------------------------------------------------
@pytest.mark.parametrize("config_class", [PPOConfig, AlphaZeroConfig])
def test_every_field_has_a_group_and_one_name(config_class):
    names = settings(config_class)
    assert len(names) == len(dataclasses.fields(config_class))
    assert all(field.metadata["group"] and field.metadata["help"] for field in names.values())
    assert {"train.learning_rate", "seed"} <= set(names)


def test_alphazero_flags_are_grouped_and_the_old_spellings_still_work_with_a_warning(capsys):
    args = build_parser().parse_args(["alphazero", "tictactoe", "--search.simulations", "7", "--network.channels",
                                      "8", "--self-play.games-per-iteration", "4", "--iterations", "2"])
    assert (args.simulations, args.channels, args.games_per_iteration, args.iterations) == (7, 8, 4, 2)
    main(["alphazero", "tictactoe", "--simulations", "9", "--print-config"])
    captured = capsys.readouterr()
    assert json.loads(captured.out)["search"]["simulations"] == 9
    assert "puffercore: warning: --simulations: deprecated (removed in a later release); use --search.simulations" \
        in captured.err
    with pytest.raises(SystemExit):
        main(["alphazero", "--help"])
    assert " --simulations " not in capsys.readouterr().out  # old spellings are not advertised


# ---- config files -----------------------------------------------------------------------------
def test_nested_tables_dotted_keys_and_bare_names_give_the_same_config(tmp_path):
    (tmp_path / "nested.toml").write_text('env = "cartpole"\nseed = 3\n[train]\nlearning_rate = 1e-3\n'
                                          '[policy]\nhidden_size = 16\n')
    (tmp_path / "dotted.json").write_text('{"env": "cartpole", "seed": 3, "train.learning_rate": 0.001, '
                                          '"policy.hidden_size": 16}')
    (tmp_path / "bare.json").write_text('{"env": "cartpole", "seed": 3, "learning_rate": 0.001, "hidden_size": 16}')
    expected = ({"seed": 3, "learning_rate": 1e-3, "hidden_size": 16}, {"env": "cartpole"})
    from puffercore.config_files import read_file

    for name in ("nested.toml", "dotted.json"):
        assert settings_of(read_file(str(tmp_path / name)), PPOConfig, name, extra=("env",)) == expected
    with pytest.warns(FutureWarning, match=r"bare.json: the bare names learning_rate, hidden_size: deprecated .*"
                                           r"\(train.learning_rate, policy.hidden_size\)"):
        assert settings_of(read_file(str(tmp_path / "bare.json")), PPOConfig, "bare.json", extra=("env",)) == expected


def test_a_train_table_trains_and_print_config_round_trips(tmp_path, capsys):
    (tmp_path / "mine.toml").write_text('env = "cartpole"\n[train]\nlearning_rate = 1e-3\n')
    main(["train", "--config", str(tmp_path / "mine.toml"), "--policy.hidden-size", "16", "--print-config"])
    printed = json.loads(capsys.readouterr().out)
    assert printed[VERSION_KEY] == puffercore_version() and printed["env"] == "cartpole"
    assert printed["train"]["learning_rate"] == 1e-3 and printed["policy"]["hidden_size"] == 16
    assert printed["vec"]["num_envs"] == 128 and printed["train"]["horizon"] == 8  # cartpole's preset
    assert printed == file_form(dataclasses.asdict(PPOConfig.for_env("cartpole", learning_rate=1e-3, hidden_size=16)),
                                PPOConfig, env="cartpole")
    (tmp_path / "printed.json").write_text(json.dumps(printed))
    main(["train", "--config", str(tmp_path / "printed.json"), "--print-config"])
    assert json.loads(capsys.readouterr().out) == printed


@pytest.mark.parametrize("content, message", [
    ('{"env": "cartpole", "train": {"learning_rte": 0.1}}',
     "bad.json: unknown setting 'train.learning_rte'; did you mean train.learning_rate?"),
    ('{"env": "cartpole", "lr": 0.1, "puffercore_version": "9.9"}',
     "bad.json: unknown setting 'lr' (the file was written by puffercore 9.9; this is puffercore "),
    ('{"env": "cartpole", "train": {"learning_rate": "fast"}}', "bad.json: train.learning_rate must be a number, got 'fast'"),
    ('{"env": "cartpole", "policy": {"activation": "swish"}}', "bad.json: policy.activation must be one of"),
    ('{"env": "cartpole", "train": {"gamma": 2.0}}', "bad.json: gamma must be in [0, 1], got 2.0"),
    ('{"env": "cartpole", "train": 3}', "bad.json: train must be a table of train.* settings, got 3"),
    ('{"env": "cartpole", "gamma": 0.9, "train.gamma": 0.9}', "bad.json: train.gamma is set twice"),
])
def test_a_bad_config_file_is_one_line_naming_the_file_and_the_setting(tmp_path, monkeypatch, capsys, content, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text(content)
    err = fail(["train", "--config", "bad.json"], capsys)
    assert message in err and len(err.strip().splitlines()) == 2, err


def test_a_config_file_never_chooses_code_to_import(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "planted.py").write_text("raise SystemExit('imported!')\n")
    (tmp_path / "env.json").write_text('{"env": "planted:Env"}')
    err = fail(["train", "--config", "env.json"], capsys)
    assert "--config env.json names the env 'planted:Env', code to import, and a file never chooses code to run: " \
           "if you trust it, give it on the command line too (puffercore train planted:Env --config env.json)" in err
    err = fail(["train", "cartpole", "--config", "env.json"], capsys)  # another env named: compared, not imported
    assert "is a config for env 'planted:Env'" in err and "imported!" not in err
    (tmp_path / "policy.json").write_text('{"env": "cartpole", "policy": "planted:Policy"}')
    err = fail(["train", "--config", "policy.json"], capsys)
    assert "names the policy 'planted:Policy', code to import" in err and "give --policy planted:Policy too" in err


# ---- the command line -------------------------------------------------------------------------
@pytest.mark.parametrize("arguments, message", [
    (["train", "cartpole", "--learning-rate", "0.001"],
     "puffercore train: error: unknown flag --learning-rate; did you mean --train.learning-rate?\n"
     "(see `puffercore train --help`)"),
    (["train", "cartpole", "--hidden_size=8"], "unknown flag --hidden_size; did you mean --policy.hidden-size?"),
    (["alphazero", "connect4", "--chanels", "8"], "puffercore alphazero: error: unknown flag --chanels; did you mean "
                                                  "--network.channels?\n(see `puffercore alphazero --help`)"),
    (["train", "cartpol"], "unknown env 'cartpol'; expected an ocean env"),
    (["train", "gymnasium:Acrobot-v2"], "unknown gymnasium env id 'Acrobot-v2' in env='gymnasium:Acrobot-v2'; did you "
                                        "mean Acrobot-v1?"),
])
def test_unknown_names_get_the_closest_known_one(capsys, arguments, message):
    err = fail(arguments, capsys)
    assert message in err, err
    if arguments[1] == "cartpol":
        assert err.strip().splitlines()[0].endswith("; did you mean cartpole?")


def test_help_shows_the_presets_values_when_an_env_or_game_is_given(capsys):
    for arguments, expected in ((["train", "cartpole", "--help"], "(default 0.0186 in cartpole's preset; 0.00025"),
                                (["alphazero", "connect4", "--help"], "(default 64 in connect4's preset; 100")):
        with pytest.raises(SystemExit):
            main(arguments)
        assert expected in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "(default 0.00025, or the env preset)" in " ".join(capsys.readouterr().out.split())


def test_policy_flags_with_a_custom_policy_are_refused(tmp_path, monkeypatch, capsys):
    err = fail(["train", "cartpole", "--policy", "tiny_policies:Tiny", "--policy.hidden-size", "256"], capsys)
    assert "--policy.hidden-size: the custom policy tiny_policies:Tiny does not read policy.* settings" in err


def test_config_json_is_canonical_and_a_custom_policy_run_names_its_policy(tmp_path, monkeypatch, capsys):
    (tmp_path / "tiny_policies.py").write_text(POLICY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    run_dir = str(tmp_path / "run")
    main(["train", "cartpole", *TINY, "--run-dir", run_dir, "--policy", "tiny_policies:Tiny"])
    with open(os.path.join(run_dir, "config.json")) as file:
        saved = json.load(file)
    assert saved[VERSION_KEY] == puffercore_version() and saved["policy"] == "tiny_policies:Tiny"
    assert saved["train"]["horizon"] == 16 and saved["vec"]["num_envs"] == 8 and saved["total_timesteps"] == 256
    config = os.path.join(run_dir, "config.json")
    err = fail(["train", "--config", config], capsys)
    assert "names the policy 'tiny_policies:Tiny', code to import" in err
    main(["train", "--config", config, "--policy", "tiny_policies:Tiny", "--print-config"])
    assert json.loads(capsys.readouterr().out)["train"]["horizon"] == 16


def test_an_old_flat_config_json_still_trains(trained, tmp_path, capsys):
    values = json.load(open(os.path.join(trained, "config.json")))
    flat = {key: value for key, value in values.items() if not isinstance(value, dict) and key != VERSION_KEY}
    flat.update({name: value for group in ("vec", "train", "policy") for name, value in values[group].items()})
    (tmp_path / "old.json").write_text(json.dumps(flat))
    main(["train", "--config", str(tmp_path / "old.json"), "--print-config"])
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {key: value for key, value in values.items() if key != "plan"}
    assert re.search(r"old.json: the bare names backend, num_envs, num_workers and \d+ more: deprecated \(removed in "
                     r"a later release\); use the settings' names, as dotted keys or \[GROUP\] tables \(vec.backend, "
                     r"vec.num_envs, vec.num_workers\)", captured.err) and captured.err.startswith("puffercore: warning: ")


def test_eval_export_and_plot_take_the_run_by_position(trained, tmp_path, capsys):
    main(["eval", trained, "--episodes", "1"])
    assert f"{trained}: 1 episode" in capsys.readouterr().out
    main(["eval", "cartpole", "--checkpoint", trained, "--episodes", "1"])  # the older spelling
    main(["eval", "--checkpoint", trained, "--env", "cartpole", "--episodes", "1"])
    capsys.readouterr()
    assert "give a run directory or its checkpoint.pt: puffercore eval RUN" in fail(["eval"], capsys)
    main(["export", "--checkpoint", trained, "--format", "torchscript", "--output", str(tmp_path / "p.pt")])
    assert os.path.isfile(tmp_path / "p.pt")
    main(["plot", "--checkpoint", trained, "--output", str(tmp_path / "curve.png")])
    assert os.path.isfile(tmp_path / "curve.png")


def test_a_saved_config_with_an_unknown_or_bad_field_is_one_line(trained, tmp_path, capsys):
    state = checkpoint.load(os.path.join(trained, run.CHECKPOINT_NAME))
    with open(os.path.join(trained, "config.json")) as file:
        values = json.load(file)
    (tmp_path / "config.json").write_text(json.dumps({**values, VERSION_KEY: "0.0.9"}))  # the run's, beside it
    for change, message in (({"hidden_sise": 16}, f"its saved config has the field 'hidden_sise', which puffercore "
                                                  f"{puffercore_version()} does not know (the run was written by "
                                                  f"puffercore 0.0.9); did you mean hidden_size?"),
                            ({"hidden_size": "big"}, "policy.hidden_size must be an int, got 'big'"),
                            ({"gamma": 7.0}, "gamma must be in [0, 1], got 7.0")):
        path = str(tmp_path / "tampered.pt")
        checkpoint.save(path, {**state, "config": {**state["config"], **change}})
        err = fail(["eval", path, "--episodes", "1"], capsys)
        assert f"{path}: {message}" in err, err
        assert len(err.strip().splitlines()) == 2


def test_alphazero_reads_a_config_file_and_prints_its_settings(tmp_path, capsys):
    (tmp_path / "az.toml").write_text('game = "tictactoe"\niterations = 3\n"train.batch_size" = 64\n'
                                      '[search]\nsimulations = 12\n')
    main(["alphazero", "--config", str(tmp_path / "az.toml"), "--network.channels", "8", "--print-config"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["game"] == "tictactoe" and printed["iterations"] == 3 and printed["network"]["channels"] == 8
    assert printed["search"]["simulations"] == 12 and printed["train"]["batch_size"] == 64
    assert printed["self_play"]["games_per_iteration"] == 64  # tictactoe's preset
    (tmp_path / "printed.json").write_text(json.dumps(printed))
    main(["alphazero", "--config", str(tmp_path / "printed.json"), "--print-config"])
    assert json.loads(capsys.readouterr().out) == printed
    (tmp_path / "bad.toml").write_text('game = "tictactoe"\n[search]\nsimulation = 12\n')
    err = fail(["alphazero", "--config", str(tmp_path / "bad.toml")], capsys)
    assert "bad.toml: unknown setting 'search.simulation'; did you mean search.simulations?" in err
    err = fail(["alphazero", "connect4", "--config", str(tmp_path / "az.toml")], capsys)
    assert "az.toml is a config for tictactoe, not connect4" in err
