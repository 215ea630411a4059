"""Time as every record stores it: "YYYY-MM-DD HH:MM:SS" UTC, the engram CLI's format."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import lru_cache

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # the engram CLI's timestamp format, UTC


class TimeRangeError(ValueError):
    """A well-formed time that falls outside years 1 to 9999 once converted to UTC."""


def utc_now() -> datetime:
    """Returns the real clock, UTC to the second: the one place it is read (tests move it here)."""
    return datetime.now(timezone.utc).replace(microsecond=0)


def day_start(moment: datetime) -> datetime:
    """Returns 00:00:00 UTC of `moment`'s day: the instant memory pages show strength at."""
    return moment.astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)


def next_day(moment: datetime) -> datetime:
    """Returns 00:00:00 UTC of the day after `moment`'s: when the pages' strengths move next."""
    return day_start(moment) + timedelta(days=1)


def format_time(moment: datetime) -> str:
    """Returns `moment` as "YYYY-MM-DD HH:MM:SS" UTC (years before 1000 zero-padded, unlike strftime's %Y)."""
    return moment.astimezone(timezone.utc).replace(tzinfo=None).isoformat(sep=" ", timespec="seconds")


@lru_cache(maxsize=200_000)
def parse_time(text: str) -> datetime:
    """Returns an aware UTC datetime from "YYYY-MM-DD HH:MM:SS" (or ISO 8601); raises ValueError.

    A time out of range once in UTC raises TimeRangeError (a ValueError), never OverflowError.
    """
    try:
        moment = datetime.strptime(text, TIME_FORMAT)
    except ValueError:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    try:
        return moment.astimezone(timezone.utc)
    except OverflowError:  # 9999-12-31T23:59:59-01:00 is past the last datetime once in UTC
        # a ValueError, so every "bad time: quarantine or skip" path handles it like any bad time
        raise TimeRangeError(f"{text[:40]!r} is out of range once converted to UTC (years 1 to 9999)") from None


def engram_time(text: str) -> str:
    """Returns a timestamp as engram writes it, "YYYY-MM-DD HH:MM:SS" UTC (as given if unparseable)."""
    try:
        return format_time(parse_time(text))
    except (TypeError, ValueError):
        return text
