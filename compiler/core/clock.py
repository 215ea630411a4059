"""Time as every record stores it: "YYYY-MM-DD HH:MM:SS" UTC, the engram CLI's format."""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # the engram CLI's timestamp format, UTC


def format_time(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime(TIME_FORMAT)


@lru_cache(maxsize=200_000)
def parse_time(text: str) -> datetime:
    """Returns an aware UTC datetime from "YYYY-MM-DD HH:MM:SS" (or ISO 8601); raises ValueError."""
    try:
        moment = datetime.strptime(text, TIME_FORMAT)
    except ValueError:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def engram_time(text: str) -> str:
    """Returns a timestamp as engram writes it, "YYYY-MM-DD HH:MM:SS" UTC (as given if unparseable)."""
    try:
        return format_time(parse_time(text))
    except (TypeError, ValueError):
        return text
