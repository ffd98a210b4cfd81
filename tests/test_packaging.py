"""The packaging files are complete and consistent (the bundle itself is built and smoke-tested by .ci/run)."""

import configparser
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINUX = ROOT / "packaging" / "linux"
APP_ID = "dev.knowledgedesk.KnowledgeDesk"


def test_the_desktop_entry_has_what_freedesktop_requires():
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(LINUX / f"{APP_ID}.desktop", encoding="utf-8")
    section = entry["Desktop Entry"]
    assert section["Type"] == "Application" and section["Name"] == "Knowledge Desk"
    assert section["Exec"].split()[:2] == ["knowledge", "desktop"] and section["Icon"] == APP_ID
    assert section["Categories"].endswith(";")


def test_the_desktop_entry_registers_record_links_with_the_window():
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(LINUX / f"{APP_ID}.desktop", encoding="utf-8")
    section = entry["Desktop Entry"]
    assert "x-scheme-handler/knowledge" in section["MimeType"].split(";") and section["MimeType"].endswith(";")
    assert section["Exec"].split() == ["knowledge", "desktop", "%u"]  # the clicked link, as `knowledge open`
    script = (LINUX / "install.sh").read_text()
    assert 'xdg-mime default "$app_id.desktop" x-scheme-handler/knowledge' in script


def test_the_appstream_metadata_names_the_app_and_its_launcher():
    component = ElementTree.parse(LINUX / f"{APP_ID}.metainfo.xml").getroot()
    assert component.get("type") == "desktop-application"
    assert component.findtext("id") == APP_ID
    assert component.find("launchable").text == f"{APP_ID}.desktop"
    version = re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert component.find("releases/release").get("version") == version


def test_the_icons_the_install_script_copies_exist():
    script = (LINUX / "install.sh").read_text()
    sizes = re.search(r"for size in ([\d ]+); do", script).group(1).split()
    for size in sizes:
        assert (ROOT / "packaging" / "icons" / f"knowledge-desk-{size}.png").is_file(), size
    assert (ROOT / "packaging" / "icons" / "knowledge-desk.svg").is_file()


def test_the_spec_bundles_the_ontology_and_no_model_weights():
    spec = (ROOT / "packaging" / "knowledge.spec").read_text()
    assert "engine/vault/ontology.yaml" in spec and 'copy_metadata("knowledge-desk")' in spec
    assert 'collect_data_files("qtawesome")' in spec  # the sidebar's icon fonts
    assert "models.fixtures" in spec  # excluded: the test fixture is not a model to ship
    assert ".onnx" not in spec and "safetensors" not in spec
