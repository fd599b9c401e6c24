"""The glossary defines the abbreviations the chapters use, each with a source a reader can follow, and is in the
book (the index page lists its terms: Sphinx indexes glossary terms, and the page adds the long forms)."""

from __future__ import annotations

import re

from booktools import notebooks
from booktools.paths import ROOT

GLOSSARY = ROOT / "chapters" / "92_glossary.md"
#: The abbreviations a reader meets in chapters 0-6 and searches for.
REQUIRED = {"CAI", "DLPack", "RMM", "MPS", "UVM", "HMM", "PTDS", "EC57", "AoS", "SoA", "ATS"}


def entries() -> dict[str, str]:
    """``{term: definition}`` of the page's ``{glossary}`` block."""
    block = re.search(r"```\{glossary\}\n(.*?)\n```", GLOSSARY.read_text(), re.S).group(1)
    found, term = {}, None
    for line in block.splitlines():
        if line and not line.startswith(" "):
            term = line.strip()
            found[term] = ""
        elif term:
            found[term] += line.strip() + " "
    return found


def test_the_glossary_is_in_the_book():
    assert "chapters/92_glossary" in notebooks.toc_files()


def test_every_abbreviation_is_defined_with_a_source():
    glossary = entries()
    assert REQUIRED <= set(glossary), f"the glossary lacks {sorted(REQUIRED - set(glossary))}"
    unsourced = [t for t, text in glossary.items() if not re.search(r"\[Source: [^\]]+\]\(https://[^)\s]+\)", text)]
    assert unsourced == [], f"terms without a source link: {unsourced}"


def test_every_term_a_definition_refers_to_is_defined():
    glossary = {term.lower() for term in entries()}
    referred = set(re.findall(r"\{term\}`([^`<]+)`", GLOSSARY.read_text()))
    assert {r.lower() for r in referred} <= glossary, sorted(r for r in referred if r.lower() not in glossary)


def test_the_long_forms_are_index_entries():
    indexed = GLOSSARY.read_text()
    for long_form in ("CUDA Array Interface", "Multi-Process Service", "RAPIDS Memory Manager", "per-thread default"):
        assert re.search(rf"```\{{index\}} single: {long_form}", indexed), long_form
