"""A tool returning a dict: callers receive it as structured JSON."""

from typing import List


def stats(numbers: List[float]) -> dict:
    """Count, sum, mean, min and max of a list of numbers."""
    if not numbers:
        return {"count": 0}
    return {
        "count": len(numbers),
        "sum": sum(numbers),
        "mean": sum(numbers) / len(numbers),
        "min": min(numbers),
        "max": max(numbers),
    }
