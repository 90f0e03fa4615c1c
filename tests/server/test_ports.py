"""Under pytest-xdist each worker's servers take ports from a range of their own and logs of their own."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import json; from harness import server\n"
    "ports = [server.free_port() for _ in range(3)]\n"
    "print(json.dumps([ports, server.worker_suffix(), str(server.StreamlitServer().log_path)]))"
)


def probe(worker: str | None, base: str | None = None, check: bool = True):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "MHA_TEST_PORT_BASE")}
    if worker is not None:
        env["PYTEST_XDIST_WORKER"] = worker
    if base is not None:
        env["MHA_TEST_PORT_BASE"] = base
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=check)
    return tuple(json.loads(done.stdout)) if check else done


def test_two_workers_take_ports_from_ranges_that_do_not_meet_and_logs_of_their_own():
    ports0, suffix0, log0 = probe("gw0")
    ports3, suffix3, log3 = probe("gw3")
    assert all(20000 <= p < 20500 for p in ports0) and all(21500 <= p < 22000 for p in ports3), (ports0, ports3)
    assert len(set(ports0)) == 3  # one worker's servers never get the same port either
    assert (suffix0, suffix3) == ("-gw0", "-gw3") and log0 != log3 and log0.endswith("-gw0.log")


def test_outside_xdist_the_os_picks_the_port_and_the_log_keeps_its_name():
    ports, suffix, log = probe(None)
    assert suffix == "" and log.endswith("streamlit-load-test.log")
    assert all(p > 0 for p in ports)


def test_the_port_base_comes_from_the_environment():
    """Two checkouts' suites on one machine: one of them sets MHA_TEST_PORT_BASE and their ranges do not meet."""
    ports0, _, _ = probe("gw0", base="30000")
    ports1, _, _ = probe("gw1", base="30000")
    assert all(30000 <= p < 30500 for p in ports0) and all(30500 <= p < 31000 for p in ports1), (ports0, ports1)


def test_a_bad_port_base_is_refused_with_its_value():
    for bad in ("80", "٣٠٠٠٠", "30000x", "70000"):
        done = probe("gw0", base=bad, check=False)
        assert done.returncode != 0 and f"MHA_TEST_PORT_BASE={bad!r}" in done.stderr, (bad, done.stderr[-300:])
