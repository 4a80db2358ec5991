"""`engram serve` on its embedded PostgreSQL stops that server on every graceful exit, SIGTERM included (what
`docker stop`, systemd and Kubernetes send): no orphan is left to be reused or fought over by the next start."""

import signal
import tempfile

import httpx
import psutil
import pytest

from testkit.service_process import start_service, stop_service


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


def test_after_a_sigkill_the_next_start_recovers_and_its_clean_stop_stops_postgres() -> None:
    with tempfile.TemporaryDirectory(prefix="engram-embedded-") as data_dir:
        env = {"ENGRAM_DATA_DIR": data_dir, "ENGRAM_EMBEDDING_THREADS": "1"}
        killed, _ = start_service(env)
        killed.kill()  # SIGKILL: no lifespan, no atexit; the server it started lives on
        killed.wait(timeout=30)
        left = postgres_of(data_dir)
        assert left, "expected the killed service's PostgreSQL to survive it"
        process, base = start_service(env)
        try:
            assert httpx.post(f"{base}/v1/agents", json={"name": "after-the-crash"}).status_code == 201
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=60)
        finally:
            stop_service(process)
        _, alive = psutil.wait_procs(postgres_of(data_dir) + left, timeout=10)
        for orphan in alive:  # not to outlive a failed run either
            orphan.terminate()
        assert not alive, "the embedded PostgreSQL outlived the clean stop that followed a SIGKILL"
        assert f"process(es) [{killed.pid}] ended without stopping it" in output


def test_a_service_killed_beside_another_does_not_keep_postgres_up_after_the_others_clean_stop() -> None:
    with tempfile.TemporaryDirectory(prefix="engram-embedded-") as data_dir:
        env = {"ENGRAM_DATA_DIR": data_dir, "ENGRAM_EMBEDDING_THREADS": "1"}
        survivor, _ = start_service(env)
        try:
            killed, _ = start_service(env)  # the second on the same data directory shares the first's server
            killed.kill()
            killed.wait(timeout=30)
            survivor.send_signal(signal.SIGTERM)
            output, _ = survivor.communicate(timeout=60)
        finally:
            stop_service(survivor)
        _, alive = psutil.wait_procs(postgres_of(data_dir), timeout=10)
        for orphan in alive:
            orphan.terminate()
        assert not alive, "the embedded PostgreSQL outlived the clean stop: the killed service still counted as a user"
        assert "left running" not in output, output[-2000:]  # said (a warning) only while another user lives
