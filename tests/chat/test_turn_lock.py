"""The turn lock (app/chat/locks.py): one turn at a time per agent across processes, a PostgreSQL advisory lock
taken in autocommit — without waiting when it is free, within the turn's timeout when another process holds it."""

import asyncio
import uuid

import pytest
from sqlalchemy import event, text

from app import db
from app.chat.locks import AgentBusy, AgentLocks


def test_a_free_lock_is_taken_and_released_in_two_statements(database_url: str) -> None:
    async def run() -> None:
        engine = db.create_engine(database_url, pool_size=1)
        try:
            async with engine.connect() as conn:  # the one pooled connection, whose statements are logged
                driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None  # asyncpg's connection
            sent: list[str] = []  # by the driver itself: the ping, and BEGIN / COMMIT if there were any
            driver.add_query_logger(lambda logged: sent.append(logged.query))
            statements: list[str] = []  # through SQLAlchemy (prepared statements, which the driver does not log)
            event.listen(engine.sync_engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
            async with AgentLocks(engine).hold(uuid.uuid4(), 5):
                assert statements == ["SELECT pg_try_advisory_lock($1)"]
            assert statements[1:] == ["SELECT pg_advisory_unlock($1)"]
            assert sent == ["SELECT 1"]  # the pool's ping; no transaction, no lock_timeout to set and reset
        finally:
            await engine.dispose()

    asyncio.run(run())


def test_a_turn_held_by_another_process_is_waited_for_until_the_timeout(database_url: str) -> None:
    agent = uuid.uuid4()

    async def run() -> None:
        # two engines: two processes, each with its own in-memory queue of turns
        this, other = db.create_engine(database_url, pool_size=1), db.create_engine(database_url, pool_size=1)
        try:
            async with AgentLocks(other).hold(agent, 5):
                with pytest.raises(AgentBusy) as busy:
                    async with AgentLocks(this).hold(agent, 0.3):
                        pytest.fail("the lock was taken twice")
                assert busy.value.headers == {"Retry-After": "1"}
                async with this.connect() as conn:  # no pooled connection keeps the wait's timeout
                    assert (await conn.execute(text("SHOW lock_timeout"))).scalar() == "0"

            async def released_meanwhile() -> None:
                async with AgentLocks(this).hold(agent, 5):
                    pass

            # once the other process lets go, the lock is this one's; and a wait that ends in time takes it too
            await released_meanwhile()
            async with AgentLocks(other).hold(agent, 5):
                waiting = asyncio.create_task(released_meanwhile())
                await asyncio.sleep(0.2)
                assert not waiting.done()
            await asyncio.wait_for(waiting, 5)
            async with this.connect() as conn:  # the connection that waited and took the lock: its timeout unset
                assert (await conn.execute(text("SHOW lock_timeout"))).scalar() == "0"

            # a wait cancelled (its client gone) leaves no lock behind on this process's connection
            async with AgentLocks(other).hold(agent, 5):
                cancelled = asyncio.create_task(released_meanwhile())
                await asyncio.sleep(0.2)
                cancelled.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await cancelled
            async with AgentLocks(other).hold(agent, 0.5):
                pass
        finally:
            await this.dispose()
            await other.dispose()

    asyncio.run(run())
