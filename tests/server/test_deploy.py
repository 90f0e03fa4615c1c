"""deploy/: what can be checked on a machine that cannot pull container images.

HAProxy's own parser checks deploy/haproxy.cfg, as shipped and as deploy/local_cluster.py runs it; the compose
file and the Kubernetes manifest are parsed and checked for the pieces that must fit together (the sticky cookie,
the health endpoint, ports, labels, the shared cookie secret); the Dockerfile's key lines are asserted. Then the
failover itself, end to end: two app processes behind Debian's HAProxy, a session through the proxy, the process
holding it killed; the session must come back after one reconnect, on the other process, with its own page, while
a session on the other process never notices. HAProxy is required in CI (apt-get install -y haproxy; .ci/run does it);
elsewhere the tests that start it skip, saying so, where it is missing (system_deps.unavailable).
"""

from __future__ import annotations

import http.server
import os
import re
import shutil
import subprocess
import threading
import time
import tomllib
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlencode

import pytest
import yaml

from deploy.local_cluster import CONFIG, LocalCluster, check_config, local_config
from harness.checks import check_run, session_query, settings_from_query
from harness.drive import SessionLog, run_or_reconnect
from harness.server import HOST, free_port, stop_process
from harness.session import Session

from ..system_deps import unavailable

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


@pytest.fixture(scope="module")
def haproxy() -> str:
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if found is None:
        unavailable("haproxy is not installed: apt-get install -y haproxy (.ci/run installs it in CI)")
    return found


def test_the_shipped_haproxy_config_is_valid_and_sticky(haproxy):
    output = subprocess.run([haproxy, "-c", "-f", str(CONFIG)], capture_output=True, text=True, timeout=30)
    assert output.returncode == 0, output.stdout + output.stderr
    text = CONFIG.read_text()
    for line in (
        "cookie STREAMLIT_SERVER insert",
        "option redispatch",
        "option httpchk GET /_stcore/health",
        "timeout tunnel",
        "balance leastconn",
        "server-template app 1-8 app:8501",
    ):
        assert line in text, line


def test_the_local_config_differs_only_in_its_servers(haproxy, tmp_path):
    generated = local_config([8601, 8602, 8603])
    path = tmp_path / "local.cfg"
    path.write_text(generated)
    assert "valid" in check_config(path).lower()
    servers = re.findall(r"^\s*server (app\d) 127\.0\.0\.1:(\d+)$", generated, re.MULTILINE)
    assert servers == [("app1", "8601"), ("app2", "8602"), ("app3", "8603")]
    shipped = [line for line in CONFIG.read_text().splitlines() if "server-template" not in line.split("#")[0]]
    local = [line for line in generated.splitlines() if not re.match(r"^\s*server app\d ", line)]
    assert local == shipped, "everything but the server list is the shipped config"


def test_an_invalid_config_is_reported(haproxy, tmp_path):
    path = tmp_path / "bad.cfg"
    path.write_text(local_config([8601]).replace("balance leastconn", "balance nonsense"))
    with pytest.raises(ValueError, match="balance only supports"):
        check_config(path)


class _AnyPath(http.server.BaseHTTPRequestHandler):
    """A stand-in app process: 200 and the path for every GET, as Streamlit answers /_stcore/metrics."""

    def do_GET(self):  # noqa: N802 (the standard library's name)
        body = f"served {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:  # not listening yet
        return 0


def test_the_proxy_closes_streamlits_metrics_to_visitors(haproxy, tmp_path):
    """Streamlit 1.67 serves /_stcore/metrics to anyone and cannot close it; the shipped config answers 404 for it,
    in every spelling that reaches the same route, and passes everything else (the health check included)."""
    backend = http.server.ThreadingHTTPServer((HOST, 0), _AnyPath)
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    config = tmp_path / "proxy.cfg"
    config.write_text(local_config([backend.server_address[1]]))
    port = free_port()
    proxy = subprocess.Popen(
        [haproxy, "-db", "-f", str(config)],
        env=dict(os.environ, HAPROXY_BIND=f"{HOST}:{port}"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + 20
        while _status(f"{url}/_stcore/health") != 200:  # up once HAProxy's own health check passed twice
            assert proxy.poll() is None and time.monotonic() < deadline, "haproxy did not come up"
            time.sleep(0.2)
        for closed in (
            "/_stcore/metrics",
            "/_stcore/metrics?families=session_state",
            "/base/_stcore/metrics",
            "/_stcore/%6detrics",
            "/_stcore//metrics",
            "/_STCORE/METRICS",
        ):
            assert _status(url + closed) == 404, closed
        for open_ in ("/", "/_stcore/health", "/_stcore/host-config", "/Real_heads?model=own"):
            assert _status(url + open_) == 200, open_
    finally:
        stop_process(proxy, 10)
        backend.shutdown()


def test_compose_runs_replicas_behind_haproxy_with_this_config():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    app, proxy = compose["services"]["app"], compose["services"]["haproxy"]
    assert app["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert app["deploy"]["replicas"] >= 2
    assert "8501" in app["expose"]
    assert "STREAMLIT_SERVER_COOKIE_SECRET" in app["environment"]
    assert proxy["image"].startswith("haproxy:")
    assert "./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro" in proxy["volumes"]
    assert proxy["ports"] == ["8080:8080"], "haproxy.cfg binds :8080 by default"
    assert proxy["depends_on"]["app"]["condition"] == "service_healthy"
    assert ":8080" in CONFIG.read_text() and "app:8501" in CONFIG.read_text(), "the service name and port match"


def test_the_kubernetes_example_fits_together():
    docs = {doc["kind"]: doc for doc in yaml.safe_load_all((DEPLOY / "k8s.yaml").read_text())}
    assert set(docs) == {"Deployment", "Service", "Ingress"}
    deployment, service, ingress = docs["Deployment"], docs["Service"], docs["Ingress"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == labels == service["spec"]["selector"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["ports"] == [{"name": "http", "containerPort": 8501}]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/_stcore/health", "port": "http"}
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    assert [e["name"] for e in container["env"]] == ["STREAMLIT_SERVER_COOKIE_SECRET"]
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600, "websockets stay open"
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": service["metadata"]["name"], "port": {"name": "http"}}


def test_the_dockerfile_builds_the_production_image():
    lines = [line.strip() for line in (DEPLOY / "Dockerfile").read_text().splitlines()]
    text = "\n".join(lines)
    assert lines[[line.startswith("FROM") for line in lines].index(True)] == "FROM python:3.11-slim"
    assert "--index-url https://download.pytorch.org/whl/cpu torch==2.13.0+cpu" in text
    pipfile = tomllib.loads((ROOT / "Pipfile").read_text())
    index = {source["name"]: source["url"] for source in pipfile["source"]}[pipfile["packages"]["torch"]["index"]]
    assert f"--index-url {index} torch{pipfile['packages']['torch']['version']}" in text, "as the Pipfile takes it"
    assert "COPY .streamlit/ .streamlit/" in text, "the production config"
    serve = lines.index('RUN python -c "from explorer.glue.frame.chart import serve_plotly_js; serve_plotly_js()"')
    user = [line for line in lines if line.startswith("USER ")]
    assert serve < lines.index(user[-1]), "the static folder is written before the app's user, who cannot"
    assert user and user[-1] not in ("USER root", "USER 0")
    assert re.search(r"HEALTHCHECK .*\n?.*/_stcore/health", text)
    assert lines[-1] == 'CMD ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0"]'
    for copied in re.findall(r"^COPY (\S+) ", text, re.MULTILINE):
        assert (ROOT / copied).exists(), f"{copied} is in the repository"


def test_a_killed_process_costs_its_session_one_reconnect_and_no_one_else_anything(haproxy):
    query, other_query = urlencode(session_query(3)), urlencode(session_query(4))
    expected, other_expected = settings_from_query(query), settings_from_query(other_query)
    with LocalCluster(2, name="test-deploy") as cluster:
        session = Session(cluster.port, query, timeout=60).connect()
        first = session.run()
        assert first.ok and not check_run(first, expected).cross_talk, first.errors or first.status
        assert session.cookies.get("STREAMLIT_SERVER"), "HAProxy set the sticky cookie on the websocket handshake"
        counts = cluster.active_sessions()
        assert sorted(counts) == [0, 1]
        holder = counts.index(1)

        twin = Session(cluster.port, query, timeout=60)  # a second websocket of the same browser: same cookie
        twin.cookies = dict(session.cookies)
        with twin:
            assert cluster.active_sessions()[holder] == 2, "the cookie sent it to the same process"
        other = Session(cluster.port, other_query, timeout=60).connect()  # a new visitor: the idle process
        assert other.run().ok
        assert cluster.active_sessions() == [1, 1]

        cluster.kill(holder)
        log, other_log = SessionLog(3, query), SessionLog(4, other_query)
        moved = replace(expected, seed=expected.seed + 1)
        result, shown = run_or_reconnect(
            session, [session.widget("w_seed", double_value=float(moved.seed))], log, moved
        )
        assert log.reconnects == 1
        assert result.ok, result.errors or result.status
        assert shown in (moved, expected), "its own settings, before or after the change cut off with its server"
        assert not check_run(result, shown).cross_talk
        assert cluster.active_sessions()[holder] == -1 and cluster.active_sessions()[1 - holder] == 2
        assert session.cookies["STREAMLIT_SERVER"] != twin.cookies["STREAMLIT_SERVER"], "re-pinned to the survivor"

        moved_other = replace(other_expected, seed=other_expected.seed + 1)
        widget = other.widget("w_seed", double_value=float(moved_other.seed))
        result, shown = run_or_reconnect(other, [widget], other_log, moved_other)
        assert other_log.reconnects == 0 and result.ok and shown == moved_other
        assert not check_run(result, moved_other).cross_talk
        session.close()
        other.close()
        assert cluster.server_errors() == []
