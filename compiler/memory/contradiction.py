"""Contradiction check for the memory write path: English and Spanish, rules only, no model.

Each text is folded (lower case, no accents) and cut into clauses. A clause with a polarity word
("prefers", "usaba", "disabled", "rechazado", "fails") gives stance claims, flipped by a negation
a few words before, on its object ("prefers X") or, for intransitives and participles after a
copula, its subject ("the flag is enabled"); "abandon X for Y", "cambió de X a Y" make X negative
and Y positive. Other clauses give one neutral claim, affirmed or negated ("we never deploy").
Claims conflict when polarities differ on a shared salient term under a comparable predicate and
the negative claim is not narrower than the positive text ("avoids it for quick scripts" refines
"prefers it"). Different values on one anchor ("PostgreSQL 15" vs "16") conflict too. Precision
is favoured: a false positive replaces a memory that should have been merged.

Only statements are compared: a question asserts nothing ("do they ever migrate?"), so its
sentences give no claims. And only short texts (at most MAX_STATEMENTS statements each) can
contradict: an update supersedes one statement, while a record of many (a conversation turn, a
pasted reply) that shares a word and a negation with another is two records, not two versions —
replacing it would drop every other fact it holds.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import Stemmer  # PyStemmer: Snowball's C stemmers, the same stems as the pure-Python package

from compiler.memory.contradiction_words import (  # the rules below use the short names
    CONTRAST as _CONTRAST,
    COPULA as _COPULA,
    DETERMINERS as _DETERMINERS,
    EN_MARK as _EN_MARK,
    ES_MARK as _ES_MARK,
    GENERIC as _GENERIC,
    ID_WORDS as _ID_WORDS,
    LEX as _LEX,
    NEG as _NEG,
    PARTICIPLE as _PARTICIPLE,
    QUAL as _QUAL,
    STOP as _STOP,
    STRONG as _STRONG,
    TO_SIDE as _TO_SIDE,
    VERB_AFTER as _VERB_AFTER,
    WEAK as _WEAK,
)


@dataclass(frozen=True)
class Verdict:
    contradicts: bool
    reason: str  # human-readable, e.g. 'stance on "typescript" flips: prefers → abandon'; "" when not


MAX_STATEMENTS = 2  # sentences per text; past this a text is a record of several facts
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")  # "3.12" and "e.g.," do not end one

_END = r"(?=\s*(?:$|[.,;:!?]|(?:in|for|at|during|by|since|after|now|again)\b))"
_NEGATIONS = r"\bcannot\b|\b\w+n['’]t\b|\bno longer\b|\bnot anymore\b|\bno more\b|\bya no\b"
_STOPPING = r"\bno mas\b|\b(?:stop(?:s|ped|ping)?|quit(?:s|ting)?|ceased?|refuses? to|se niega a|dej\w* de)\b"
_FORMERLY = r"(?<!\bis )(?<!\bare )(?<!\bwas )\bused to\b|\b(?:previously|formerly|anteriormente|solia\w*)\b"
# Multi-word cues become one token before tokenising; the text is already folded.
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|ene|abr|ago|dic)[a-z]*"
_REWRITES = [(re.compile(pattern), repl) for pattern, repl in [
    # Moments are when a statement was made, not values of what it is about: "1:56 pm on 8 May, 2023".
    (r"\b\d{1,2}:\d{2}(?::\d{2})?\s*(?:[ap]\.?m\.?\b)?|\b\d{4}-\d{2}-\d{2}\b", " "),
    (rf"\b\d{{1,2}}(?:st|nd|rd|th)? (?:of |de )?{_MONTH}\b(?:,? \d{{4}})?|\b{_MONTH} \d{{1,2}}\b(?:,? \d{{4}})?", " "),
    (r"\bnot only\b|\bno (?:solo|solamente)\b", " "),  # "not only X but also Y" affirms both
    (r"\b(is|are|was|were|has|have|had)n['’]t\b", r"\1 _neg_"),  # keep the copula
    (_NEGATIONS + "|" + _STOPPING, " _neg_ "),
    (_FORMERLY, " _past_ "),
    (r"\bya que\b", " porque "),
    (r"\b(?:after|tras|despues de) (?=\d)", " at "),  # "after 4pm" restricts; "after the outage" narrates
    (r"\binstead of\b|\brather than\b|\bin place of\b|\ben (?:lugar|vez) de\b|\bantes que\b", " _instead_ "),
    (r"\bin favou?r of\b|\b[ae]n favor de\b", " _to_ "),
    (r"\baway from\b", " _from_ "),
    (r"\b(?:turn|switch|shut)(?:s|ed|ing)? off\b|\b(?:is|are|was|were) off\b" + _END, " is disabled "),
    (r"\b(?:turn|switch)(?:s|ed|ing)? on\b|\b(?:is|are|was|were) on\b" + _END, " is enabled "),
    (r"\b(?:gave|give|gives|giving) up(?: on)?\b", " abandoned "),
    (r"\b(?:get|gets|got|getting) rid of\b", " removed "),
    (r"\b(?:falls?|fell) back\b", " fallback "),
    (r"\bantes\b(?! de\b)", " _past_ "),  # "antes usaba X": a former stance; "antes de" restricts
    (r"['’]s\b", ""),
]]
_TOKEN = re.compile(r"_[a-z]+_|#?[a-z0-9][a-z0-9.+#/-]*[a-z0-9+#]|#?[a-z0-9]|[.,;:!?()]")

_WINDOW = 4  # a negation reaches the first predicate at most this many tokens later
_EN_STEM = Stemmer.Stemmer("english")
_ES_STEM = Stemmer.Stemmer("spanish")


@dataclass(frozen=True)
class _Tok:
    word: str  # folded surface form
    role: str  # term, stance, neg, past, marker, copula, generic, stop, bound
    forms: frozenset[str] = frozenset()  # stems (both languages) of a term; the word of a value
    lex: tuple[str, int, str] | None = None  # (class, polarity, kind) of a stance word
    is_value: bool = False  # a number or versioned name: "15", "v2.3", "m5.large"


@dataclass(frozen=True)
class _Claim:
    cls: str  # like, use, state, approval, health, truth, or neutral
    kind: str  # lexicon kind of the stance word ("neutral" for a neutral claim)
    pol: int  # +1 affirmed / positive, -1 negated / negative
    word: str  # how the text says it, for the reason
    core: tuple[_Tok, ...]  # what the stance is about
    qual: tuple[_Tok, ...]  # restricting phrases: "for quick scripts", "in staging"
    subject: frozenset[str] = frozenset()  # who holds an object stance; empty when unknown


@dataclass(frozen=True)
class _Statement:
    claims: tuple[_Claim, ...]
    terms: tuple[_Tok, ...]
    values: tuple[tuple[_Tok, str, int, _Tok | None], ...]  # (anchor term, value, polarity, the anchor's modifier)
    ids: frozenset[str]  # values that name a thing ("bug 123"), not an attribute


def check_contradiction(old: str, new: str) -> Verdict:
    """Returns whether `new` takes the opposite stance of `old` on a shared thing, and why."""
    old_said, new_said = statements(old), statements(new)
    if not old_said or not new_said or max(len(old_said), len(new_said)) > MAX_STATEMENTS:
        return Verdict(False, "")
    before, after = _analyse(" ".join(old_said)), _analyse(" ".join(new_said))
    for a, b in ((a, b) for a in before.claims for b in after.claims):
        if terms := _conflict(a, b, before, after):
            topic = " ".join(dict.fromkeys(t.word for t in terms))
            return Verdict(True, f'stance on "{topic}" flips: {a.word} → {b.word}')
    change = _value_change(before, after)
    return Verdict(bool(change), change)


@lru_cache(maxsize=16384)
def statements(text: str) -> tuple[str, ...]:
    """Returns the sentences of `text` that state something (questions left out)."""
    found = (part.strip() for part in _SENTENCE_END.split(text))
    return tuple(part for part in found if part and not part.rstrip("\"')] ").endswith("?"))


@lru_cache(maxsize=16384)  # ~1 KB each: a write checks its nearest memories, which recur across writes
def _analyse(text: str) -> _Statement:
    """Returns the claims, terms and anchored values of one memory text."""
    folded = text.lower()
    if not folded.isascii():  # ASCII has no accents to strip (and decomposes to itself)
        folded = "".join(c for c in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(c))
    for pattern, repl in _REWRITES:
        folded = pattern.sub(repl, folded)
    words = _TOKEN.findall(folded)  # apostrophes and other symbols separate words
    spanish = sum(w in _ES_MARK for w in words) > sum(w in _EN_MARK for w in words)
    clauses = _clauses([_classify(w, words[i - 1] if i else "", spanish) for i, w in enumerate(words)])
    claims: list[_Claim] = []
    values: list[tuple[_Tok, str, int, _Tok | None]] = []
    ids: set[str] = set()
    lend: tuple | None = None  # the stance an elliptic clause borrows ("likes Java, but not Go")
    for bound, body in clauses:
        found, lend = _clause_claims(body, lend if bound in _WEAK | _CONTRAST else None)
        claims += found
        _collect_values(body, found, values, ids)
    terms = tuple(t for _, body in clauses for t in body if t.role == "term")
    return _Statement(tuple(claims), terms, tuple(values), frozenset(ids))


@lru_cache(maxsize=8192)
def _classify(word: str, prev: str, spanish: bool) -> _Tok:
    """Returns the token of `word` with its role; `prev` tells verbs from nouns ("the fix")."""
    for role, words in (("neg", _NEG), ("past", {"_past_"}), ("marker", {"_from_", "_to_", "_instead_"}),
                        ("bound", _STRONG | _CONTRAST | _WEAK), ("copula", _COPULA), ("stop", _STOP | _QUAL)):
        if word in words:
            return _Tok(word, role)
    if word in _GENERIC:
        return _Tok(word, "generic", frozenset({_GENERIC[word]}))
    if any(c.isdigit() for c in word):
        return _Tok(word, "term", frozenset({word.lstrip("#")}), is_value=True)
    en, es = _EN_STEM.stemWord(word), _ES_STEM.stemWord(word)
    lex = (_LEX.get(es) or _LEX.get(en)) if spanish else (_LEX.get(en) or _LEX.get(es))
    verb = prev not in _DETERMINERS[spanish] and word != "fix" and prev in _VERB_AFTER.get(word, {prev})
    return _Tok(word, "stance" if lex and verb else "term", frozenset({en, es}), lex if verb else None)


def _clauses(toks: list[_Tok]) -> list[tuple[str, list[_Tok]]]:
    """Returns (boundary word, tokens) clauses; a weak piece without a predicate stays joined."""
    out: list[tuple[str, list[_Tok]]] = []
    bound, body = "", []
    for tok in [*toks, _Tok(".", "bound")]:
        if tok.role != "bound":
            body.append(tok)
            continue
        if out and bound in _WEAK and not any(t.role in ("stance", "neg", "past") for t in body):
            out[-1][1].extend(body)
        elif body:
            out.append((bound, body))
        bound, body = tok.word, []
    return out


def _clause_claims(body: list[_Tok], borrowed: tuple | None) -> tuple[list[_Claim], tuple | None]:
    """Returns the claims of one clause and the stance a following elliptic clause may borrow."""
    entries = _stance_words(body)
    if not entries and borrowed is not None and any(t.role == "term" for t in body):
        cls, base, kind, subject = borrowed  # "likes Java, but not Go" → "not likes Go"
        pol = base * (-1) ** sum(t.role == "neg" for t in body)
        word = ("not " if pol != base else "") + "(same verb)"
        return _object_claims(body, cls, pol, kind, word, subject), borrowed
    if not entries:
        pol = -1 if any(t.role == "neg" for t in body) else 1
        return [_Claim("neutral", "neutral", pol, "negated" if pol < 0 else "affirmed", *_split_qual(body))], None
    claims: list[_Claim] = []
    lend = None
    for n, (first, last, cls, pol, base, kind, word) in enumerate(entries):
        before = body[entries[n - 1][1] + 1 if n else 0 : first]
        after = body[last + 1 : entries[n + 1][0] if n + 1 < len(entries) else len(body)]
        subject = frozenset(f for t in body[:first] if t.role in ("term", "generic") for f in t.forms)
        copula = any(t.role == "copula" for t in body[max(0, first - 3) : first])
        passive = kind != "obj" and copula and body[last].word.endswith(_PARTICIPLE)
        found = [] if kind == "subj" or passive else _object_claims(after, cls, pol, kind, word, subject)
        if not any(c.core for c in found) and kind != "obj":
            found = _subject_claims(before, after, cls, pol, kind, word)
        elif kind != "move":
            lend = (cls, base, kind, subject)
        claims += found
    return claims, lend


def _stance_words(body: list[_Tok]) -> list[tuple[int, int, str, int, int, str, str]]:
    """Returns (first, last, class, polarity, base polarity, kind, words) per predicate; a negation
    flips the first one within _WINDOW tokens; adjacent ones chain ("wants to use", "prefers to avoid")
    unless a health or state word is the object of a preference ("prefers working alone")."""
    entries: list[tuple[int, int, str, int, int, str, str]] = []
    pending: list[int] = []
    last_content = -1
    for i, tok in enumerate(body):
        chained = bool(entries) and entries[-1][1] > last_content
        if tok.lex and chained and entries[-1][2] in ("like", "use") and tok.lex[0] not in ("like", "use"):
            body[i] = tok = _Tok(tok.word, "term", tok.forms)
        if tok.role in ("neg", "past"):
            pending.append(i)
        elif tok.role in ("term", "generic"):
            last_content = i
        if tok.role != "stance" or tok.lex is None:
            continue
        cls, base, kind = tok.lex
        flips = sum(1 for p in pending if i - p <= _WINDOW)
        pending = []
        pol = base * (-1) ** flips
        word = ("not " if flips % 2 else "") + tok.word
        if chained:
            first, _, cls, prev_pol, prev_base, _, prev_word = entries.pop()
            entries.append((first, i, cls, prev_pol * pol, prev_base * base, kind, f"{prev_word} {word}"))
        else:
            entries.append((i, i, cls, pol, base, kind, word))
    return entries


def _object_claims(
    after: list[_Tok], cls: str, pol: int, kind: str, word: str, subject: frozenset[str]
) -> list[_Claim]:
    """Returns claims on the object of a stance word, one per segment ("X" for "Y", "from X to Y")."""
    segments: list[tuple[int, list[_Tok], list[_Tok]]] = [(0 if kind == "move" else pol, [], [])]
    in_qual = False
    for tok in after:
        mark = tok.word.strip("_") if tok.role == "marker" else None
        if (kind, tok.word) in (("move", "from"), ("move", "de")):
            mark = "from"
        elif kind == "move" and tok.word in ("to", "a", "hacia", "into") or (kind, tok.word) in _TO_SIDE:
            mark = "to"
        elif tok.word == "over" and cls == "like" and pol > 0:
            mark = "instead"  # "prefers X over Y"
        if mark:
            segments.append((pol if mark == "from" else -pol, [], []))
            in_qual = False
        elif tok.word in _QUAL:
            in_qual = True
        elif tok.role == "term":
            segments[-1][2 if in_qual else 1].append(tok)
    return [_Claim(cls, kind, p, word, tuple(c), tuple(q), subject) for p, c, q in segments if p and c]


def _subject_claims(before: list[_Tok], after: list[_Tok], cls: str, pol: int, kind: str, word: str) -> list[_Claim]:
    """Returns the claim on the subject of an intransitive or passive stance ("X is disabled")."""
    core, qual = _split_qual(before)
    cut = next((i for i, t in enumerate(after) if t.word in ("by", "por")), len(after))
    extra = _split_qual(after[:cut])[1]  # phrases after it restrict it; the agent ("by the team") does not
    claims = [_Claim(cls, kind, pol, word, core, qual + extra)] if core else []
    replaced_by = tuple(t for t in after[cut + 1 :] if t.role == "term")
    if replaced_by and kind == "replace":  # "X was replaced by Y"
        claims.append(_Claim(cls, kind, -pol, word, replaced_by, ()))
    return claims


def _split_qual(toks: list[_Tok]) -> tuple[tuple[_Tok, ...], tuple[_Tok, ...]]:
    """Returns the terms before the first restricting preposition, and the terms after it."""
    cut = next((i for i, t in enumerate(toks) if t.word in _QUAL), len(toks))
    return (tuple(t for t in toks[:cut] if t.role == "term"), tuple(t for t in toks[cut:] if t.role == "term"))


def _collect_values(
    body: list[_Tok], claims: list[_Claim], values: list[tuple[_Tok, str, int, _Tok | None]], ids: set[str]
) -> None:
    """Appends (anchor, value, polarity, modifier) for each number or versioned name of a clause and
    each term near it; the modifier is the term right before an anchor that precedes the value
    ("read" in "read timeout is 30"): it tells one attribute from its namesakes."""
    for k, tok in enumerate(body):
        if tok.role != "term" or not tok.is_value:
            continue
        if tok.word.startswith("#") or (k and body[k - 1].word in _ID_WORDS):
            ids.add(tok.word.lstrip("#"))
            continue
        pol = next((c.pol for c in claims if tok in c.core or tok in c.qual), 1)
        for i in [*range(k - 1, max(0, k - 3) - 1, -1), *range(k + 1, min(len(body), k + 3))]:
            anchor = body[i]
            if anchor.role == "term" and not anchor.is_value:
                before = body[i - 1] if 0 < i < k else None
                values.append((anchor, tok.word, pol, before if before and before.role == "term" else None))


@lru_cache(maxsize=65536)  # the same few stems meet again and again: a third of a check's time
def _close(x: str, y: str) -> bool:
    """Returns whether two stems are one word: equal, a short ending apart, or a long common prefix."""
    short, long = sorted((x, y), key=len)
    common = len(os.path.commonprefix([x, y]))
    if x == y or len(short) < 3:
        return x == y
    return (common == len(short) and len(long) - len(short) <= 2) or (common >= 5 and common >= len(short) - 2)


def _in(tok: _Tok, pool: tuple[_Tok, ...] | list[_Tok]) -> bool:
    """Returns whether a term of `pool` is the same word as `tok` (values must be equal)."""
    if tok.is_value:
        return any(tok.forms == other.forms for other in pool)
    return any(not o.is_value and any(_close(x, y) for x in tok.forms for y in o.forms) for o in pool)


def _conflict(a: _Claim, b: _Claim, sa: _Statement, sb: _Statement) -> list[_Tok]:
    """Returns the shared terms on which claims `a` (old) and `b` (new) disagree; [] when they don't."""
    if a.pol == b.pol:
        return []
    (neg, pos), pos_stmt = ((a, b), sb) if a.pol < 0 else ((b, a), sa)
    if a.cls == b.cls == "neutral":
        # The negation must deny exactly what the other clause affirms ("never deploy on Fridays").
        neg_terms = neg.core + neg.qual
        ok = len(neg_terms) >= 2 and all(_in(t, pos.core + pos.qual) for t in neg_terms)
        return list(neg_terms) if ok else []
    if "neutral" in (a.cls, b.cls):
        (n, n_stmt), (s, s_stmt) = ((a, sa), (b, sb)) if a.cls == "neutral" else ((b, sb), (a, sa))
        n_terms = n.core + n.qual
        shared = [t for t in s.core if _in(t, n_terms)]
        if not shared or sum(_in(t, s_stmt.terms) for t in n_terms) < 2:
            return []  # one shared word is not a shared predicate ("secrets")
        if n.pol < 0 and not all(_in(t, s_stmt.terms) for t in n_terms):
            return []
        return shared if s.pol > 0 or (_not_narrower(s, n_stmt, shared) and all(_in(t, n_stmt.terms) for t in s.core)) else []
    shared = [t for t in neg.core if _in(t, pos.core)]
    if not shared or not _comparable(a, b) or (a.subject and b.subject and not a.subject & b.subject):
        return []  # nothing in common, other predicates, or other holders ("the user" vs "the service")
    return [t for t in a.core if _in(t, b.core)] if _not_narrower(neg, pos_stmt, shared) else []


def _comparable(a: _Claim, b: _Claim) -> bool:
    """Returns whether two stance classes compare; disliking what one still uses is no contradiction."""
    use = a if a.cls == "use" else b
    return a.cls == b.cls or ({a.cls, b.cls} == {"like", "use"} and (use.pol < 0 or use.kind != "part"))


def _not_narrower(neg: _Claim, pos_stmt: _Statement, shared: list[_Tok]) -> bool:
    """Returns True unless the negative claim is restricted to something the positive text lacks."""
    if not all(_in(t, pos_stmt.terms) for t in neg.qual):
        return False  # "avoids it for quick scripts", "disabled in staging"
    unmatched = [t for t in neg.core if not _in(t, pos_stmt.terms)]
    return not any(t.is_value for t in unmatched) and len(unmatched) < max(1, len(shared))


def _value_change(a: _Statement, b: _Statement) -> str:
    """Returns a reason when one anchor carries different values ("PostgreSQL 15" → "16"), else ""."""
    if a.ids and b.ids and a.ids != b.ids:
        return ""  # different bugs or tickets, not a changed attribute
    quals_a = [t for c in a.claims for t in c.qual if not t.is_value]
    quals_b = [t for c in b.claims for t in c.qual if not t.is_value]
    if not all(_in(t, b.terms) for t in quals_a) or not all(_in(t, a.terms) for t in quals_b):
        return ""  # "PostgreSQL 15 in staging" vs "PostgreSQL 16 in production"
    for anchor, old, pol, modifier in a.values:
        olds = {v for x, v, p, _ in a.values if p == pol and _in(x, [anchor])}
        # "read timeout 30" and "write timeout 60" are two attributes, not one that changed
        news = {v for x, v, p, m in b.values if p == pol and _in(x, [anchor])
                and (modifier is None or m is None or _in(m, [modifier]))}
        # a longer version refines a shorter one ("3.12" and "3.12.1"): not a change
        refines = any(n.startswith(o + ".") or o.startswith(n + ".") for o in olds for n in news)
        if news and not olds & news and not refines:
            return f'value of "{anchor.word}" changes: {old} → {sorted(news)[0]}'
    return ""
