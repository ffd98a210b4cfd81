"""Whether Qt can open a window here, found out before a ``QApplication`` exists.

Without a display, or with one of the X platform plugin's system libraries
missing, Qt prints a line about ``libxcb-cursor0`` (whatever is actually
missing) and aborts the process.  ``display_problem`` looks first, without
importing Qt: the display the environment names (and, for X, whether its
server answers), and the libraries the platform plugin links against
(``ldd`` on the plugin, which resolves them the way the loader will).  What it
returns is a message for the owner naming the Debian packages to install.

Platforms that need no display (``QT_QPA_PLATFORM=offscreen``, ``minimal``,
``vnc`` ...) and systems other than Linux and the BSDs are not checked.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Mapping

# Sonames the X and Wayland platform plugins load, and the Debian/Ubuntu package of each.
DEBIAN_PACKAGES = {
    "libEGL.so.1": "libegl1", "libGL.so.1": "libgl1", "libGLX.so.0": "libglx0", "libOpenGL.so.0": "libopengl0",
    "libGLdispatch.so.0": "libglvnd0", "libX11.so.6": "libx11-6", "libX11-xcb.so.1": "libx11-xcb1",
    "libXau.so.6": "libxau6", "libXdmcp.so.6": "libxdmcp6", "libdbus-1.so.3": "libdbus-1-3",
    "libfontconfig.so.1": "libfontconfig1", "libfreetype.so.6": "libfreetype6", "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0", "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0", "libxcb.so.1": "libxcb1", "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4", "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1", "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0", "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0", "libxcb-shm.so.0": "libxcb-shm0", "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1", "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xinerama.so.0": "libxcb-xinerama0", "libxcb-xinput.so.0": "libxcb-xinput0",
    "libxcb-xkb.so.1": "libxcb-xkb1", "libxcb-glx.so.0": "libxcb-glx0", "libSM.so.6": "libsm6",
    "libICE.so.6": "libice6", "libwayland-client.so.0": "libwayland-client0",
    "libwayland-cursor.so.0": "libwayland-cursor0", "libwayland-egl.so.1": "libwayland-egl1",
}
# Loaded by the X plugin at run time (dlopen), so ldd never lists it: Qt 6.5+ refuses to start without it.
XCB_CURSOR = "libxcb-cursor.so.0"
HEADLESS_PLATFORMS = ("offscreen", "minimal", "minimalegl", "vnc", "linuxfb", "eglfs", "vkkhrdisplay")
LDD_TIMEOUT_S = 10.0
_NOT_FOUND = re.compile(r"^\s*(\S+)\s*=>\s*not found", re.MULTILINE)


def display_problem(env: Mapping[str, str] | None = None, *,
                    missing: Callable[[str], list[str]] | None = None,
                    x_server_answers: Callable[[str], bool] | None = None) -> str | None:
    """What keeps Qt from opening a window with ``env`` (default: this process's), or None.

    ``missing(plugin)`` lists the sonames the platform plugin (``xcb`` or ``wayland``) cannot load, and
    ``x_server_answers(display)`` says whether an X server answers there; both default to the real checks.
    """
    env = os.environ if env is None else env
    missing = missing or missing_libraries
    x_server_answers = x_server_answers or x_server_reachable
    # QT_QPA_PLATFORM may list platforms to try in turn ("wayland;xcb"), each with options after a colon.
    platforms = [entry.split(":")[0].strip() for entry in env.get("QT_QPA_PLATFORM", "").split(";") if entry.strip()]
    if any(platform in HEADLESS_PLATFORMS for platform in platforms) \
            or not sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return None
    if any(platform not in ("xcb", "wayland") for platform in platforms):
        return None  # a platform we know nothing of: let Qt say
    display, wayland = env.get("DISPLAY", "").strip(), env.get("WAYLAND_DISPLAY", "").strip()
    displays = {"xcb": display, "wayland": wayland}
    candidates = platforms or ["xcb", "wayland"]  # unset: Qt picks by the session, X when DISPLAY is set
    plugin = next((platform for platform in candidates if displays[platform]), None)
    if plugin is None:
        return no_display_message(candidates[0])
    absent = missing(plugin)
    if absent:
        return missing_libraries_message(f"Qt's {plugin} platform plugin", absent)
    if plugin == "xcb" and not x_server_answers(display):
        return (f"knowledge desktop: no X server answers on DISPLAY={display}. Start one (or log in to the "
                "desktop), check DISPLAY and xauth (ssh -X forwards both), or run the engine without a window: "
                "knowledge serve")
    return None


def no_display_message(plugin: str) -> str:
    variable = "DISPLAY" if plugin == "xcb" else "WAYLAND_DISPLAY"
    return (f"knowledge desktop: no display to open the window on ({variable} is not set). Run it inside a "
            "desktop session, over ssh -X, or under a virtual X server (xvfb-run knowledge desktop). Without a "
            "window, `knowledge serve` runs the engine and every other knowledge command works beside it; "
            "QT_QPA_PLATFORM=offscreen runs the window without showing it.")


def missing_libraries_message(what: str, sonames: list[str]) -> str:
    """``what`` (Qt, or one of its platform plugins) cannot load ``sonames``: the packages to install."""
    packages = sorted({DEBIAN_PACKAGES.get(name, name) for name in sonames})
    unknown = sorted(name for name in sonames if name not in DEBIAN_PACKAGES)
    return (f"knowledge desktop: {what} cannot load {', '.join(sorted(set(sonames)))}. "
            f"On Debian or Ubuntu install them with: sudo apt-get install {' '.join(packages)}"
            + (f" (the packages providing {', '.join(unknown)}, under those names or your system's)" if unknown
               else "")
            + "; on other systems, the packages that provide those libraries.")


def platform_plugin(plugin: str) -> Path | None:
    """The installed PySide6's platform plugin file for ``plugin`` (``xcb``, ``wayland``), if there is one."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "Qt" / "plugins" / "platforms"
    names = [f"libq{plugin}.so"] + ([] if plugin == "xcb" else ["libqwayland-generic.so", "libqwayland-egl.so"])
    return next((folder / name for name in names if (folder / name).is_file()), None)


def missing_libraries(plugin: str) -> list[str]:
    """Sonames the plugin links against that the loader cannot find (none known when ldd is absent).

    The plugin is loaded first, as Qt will load it (the libraries it needs are Qt's and the window system's,
    which the window loads anyway); only when that fails is ``ldd`` asked which are missing, which would
    otherwise cost every start a process (about 0.1 s before the first paint)."""
    path = platform_plugin(plugin)
    ldd = shutil.which("ldd")
    absent: list[str] = []
    if path is not None and ldd is not None and not _loadable(str(path)):
        try:
            listing = subprocess.run([ldd, str(path)], capture_output=True, text=True, timeout=LDD_TIMEOUT_S,
                                     check=False).stdout
        except (OSError, subprocess.SubprocessError):
            listing = ""
        absent = list(dict.fromkeys(_NOT_FOUND.findall(listing)))
    if plugin == "xcb" and XCB_CURSOR not in absent and not _loadable(XCB_CURSOR):
        absent.append(XCB_CURSOR)
    return absent


def _loadable(soname: str) -> bool:
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def x_server_reachable(display: str) -> bool:
    """Whether an X server accepts a connection on ``display`` (libxcb's own connect, as Qt's will be)."""
    try:
        xcb = ctypes.CDLL("libxcb.so.1")
    except OSError:
        return True  # then the missing library is the problem, and was named
    xcb.xcb_connect.restype = ctypes.c_void_p
    xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    xcb.xcb_disconnect.argtypes = [ctypes.c_void_p]
    connection = xcb.xcb_connect(display.encode(), None)
    try:
        return xcb.xcb_connection_has_error(connection) == 0
    finally:
        xcb.xcb_disconnect(connection)
