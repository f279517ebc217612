"""Every enumerated variable of this plugin (base.CHOICES) with a value it does not accept is one line of
`env_errors()`, which `check`, the plugin's entry point and the launch step act on before any scheduler starts: none is
left to fail later inside a serving scheduler (before 2026-12-04, SGLANG_KIMI_EAGLE3_ADAPTIVE_MEASURE and _ADAPTIVE_POOL
were read only there)."""

import pytest

from sglang_kimi_eagle3 import base


@pytest.mark.parametrize("name", sorted(base.CHOICES))
def test_a_bad_value_of_each_enumerated_variable_is_listed(monkeypatch, name):
    for other in base.CHOICES:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(name, "bogus")
    errors = base.env_errors()
    choices = "|".join(base.CHOICES[name][0])
    assert errors == [f"{name}='bogus' is not one of {choices}; unset it or pick one"]


def test_the_defaults_are_accepted(monkeypatch):
    for name in base.CHOICES:
        monkeypatch.delenv(name, raising=False)
    assert base.env_errors() == []


def test_a_bundled_table_folder_that_is_not_one_is_listed(monkeypatch, tmp_path):
    for other in base.CHOICES:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(base.ENV_BUNDLED_DIR, str(tmp_path / "typo"))
    assert base.env_errors() == [f"{base.ENV_BUNDLED_DIR}={str(tmp_path / 'typo')!r} is not a folder; unset it, or point "
                                 "it at a folder of launch tables (an empty folder hides the bundled ones)"]
    monkeypatch.setenv(base.ENV_BUNDLED_DIR, str(tmp_path))  # an empty folder: accepted (it hides them)
    assert base.env_errors() == []


@pytest.mark.parametrize("raw", ["inf", "Infinity", "nan", "-1", "lots"])
def test_the_adaptive_memory_budget_is_a_finite_number(monkeypatch, raw):
    from sglang_kimi_eagle3.errors import UserError
    from sglang_kimi_eagle3.integration import adaptive_default

    monkeypatch.setenv(adaptive_default.ENV_MAX_GB, raw)
    with pytest.raises(UserError, match=f"SGLANG_KIMI_EAGLE3_ADAPTIVE_MAX_GB='{raw}': expected a finite number of GB"):
        adaptive_default.max_gb()
    monkeypatch.setenv(adaptive_default.ENV_MAX_GB, " 12.5 ")
    assert adaptive_default.max_gb() == 12.5


def test_a_bad_adaptive_memory_budget_is_listed_before_any_launch(monkeypatch, capsys):
    """env_errors lists it (the plugin's entry point, the launch step, `check` and `status` act on that list): `status`
    passed it with exit 0 where a launch refused it."""
    from sglang_kimi_eagle3.cli import main as cli_main

    for other in base.CHOICES:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(base.ENV_ADAPTIVE_MAX_GB, "lots")
    assert base.env_errors() == ["SGLANG_KIMI_EAGLE3_ADAPTIVE_MAX_GB='lots': expected a finite number of GB >= 0 (default 8.0)"]
    assert cli_main(["status"]) == 2
    assert "SGLANG_KIMI_EAGLE3_ADAPTIVE_MAX_GB='lots'" in capsys.readouterr().err


@pytest.mark.parametrize("adaptive", ["on", "off"])
def test_status_refuses_a_missing_adaptive_profile_where_a_launch_would(monkeypatch, capsys, tmp_path, adaptive):
    """A launch reads SGLANG_KIMI_EAGLE3_ADAPTIVE_PROFILE for its adaptive table and refuses a missing or malformed
    one; `status` passed it with exit 0. With adaptive steps off no launch reads it, and `status` says nothing."""
    from sglang_kimi_eagle3.cli import main as cli_main
    from sglang_kimi_eagle3.integration import adaptive_default

    for other in base.CHOICES:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(base.ENV_ADAPTIVE, adaptive)
    bad = tmp_path / "profile.json"
    bad.write_text('{"name": "x", "hardware": 3}')
    for value, words in ((str(tmp_path / "nope.json"), "not found"), (str(bad), "profile.json")):
        monkeypatch.setenv(adaptive_default.ENV_PROFILE, value)
        rc = cli_main(["status", "--no-model-class"])
        err = capsys.readouterr().err
        if adaptive == "off":
            assert rc == 0, err
            continue
        assert rc == 2
        assert err.count("\n") == 1 and "SGLANG_KIMI_EAGLE3_ADAPTIVE_PROFILE" in err and words in err, err
    monkeypatch.setenv(adaptive_default.ENV_PROFILE, "kimi-k2.5_8xh200_tp8")
    assert cli_main(["status", "--no-model-class"]) == 0
