"""explorer.glue.memory.budget.server_memory: the server's memory read from the machine, and where it was read.

Fake cgroup trees in tmp_path stand in for a container's (the module's CGROUP_ROOT and PROC_CGROUP point at them):
cgroup v2's ``memory.max``, v1's ``memory.limit_in_bytes``, each with and without a limit, and a process in a nested
cgroup under a parent's limit. ``MHA_SERVER_MB`` wins over all; 690 MB only where nothing is set.
"""

from __future__ import annotations

import pytest

from explorer.glue.cached import real_models
from explorer.glue.memory import budget

MB = budget.MB


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A fake /sys/fs/cgroup and /proc/self/cgroup: write files under ``root`` and a ``proc`` text."""
    root, proc = tmp_path / "cgroup", tmp_path / "proc_self_cgroup"
    root.mkdir()
    proc.write_text("0::/\n")
    monkeypatch.setattr(budget, "CGROUP_ROOT", root)
    monkeypatch.setattr(budget, "PROC_CGROUP", proc)
    monkeypatch.delenv("MHA_SERVER_MB", raising=False)

    def write(relative: str, text: str) -> None:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")

    return write, proc


def test_cgroup_v2_memory_max_is_the_servers_memory(machine):
    write, _ = machine
    write("memory.max", str(24 * 2**30))  # a 24 GB container
    assert budget.server_memory() == (24 * 2**30, "the container's memory limit (cgroup v2 memory.max)")
    assert budget.resident_room() == 24 * 2**30 - budget.WARM_BYTES - budget.CACHE_BYTES - budget.JOB_BYTES


def test_cgroup_v1_limit_in_bytes_is_read_where_there_is_no_v2(machine):
    write, _ = machine
    write("memory/memory.limit_in_bytes", str(2700 * MB))
    assert budget.server_memory() == (2700 * MB, "the container's memory limit (cgroup v1 memory.limit_in_bytes)")


def test_no_limit_set_falls_back_to_690_mb_and_says_so(machine):
    write, _ = machine
    write("memory.max", "max")  # v2 without a limit
    write("memory/memory.limit_in_bytes", "9223372036854771712")  # v1 without a limit
    bytes_, source = budget.server_memory()
    assert bytes_ == 690 * MB == budget.SMALLEST_SERVER_BYTES
    assert source == "the 690 MB default (no MHA_SERVER_MB and no cgroup memory limit)"


def test_no_cgroup_files_at_all_falls_back_to_690_mb(machine):
    assert budget.server_memory()[0] == 690 * MB


def test_a_nested_cgroup_is_bound_by_its_parents_limit(machine):
    """A process's own cgroup (from /proc/self/cgroup) and every parent up to the root: the tightest limit binds."""
    write, proc = machine
    proc.write_text("0::/kubepods/pod1/app\n")
    write("kubepods/memory.max", str(4096 * MB))
    write("kubepods/pod1/memory.max", str(1024 * MB))
    write("kubepods/pod1/app/memory.max", "max")
    assert budget.server_memory() == (1024 * MB, "the container's memory limit (cgroup v2 memory.max)")


def test_a_v1_process_path_that_is_not_mounted_inside_the_container_reads_the_mounted_root(machine):
    """Inside a container the v1 hierarchy is mounted at its own cgroup, while /proc/self/cgroup names the host's
    path (as on this project's machines): the root's file is the container's limit."""
    write, proc = machine
    proc.write_text("4:memory:/process_api/abc\n0::/\n")
    write("memory/memory.limit_in_bytes", str(900 * MB))
    assert budget.server_memory()[0] == 900 * MB


@pytest.mark.parametrize(("raw", "expected_mb", "source"), [("2048", 2048, "MHA_SERVER_MB"), ("abc", 512, None)])
def test_mha_server_mb_wins_over_the_cgroup_limit(machine, monkeypatch, raw, expected_mb, source):
    write, _ = machine
    write("memory.max", str(512 * MB))
    monkeypatch.setenv("MHA_SERVER_MB", raw)  # a value that is not a number of MB is ignored
    bytes_, said = budget.server_memory()
    assert bytes_ == expected_mb * MB
    assert said == (source or "the container's memory limit (cgroup v2 memory.max)")


def test_the_gpt2_notice_names_where_the_memory_was_read(machine, monkeypatch):
    """The notice said "this server's 690 MB" on a 24 GB machine; now it says the number and its source."""
    write, _ = machine
    write("memory.max", str(700 * MB))
    api = type("Api", (), {"gpt2_bytes": staticmethod(lambda tokens: type("B", (), {"kept": 257 * MB})())})
    monkeypatch.setattr(real_models, "_gpt2_api", lambda: api)
    notice = real_models.gpt2_no_room()
    assert "this server has 700 MB (its container's memory limit)" in notice, notice
    write("memory.max", str(24 * 2**30))
    assert real_models.gpt2_no_room() == ""  # 24 GB: GPT-2 fits beside a class
