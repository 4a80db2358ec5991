"""The recollected memories as the section writes them: under the heading of their day, in the order they were said."""

from app.memory.recollection.candidate import Candidate


def arrange(chosen: list[Candidate]) -> list[Candidate]:
    """In the order `render` writes them: under the heading of their day, the day of its best hit placing a heading
    (a conversation's hits often come from a few sessions: a heading per line would cost each of them its day), and
    within a day in the order they were said, so that a day's lines read as its conversation did (a reply after its
    question)."""
    days: dict[str, list[Candidate]] = {}
    for r in chosen:
        days.setdefault(r.heading, []).append(r)
    return [r for rs in days.values() for r in sorted(rs, key=lambda r: (r.occurred_at, r.written))]


def render(chosen: list[Candidate]) -> str | None:
    """The section's lines ("[2023-05-08]" for archival memory, "[conversation, 2023-05-08]" for earlier messages,
    then a line per memory); None for no memories."""
    lines: list[str] = []
    heading = None
    for r in arrange(chosen):
        if r.heading != heading:
            heading = r.heading
            lines.append(heading)
        lines.append(r.item)
    return "\n".join(lines) or None
