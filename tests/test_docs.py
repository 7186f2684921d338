"""The documentation's links lead somewhere: every relative link of README.md, BENCHMARKS.md
and the docs points to a file of the repository, and every #anchor to a heading of it (the
tables of bench/tables/ are checked as parts of BENCHMARKS.md, whose links they hold)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted(
    [
        REPO / "README.md",
        REPO / "BENCHMARKS.md",
        REPO / "config" / "README.md",
        REPO / "bench" / "README.md",
        REPO / "workflow" / "profiles" / "README.md",
        *(REPO / "docs").glob("*.md"),
    ]
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def links(path: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", path.read_text()))


def test_the_documents_exist():
    assert all(p.is_file() for p in DOCS), [str(p) for p in DOCS if not p.is_file()]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_points_to_a_file_and_heading(doc):
    broken = []
    for target in links(doc):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        name, _, anchor = target.partition("#")
        path = (doc.parent / name).resolve() if name else doc
        if not path.exists() or REPO not in path.parents:
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.relative_to(REPO)}")
    assert broken == []


def test_slugs_are_githubs():
    assert slug("Integrity: checksums and manifests") == "integrity-checksums-and-manifests"
    assert slug("Progress: `attnsvm status`") == "progress-attnsvm-status"
    assert slug("Run on a cluster") == "run-on-a-cluster"
