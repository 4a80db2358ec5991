"""Where a statement's time goes: EXPLAIN (ANALYZE, BUFFERS) condensed to planning, execution and the plan nodes
that took the most time of their own (a node's time minus its children's)."""

from typing import Any

from sqlalchemy import text


async def explain(session: Any, sql: str, params: dict[str, Any], *, top: int = 6) -> str:
    plan = (await session.execute(text(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}"), params)).scalar_one()
    return _condensed(plan[0], top)


async def explain_sent(session: Any, statement: str, parameters: Any, *, top: int = 6) -> str:
    """`explain` of a statement as it reached the driver (SQLAlchemy's before_cursor_execute: `$n` placeholders)."""
    connection = await session.connection()
    plan = (await connection.exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {statement}", parameters)).scalar_one()
    return _condensed(plan[0], top)


def _condensed(root: dict[str, Any], top: int) -> str:
    nodes: list[tuple[float, str]] = []
    _walk(root["Plan"], nodes, _cte_times(root["Plan"]), "")
    nodes.sort(reverse=True)
    lines = [f"planning {root['Planning Time']:.2f} ms, execution {root['Execution Time']:.2f} ms; own time by node:"]
    lines += [f"    {ms:7.2f} ms  {label}" for ms, label in nodes[:top]]
    return "\n".join(lines)


def _total(node: dict[str, Any]) -> float:
    total: float = node.get("Actual Total Time", 0.0) * node.get("Actual Loops", 1)
    return total


def _cte_name(node: dict[str, Any]) -> str | None:
    name = node.get("Subplan Name", "")
    return name.removeprefix("CTE ") if name.startswith("CTE ") else None


def _cte_times(node: dict[str, Any]) -> dict[str, float]:
    """A CTE runs inside the CTE Scans that read it: its time is counted in them, and in its own plan."""
    times = {name: _total(node)} if (name := _cte_name(node)) else {}
    for child in node.get("Plans", []):
        times |= _cte_times(child)
    return times


def _walk(node: dict[str, Any], out: list[tuple[float, str]], ctes: dict[str, float], within: str) -> None:
    """Appends (own ms, label) for `node` and its subtree: its time minus its children's (and, for a CTE Scan,
    minus the CTE's own plan, listed separately)."""
    within = _cte_name(node) or within
    children = [c for c in node.get("Plans", []) if not _cte_name(c)]
    own = _total(node) - sum(_total(c) for c in children)
    if node["Node Type"] == "CTE Scan":
        own -= ctes.get(node.get("CTE Name", ""), 0.0)
    where = node.get("Index Name") or node.get("Relation Name") or node.get("CTE Name") or ""
    label = (
        f"{node['Node Type']}{' on ' + where if where else ''}{f' [in {within}]' if within else ''}"
        f" (rows {node.get('Actual Rows', 0):g} x {node.get('Actual Loops', 1)} loops,"
        f" shared hit {node.get('Shared Hit Blocks', 0)} read {node.get('Shared Read Blocks', 0)})"
    )
    out.append((max(own, 0.0), label))
    for child in node.get("Plans", []):
        _walk(child, out, ctes, within)
