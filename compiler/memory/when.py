"""When a query is about: the span of days a question names or implies, read against the clock.

"I mentioned a sports event two weeks ago", "what did I get last Saturday?", "in the past three
months", "in May 2023": recall favours the memories whose own date falls in that span. Only
unambiguous calendar phrases are read (English); a query without one has no span and is ranked
as before. Spans are generous (a week is ± 3 days around "two weeks ago"): people round.

Also whether a question asks for a time ("when did…", "how long…") and whether a text dates
something itself ("yesterday", "two years"): recall favours the memory that says when.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3}
UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
SLACK_DAYS = {"day": 1, "week": 3, "month": 10, "year": 60}  # ± around "N units ago"
WEEKDAYS = {name: number for number, name in enumerate(calendar.day_name)}
MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): number for number, name in enumerate(calendar.month_abbr) if name})

_COUNT = r"(\d+|a couple of|a few|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(day|week|month|year)s?"
_AGO = re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.I)
_PAST = re.compile(rf"\b(?:in|during|over|within)\s+the\s+(?:past|last)\s+(?:{_COUNT}\s+)?{_UNIT}\b", re.I)
_LAST_UNIT = re.compile(r"\blast\s+(week|month|year|weekend)\b", re.I)
_LAST_DAY = re.compile(rf"\blast\s+({'|'.join(WEEKDAYS)})\b", re.I)
_YESTERDAY = re.compile(r"\byesterday\b", re.I)
_MONTH = re.compile(rf"\b(?:in|during|since|of)\s+({'|'.join(m for m in MONTHS if len(m) > 3 or m == 'may')})"
                    r"(?:\s+(\d{4}))?\b", re.I)
_ISO = re.compile(r"\b(\d{4})[-/](\d{1,2})[-/](\d{1,2})\b")


@dataclass(frozen=True)
class Span:
    """The days a query is about: from `start` (inclusive) to `end` (exclusive)."""

    start: datetime
    end: datetime

    def __contains__(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


def query_span(query: str, now: datetime) -> Span | None:
    """Returns the span of days `query` names or implies relative to `now`, or None."""
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    day = timedelta(days=1)
    if found := _AGO.search(query):
        count, unit = _count(found.group(1)), found.group(2).lower()
        centre, slack = today - count * UNIT_DAYS[unit] * day, SLACK_DAYS[unit] * day
        return Span(centre - slack, min(centre + slack + day, now + day))
    if found := _PAST.search(query):
        count, unit = _count(found.group(1) or "1"), found.group(2).lower()
        return Span(today - count * UNIT_DAYS[unit] * day, now + day)
    if found := _LAST_DAY.search(query):
        back = (today.weekday() - WEEKDAYS[found.group(1).capitalize()]) % 7 or 7
        return Span(today - (back + 1) * day, today - (back - 2) * day)
    if found := _LAST_UNIT.search(query):
        unit = found.group(1).lower()
        back = {"weekend": 10, "week": 14, "month": 62, "year": 730}[unit]
        return Span(today - back * day, now + day)
    if _YESTERDAY.search(query):
        return Span(today - 2 * day, now + day)
    if found := _ISO.search(query):
        try:
            moment = today.replace(year=int(found.group(1)), month=int(found.group(2)), day=int(found.group(3)))
        except ValueError:
            return None
        return Span(moment - day, moment + 2 * day)
    if found := _MONTH.search(query):
        month = MONTHS[found.group(1).lower()]
        year = int(found.group(2)) if found.group(2) else today.year - (month > today.month)
        start = today.replace(year=year, month=month, day=1)
        return Span(start, start + calendar.monthrange(year, month)[1] * day)
    return None


def _count(word: str) -> int:
    word = word.lower()
    return int(word) if word.isdigit() else NUMBERS.get(word, 1)


# A question that asks for a time ("When did Jon lose his job?", "How long has she painted?") is
# best answered by the mention of the event that says when it happened ("Lost my job yesterday"),
# not by the later ones that only refer back to it ("Since I lost my job, …"): the words that date
# it are not in the question, so matching alone cannot tell the two apart.
_ASKS_WHEN = re.compile(r"^\s*when\b|\bwhen\s+(?:did|was|is|were|will|does|do|has|have|had)\b|\bhow\s+long\b|"
                        r"\bwhat\s+(?:year|month|day|date|time|week)\b|\bwhich\s+(?:year|month|day|week)\b|"
                        r"\bhow\s+many\s+(?:days|weeks|months|years)\b", re.I)
# Read word by word: one regex of these alternatives took 3× as long (0.26 ms a memory under load).
_ON_ITS_OWN = {"yesterday", "today", "tonight", "tomorrow", "ago", "recently", "lately",
               *(m for m in MONTHS if len(m) > 3)}
_PERIODS = {"day", "night", "week", "weekend", "month", "year", "summer", "winter", "spring", "fall", "autumn",
            "morning", "evening", "afternoon", *(d.lower() for d in WEEKDAYS)}
_BEFORE_PERIOD = {"last", "next", "this", "past", "coming", "other", "few", "several", "couple",
                  *(w for w in NUMBERS if " " not in w)}
_BEFORE_MAY = {"in", "on", "of", "early", "late", "mid"}
_WORD = re.compile(r"[a-z]+|\d+")
# "[1:56 pm on 8 May, 2023] Caroline: …": a log's leading stamp says when the line was written, which
# every line has; what counts is a time the speaker gave.
_STAMP = re.compile(r"^\s*\[[^\]]*\]\s*")


def asks_when(query: str) -> bool:
    """True when `query` asks for a time or a duration ("when did…", "how long…", "what year…")."""
    return bool(_ASKS_WHEN.search(query))


def says_when(text: str) -> bool:
    """True when `text` dates something itself: "yesterday", "last week", "two years", "a few weeks
    ago", "just got", "in May", "2019" (a leading "[…]" stamp does not count)."""
    words = _WORD.findall(_STAMP.sub("", text, count=1).lower())
    for at, word in enumerate(words):
        before = words[at - 1] if at else ""
        if before == "of" and at > 1 and words[at - 2] == "couple":  # "a couple of weeks"
            before = "couple"
        if word in _ON_ITS_OWN or (len(word) == 4 and word[:2] in ("19", "20") and word.isdigit()):
            return True
        if word.rstrip("s") in _PERIODS and (before in _BEFORE_PERIOD or before.isdigit()):
            return True
        if before == "just" and (word == "got" or word.endswith("ed")):
            return True
        if word == "may" and before in _BEFORE_MAY:
            return True
    return False
