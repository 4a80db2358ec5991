"""`engram serve` on its embedded PostgreSQL stops that server on every graceful exit, SIGTERM included (what
`docker stop`, systemd and Kubernetes send): no orphan is left to be reused or fought over by the next start."""

import signal
import tempfile

import psutil
import pytest

from tests.service_process import start_service, stop_service


def postgres_of(data_dir: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        try:
            if process.info["name"] == "postgres" and any(data_dir in part for part in process.info["cmdline"] or []):
                found.append(process)
        except psutil.Error:
            continue
    return found


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_a_graceful_exit_stops_the_embedded_postgres(stop_signal: signal.Signals) -> None:
    with tempfile.TemporaryDirectory(prefix="engram-embedded-") as data_dir:
        process, _ = start_service({"ENGRAM_DATA_DIR": data_dir, "ENGRAM_EMBEDDING_THREADS": "1"})
        try:
            assert postgres_of(data_dir), "the service did not start its embedded PostgreSQL"
            process.send_signal(stop_signal)
            assert process.wait(timeout=60) is not None
        finally:
            stop_service(process)
        _, alive = psutil.wait_procs(postgres_of(data_dir), timeout=10)
        assert not alive, f"embedded PostgreSQL left running after {stop_signal.name}"
