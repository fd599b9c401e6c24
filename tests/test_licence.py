"""The licences a reader can reuse the book under: the code under MIT, the prose and figures under CC BY 4.0, the
MIT-BIH excerpt under ODC-By 1.0 with its attribution beside it; in the repository, the package metadata, the
book's footer and the README."""

from __future__ import annotations

import re
import tomllib

import yaml

from booktools.paths import README, ROOT

DATA_NOTE = ROOT / "support" / "ecg" / "data" / "mitdb_208_excerpt.md"
#: Every MIT-BIH record the package ships has its note (attribution, licence, checksums) beside it.
DATA_NOTES = sorted((ROOT / "support" / "ecg" / "data").glob("mitdb_*.md"))


def test_the_code_is_mit_and_the_prose_and_figures_cc_by_and_the_content_licence_names_what_exists():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")
    content = (ROOT / "LICENSE-CONTENT").read_text()
    assert "Creative Commons" in content and "CC BY 4.0" in content
    assert "https://creativecommons.org/licenses/by/4.0/legalcode" in content
    named = re.findall(r"\b((?:support|booktools|tests|chapters|_static|drafts)/[\w./*-]*)", content)
    assert named and all(list(ROOT.glob(path.rstrip("/'"))) for path in named), named


def test_the_mit_bih_records_keep_their_attribution_and_licence_beside_them():
    assert [note.name for note in DATA_NOTES] == ["mitdb_100.md", "mitdb_208_excerpt.md"]
    for note in DATA_NOTES:
        text = note.read_text()
        assert "ODC-By 1.0" in text and "Moody GB, Mark RG" in text and "Goldberger AL" in text, note.name
    assert (DATA_NOTE.parent / "mitdb_208_excerpt.npz").exists() and (DATA_NOTE.parent / "100.dat").exists()


def test_the_package_metadata_carries_the_licence_and_its_files():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    assert project["license"] == "MIT AND ODC-By-1.0"
    assert all((ROOT / path).exists() for path in project["license-files"])
    assert "LICENSE" in project["license-files"]
    assert all(str(note.relative_to(ROOT)) in project["license-files"] for note in DATA_NOTES)
    # PEP 639's license expression needs setuptools 77 or newer
    assert pyproject["build-system"]["requires"] == ["setuptools>=77"]


def test_every_page_s_footer_names_the_three_licences():
    footer = yaml.safe_load((ROOT / "_config.yml").read_text())["html"]["extra_footer"]
    for link in (
        "https://opensource.org/license/mit",
        "https://creativecommons.org/licenses/by/4.0/",
        "https://opendatacommons.org/licenses/by/1-0/",
    ):
        assert f'href="{link}"' in footer


def test_the_readme_says_which_licence_covers_what_and_what_reading_needs():
    readme = README.read_text()
    licence = readme.split("## Licence", 1)[1].split("\n## ", 1)[0]
    for name in (
        "[`LICENSE`](LICENSE)",
        "[`LICENSE-CONTENT`](LICENSE-CONTENT)",
        "ODC-By 1.0",
        *(n.name for n in DATA_NOTES),
    ):
        assert name in licence, name
    measured = r"`make test` installs .* into `\.venv`: [\d.]+ GB \(`du -sh \.venv`,\s+measured on \d{4}-\d\d-\d\d"
    assert re.search(measured, readme)
    assert re.search(r"`make book` alone installs the `book`\s+extra only", readme)
