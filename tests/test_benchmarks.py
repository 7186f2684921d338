"""BENCHMARKS.md is generated: assembled by bench/tables.py from the tables in bench/tables/,
each written by the benchmark script that measured it, with how it was measured."""

from __future__ import annotations

import datetime as dt
import importlib.util
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _load_tables():
    name = "attnsvm_bench_tables"  # not "tables": PyTables' name, where it is installed
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / "tables.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


tables = _load_tables()


def test_benchmarks_md_is_what_bench_tables_makes():
    """Fails while BENCHMARKS.md is edited by hand or a table changed without rebuilding it
    (run: python bench/tables.py)."""
    assert (REPO / "BENCHMARKS.md").read_text() == tables.assemble()


def test_every_table_states_how_it_was_measured():
    found = tables.read_tables()
    assert found and {t.meta["section"] for t in found} == set(tables.SECTIONS)
    for t in found:
        for field in ("command", "machine", "load", "date", "commit"):
            assert t.meta[field].strip(), (t.name, field)
        assert t.meta["command"].startswith(("python bench/", "time ")), t.name
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", t.meta["date"]), t.name
        assert t.body.startswith("|"), t.name  # a table first, then its notes
        rendered = tables.assemble()
        assert f"### {t.meta['title']}" in rendered and t.render() in rendered
        link = f"[bench/tables/{t.name}.md](bench/tables/{t.name}.md)"
        assert ("\n".join(t.rows) in rendered) == (len(t.rows) - 2 <= tables.MAX_ROWS)
        assert rendered.count(link) == 1 + (len(t.rows) - 2 > tables.MAX_ROWS), t.name


def test_benchmarks_md_is_the_current_figures_in_few_lines(tmp_path):
    """At most MAX_LINES lines: a table's notes stay in its file, a long table is shown by
    its figure and a link to all of its rows."""
    assert len(tables.assemble().splitlines()) <= tables.MAX_LINES
    long = tables.Table("long", "workflow", "A long table", ["n", "seconds"], order=1)
    for n in range(tables.MAX_ROWS + 1):
        long.add(n, n / 10)
    long.note("![the curve](bench/long.png)")
    long.note("How it was measured.")
    long.write(tmp_path)
    text = tables.assemble(tmp_path)
    last = tables.MAX_ROWS
    assert f"| {last} | {last / 10} |" not in text and "How it was measured." not in text
    assert f"![the curve](bench/long.png)\n{last + 1} rows: [bench/tables/long.md]" in text


def test_a_script_writes_its_table_with_machine_load_date_and_commit(tmp_path, capsys):
    table = tables.Table("probe", "workflow", "A probe", ["what", "seconds"], order=99)
    table.add("sleep", "0.01")
    table.add("a | pipe", "0.02")
    table.note("How it was measured.")
    path = table.write(tmp_path)
    assert path == tmp_path / "probe.md"
    assert "| sleep | 0.01 |" in capsys.readouterr().out  # rows are printed as they come
    got = tables.TableFile.read(path)
    assert got.meta["section"] == "workflow" and got.meta["order"] == 99
    assert got.meta["command"].startswith("python ")
    assert re.search(r"\d+ cores \(.+\)", got.meta["machine"])
    assert re.fullmatch(r"\d+\.\d\d at the start, \d+\.\d\d at the end .*", got.meta["load"])
    assert got.meta["date"] == dt.datetime.now(dt.UTC).date().isoformat()
    assert re.fullmatch(r"[0-9a-f]{7}(-dirty)?|unknown", got.meta["commit"])
    assert got.body.splitlines()[:4] == [
        "| what | seconds |",
        "| --- | --- |",
        "| sleep | 0.01 |",
        "| a \\| pipe | 0.02 |",
    ]
    assert got.body.endswith("- How it was measured.")
    # assembled as the tables of bench/tables/ are, which it left alone
    assert "### A probe" in tables.assemble(tmp_path)
    assert (REPO / "BENCHMARKS.md").read_text() == tables.assemble()


def test_a_table_without_its_provenance_is_refused(tmp_path):
    (tmp_path / "bad.md").write_text("---\nsection: workflow\norder: 1\ntitle: t\n---\n| a |\n")
    with pytest.raises(tables.TableError, match=r"bad.md: header lacks \['command'"):
        tables.read_tables(tmp_path)
    head = "order: 1\ntitle: t\ncommand: c\nmachine: m\nload: l\ndate: d\n"
    (tmp_path / "bad.md").write_text(f"---\nsection: nowhere\n{head}commit: 'a'\n---\n|a|\n")
    with pytest.raises(tables.TableError, match="section 'nowhere' is none of"):
        tables.read_tables(tmp_path)
    (tmp_path / "bad.md").write_text(f"---\nsection: gpu\n{head}commit: 0123456\n---\n|a|\n")
    with pytest.raises(tables.TableError, match="quote the commit"):
        tables.read_tables(tmp_path)
    with pytest.raises(tables.TableError, match="section 'nowhere'"):
        tables.Table("x", "nowhere", "t", ["a"])


def test_check_mode_names_a_stale_benchmarks_md(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "BENCHMARKS.md"
    stale.write_text(tables.assemble() + "a line typed by hand\n")
    monkeypatch.setattr(tables, "BENCHMARKS", stale)
    monkeypatch.setattr(sys, "argv", ["bench/tables.py", "--check"])
    assert tables.main() == 1
    assert "BENCHMARKS.md is out of date" in capsys.readouterr().err
    stale.write_text(tables.assemble())
    assert tables.main() == 0
