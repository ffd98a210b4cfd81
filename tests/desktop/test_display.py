"""``knowledge desktop`` where no window can open: a message naming what is missing and exit 1, never Qt's abort."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from desktop.display import DEBIAN_PACKAGES, XCB_CURSOR, display_problem
from engine.state.statedir import StateDir
from tests.helpers import wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
DISPLAY_VARIABLES = ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")


def _desktop(state: Path, env: dict[str, str], *extra: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", "--state-dir", str(state), "desktop", *extra],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _environment(**chosen: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in DISPLAY_VARIABLES}
    return {**env, "PYTHONPATH": str(REPO_ROOT), **chosen}


def test_without_a_display_the_window_says_so_and_exits_1(tmp_path: Path) -> None:
    state = tmp_path / "state"

    done = _desktop(state, _environment())

    assert done.returncode == 1, done.stderr
    assert "no display to open the window on (DISPLAY is not set)" in done.stderr
    assert "knowledge serve" in done.stderr and "QT_QPA_PLATFORM=offscreen" in done.stderr
    assert "qt.qpa" not in done.stderr  # Qt was never asked
    assert not (state / "engine.json").exists()  # and no engine was started for a window that cannot open


def test_the_offscreen_platform_still_opens_the_window(tmp_path: Path) -> None:
    state, report = StateDir(tmp_path / "state"), tmp_path / "startup.json"

    try:
        done = _desktop(state.root, _environment(QT_QPA_PLATFORM="offscreen"), "--demo", "--startup-report",
                        str(report))
        assert done.returncode == 0, done.stderr
        assert "recordsAt" in json.loads(report.read_text(encoding="utf-8"))  # shown, with the engine's data
    finally:
        info = state.serving_engine()  # the window started an engine that outlives it, as designed: stop it
        if info is not None:
            os.kill(info["pid"], signal.SIGTERM)
            wait_for(lambda: state.serving_engine() is None, timeout=60)


@pytest.mark.parametrize("env", [{"QT_QPA_PLATFORM": "offscreen"}, {"QT_QPA_PLATFORM": "minimal"},
                                 {"QT_QPA_PLATFORM": "vnc:size=800x600"}])
def test_headless_platforms_are_not_checked(env: dict[str, str]) -> None:
    assert display_problem(env, missing=lambda plugin: pytest.fail("checked"),
                           x_server_answers=lambda display: pytest.fail("checked")) is None


def test_missing_system_libraries_are_named_with_their_debian_packages() -> None:
    problem = display_problem({"DISPLAY": ":0"}, missing=lambda plugin: [XCB_CURSOR, "libxkbcommon-x11.so.0",
                                                                        "libEGL.so.1"],
                              x_server_answers=lambda display: True)

    assert problem is not None and "xcb platform plugin cannot load" in problem
    assert "sudo apt-get install libegl1 libxcb-cursor0 libxkbcommon-x11-0" in problem


def test_a_library_without_a_known_package_is_still_named() -> None:
    problem = display_problem({"DISPLAY": ":0"}, missing=lambda plugin: ["libfuture.so.9"],
                              x_server_answers=lambda display: True)

    assert problem is not None and "libfuture.so.9" in problem and "packages providing libfuture.so.9" in problem


def test_a_display_nobody_answers_on_is_named() -> None:
    problem = display_problem({"DISPLAY": ":42"}, missing=lambda plugin: [], x_server_answers=lambda display: False)

    assert problem is not None and "no X server answers on DISPLAY=:42" in problem


def test_wayland_alone_checks_the_wayland_plugin_and_a_reachable_setup_passes() -> None:
    checked: list[str] = []

    def missing(plugin: str) -> list[str]:
        checked.append(plugin)
        return []

    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, missing=missing, x_server_answers=lambda d: True) is None
    assert display_problem({"DISPLAY": ":0"}, missing=missing, x_server_answers=lambda d: True) is None
    assert checked == ["wayland", "xcb"]
    assert "WAYLAND_DISPLAY is not set" in display_problem({"QT_QPA_PLATFORM": "wayland", "DISPLAY": ":0"},
                                                           missing=missing)
    assert display_problem({"QT_QPA_PLATFORM": "wayland;xcb", "DISPLAY": ":0"}, missing=missing,
                           x_server_answers=lambda d: True) is None
    assert checked[-1] == "xcb"  # the platform Qt falls back to, since no Wayland display is named


def test_every_known_library_maps_to_a_package_name() -> None:
    assert all(name.startswith("lib") and ".so." in name for name in DEBIAN_PACKAGES)
    assert all(package == package.lower() and " " not in package for package in DEBIAN_PACKAGES.values())
