"""An async tool: the runner awaits coroutines."""

import asyncio


async def slow_hello(name: str, delay: float = 0.1) -> str:
    """Say hello after a short wait."""
    await asyncio.sleep(delay)
    return f"hello {name}"
