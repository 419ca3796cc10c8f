"""A suite's row log (navtrain.row_log): a kept row comes back only for the same key and the same row
definition, and the file is written as each row ends."""

from __future__ import annotations

from pathlib import Path

from navtrain.row_log import RowLog


def test_a_row_comes_back_only_for_the_same_key_and_definition(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    log = RowLog(path, {"suite": "robustness", "episodes": 500, "seed": 3})
    log.put("nominal", {"overrides": []}, {"name": "nominal", "results": {"p": {"success_rate": 0.98}}})
    assert path.is_file()  # written at once
    again = RowLog(path, {"suite": "robustness", "episodes": 500, "seed": 3})
    assert again.get("nominal", {"overrides": []}) == {"name": "nominal", "results": {"p": {"success_rate": 0.98}}}
    assert again.get("nominal", {"overrides": ["randomization.enabled=true"]}) is None  # the row changed
    assert again.get("all", {"overrides": []}) is None  # never run
    assert RowLog(path, {"suite": "robustness", "episodes": 1000, "seed": 3}).get("nominal", {"overrides": []}) is None
    assert RowLog(None, {}).get("nominal", {}) is None  # no file: nothing kept
    path.write_text("not json")
    assert RowLog(path, {"suite": "robustness", "episodes": 500, "seed": 3}).rows == {}  # unreadable: run again


def test_dropping_a_rows_parts_keeps_the_row_and_the_other_rows_parts(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    log = RowLog(path, {"suite": "compare"})
    for name in ("clutter#policy#0", "clutter#policy#1", "clutter#policy", "clutter#dwa#0", "rooms#policy#0"):
        log.put(name, {}, {"n": name})
    log.drop_parts("clutter#policy")
    assert sorted(RowLog(path, {"suite": "compare"}).rows) == ["clutter#dwa#0", "clutter#policy", "rooms#policy#0"]
    log.drop_parts("arenas")  # nothing kept of it: nothing changes
    assert sorted(RowLog(path, {"suite": "compare"}).rows) == ["clutter#dwa#0", "clutter#policy", "rooms#policy#0"]


def test_a_file_under_a_legacy_key_is_read_and_rewritten_under_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    RowLog(path, {"suite": "compare", "bundle": "/old/checkout/bundle"}).put("rooms", {}, {"n": 1})
    new = {"suite": "compare", "bundle": "sha256:0123"}
    assert RowLog(path, new).get("rooms", {}) is None  # the old key alone is another suite
    log = RowLog(path, new, legacy=[{"suite": "compare", "bundle": "/old/checkout/bundle"}])
    assert log.get("rooms", {}) == {"n": 1}
    log.put("clutter", {}, {"n": 2})
    assert RowLog(path, new).get("rooms", {}) == {"n": 1}  # the file now holds the new key
    assert RowLog(path, new, legacy=[{"suite": "compare", "bundle": "/another"}]).get("clutter", {}) == {"n": 2}
