"""Tools that use the session store: the `context` parameter is injected by the gateway
(hidden from callers), and whatever the tool leaves in it is written back to the session.
"""

ITEMS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"]


def paginate(page_size: int = 3, context: dict = None) -> list:
    """Return the next page of items; the cursor is kept in the session between calls."""
    cursor = context.get("cursor", 0)
    page = ITEMS[cursor:cursor + page_size]
    context["cursor"] = cursor + len(page) if cursor + len(page) < len(ITEMS) else 0
    return page


def report(target: str, context: dict) -> dict:
    """Report on a target, saying who asked (the caller's identity comes from the session)."""
    return {"target": target, "called_by": context["user"], "groups": context.get("groups", [])}
