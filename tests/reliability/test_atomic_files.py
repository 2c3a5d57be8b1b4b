"""Summaries, cards and latency files are complete or absent: a write that fails half-way (a full disk) leaves the
previous file as it was and no temporary file behind."""

from __future__ import annotations

import os

import pytest

from compact_bert.training.atomic_files import write_text_atomically


def test_failed_write_keeps_the_old_file_and_leaves_nothing_behind(tmp_path, monkeypatch):
    path = tmp_path / "run_summary.json"
    write_text_atomically(path, '{"old": 1}\n')

    def disk_full(descriptor):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left") as error:
        write_text_atomically(path, '{"new": 2}\n' * 1000)
    assert error.value.filename == str(path)  # what the command's one line names
    from compact_bert.cli.main import describe_failure

    assert describe_failure(error.value).startswith(f"compact-bert: {path}: No space left on device")
    assert path.read_text() == '{"old": 1}\n'
    assert sorted(item.name for item in tmp_path.iterdir()) == ["run_summary.json"]


def test_summary_and_card_writers_go_through_the_atomic_writer(tmp_path, monkeypatch):
    """A full disk at the run summary leaves no 0-byte run_summary.json for push and benchmark to trip over."""
    from compact_bert.jobs.run_report import write_summary_and_card

    def disk_full(descriptor):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError):
        write_summary_and_card(tmp_path, {"output_dir": str(tmp_path)})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_files_get_the_mode_a_plain_write_gives(tmp_path, umask):
    """README.md, run_summary.json, latency.json get what ``Path.write_text`` gives under the same umask, not
    mkstemp's 0600, which would leave them unreadable for the other users of a shared model folder."""
    previous = os.umask(umask)
    try:
        write_text_atomically(tmp_path / "atomic.json", "{}\n")
        (tmp_path / "plain.json").write_text("{}\n")
    finally:
        os.umask(previous)
    mode = os.stat(tmp_path / "atomic.json").st_mode & 0o777
    assert mode == os.stat(tmp_path / "plain.json").st_mode & 0o777 == 0o666 & ~umask
