"""Import jobs (POST …/archival/import) watched as a client would: polled until they get where a test waits for."""

import time
from typing import Any

from tests.support.service import ApiClient


def wait_for(api: ApiClient, path: str, until: Any, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = api.get(path).json()
        if until(job):
            return job
        assert time.monotonic() < deadline, f"the job did not get there: {job}"
        time.sleep(0.1)


def ended(job: dict[str, Any]) -> bool:
    return job["status"] in ("done", "cancelled", "failed")
