"""Contradiction check for the memory write path: English and Spanish, rules only, no model.

Two short memories contradict when they take opposite stances on the same thing. Each text is
folded (lower case, accents stripped), cut into clauses, and each clause becomes claims:

* a stance claim: a polarity word ("prefers", "usaba", "disabled", "rechazado", "fails") with a
  class (preference, state, approval, health, truth), flipped by a negation a few words before
  it, about the terms of its object ("prefers TypeScript") or, for intransitive words and
  participles after a copula, of its subject ("the flag is enabled"). "abandon X for Y",
  "switched from X to Y", "replaced X with Y", "cambió de X a Y" make X negative and Y positive;
* a neutral claim for a clause without a stance word: affirmed or negated ("we never deploy").

Claims conflict when their polarities differ, they share a salient term under a comparable
predicate, and the negative claim is not narrower than the positive text: a negation restricted
by a phrase the other text lacks ("avoid it for quick scripts", "disabled in staging") is a
refinement, not a contradiction. Different values on one anchor ("PostgreSQL 15" vs "16")
conflict too. Precision is favoured: a false positive replaces a memory that should be merged.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer


@dataclass(frozen=True)
class Verdict:
    contradicts: bool
    reason: str  # human-readable, e.g. 'stance on "typescript" flips: prefers → abandon'; "" when not


# --- lexicon --------------------------------------------------------------------------------
# (class, polarity, kind) → stems. Kinds: "part" takes an object unless it is a participle after
# a copula; "obj" always an object; "subj" always the subject (intransitive); "abandon" X for Y;
# "replace" X with Y; "move" from X to Y (polarity -1 is the side that is left).
_EN_SPEC = {
    ("like", 1, "part"): "prefer like love enjoy favor favour want recommend",
    ("like", -1, "part"): "hate dislik despis detest",
    ("like", 1, "obj"): "happi satisfi fan",
    ("like", -1, "obj"): "frustrat annoy unhappi",
    ("use", 1, "part"): "use choos chose chosen adopt pick",
    ("use", -1, "part"): "avoid ban forbid forbidden discourag",
    ("use", -1, "abandon"): "abandon drop ditch dump remov retir deprec sunset",
    ("use", -1, "replace"): "replac substitut swap",
    ("use", -1, "move"): "switch migrat move chang",
    ("state", 1, "part"): "enabl activ",
    ("state", -1, "part"): "disabl deactiv",
    ("state", 1, "subj"): "availabl",
    ("state", -1, "subj"): "unavailabl",
    ("approval", 1, "part"): "approv accept",
    ("approval", -1, "part"): "reject declin deni veto",
    ("health", 1, "part"): "fix resolv",
    ("health", 1, "subj"): "work pass succeed stabl",
    ("health", -1, "subj"): "fail broken broke crash flaki unstabl down",
    ("health", -1, "part"): "break",
    ("truth", 1, "subj"): "true correct accur valid",
    ("truth", -1, "subj"): "fals wrong incorrect inaccur invalid",
}
_ES_SPEC = {
    ("like", 1, "part"): "prefier prefer preferi pref prefiri gust encant quier quer recomiend recomend",
    ("like", -1, "part"): "odi detest",
    ("like", -1, "obj"): "hart frustr molest",
    ("use", 1, "part"): "usa usan uso usab usar usand usad usam utiliz eleg elig eligi adopt",
    ("use", -1, "part"): "evit prohib",
    ("use", -1, "abandon"): "abandon descart elimin dej retir deprec obsolet",
    ("use", -1, "replace"): "reemplaz sustitu",
    ("use", -1, "move"): "camb cambi migr pas mud mov",
    ("state", 1, "part"): "activ habilit encend",
    ("state", -1, "part"): "desactiv desact deshabilit apag",
    ("state", 1, "subj"): "disponibl",
    ("approval", 1, "part"): "aprob acept",
    ("approval", -1, "part"): "rechaz deneg",
    ("health", 1, "part"): "arregl resuelt solucion correg",
    ("health", 1, "subj"): "funcion establ",
    ("health", -1, "subj"): "fall rot romp caid inestabl",
    ("truth", 1, "subj"): "ciert verdad verdader correct",
    ("truth", -1, "subj"): "fals incorrect erron",
}
_EN_LEX = {stem: key for key, stems in _EN_SPEC.items() for stem in stems.split()}
_ES_LEX = {stem: key for key, stems in _ES_SPEC.items() for stem in stems.split()}

# Multi-word cues become one token before tokenising; the text is already folded.
_REWRITES = [
    (re.compile(pattern), repl)
    for pattern, repl in [
        (r"\bnot only\b|\bno (?:solo|solamente)\b", " "),  # "not only X but also Y" affirms both
        (r"\b(is|are|was|were|has|have|had)n't\b", r"\1 _neg_"),  # keep the copula
        (r"\bcan't\b|\bwon't\b|\bcannot\b|\b\w+n't\b", " _neg_ "),
        (r"\bno longer\b|\bnot anymore\b|\bno more\b|\bya no\b|\bno mas\b|\bnunca mas\b", " _neg_ "),
        (r"\b(?:stop(?:s|ped|ping)?|quit(?:s|ting)?|ceased?|refuses? to|se niega a|dej\w* de)\b", " _neg_ "),
        (r"(?<!\bis )(?<!\bare )(?<!\bwas )(?<!\bwere )(?<!\bbe )\bused to\b", " _past_ "),
        (r"\b(?:previously|formerly|anteriormente|solia\w*)\b", " _past_ "),
        (r"\bantes de\b", " before "),
        (r"\bdespues de\b", " after "),
        (r"\bya que\b", " porque "),
        (r"\binstead of\b|\brather than\b|\bin place of\b|\ben (?:lugar|vez) de\b|\bantes que\b", " _instead_ "),
        (r"\bin favou?r of\b|\b[ae]n favor de\b", " _to_ "),
        (r"\baway from\b", " _from_ "),
        (r"\b(?:turn|switch|shut)(?:s|ed|ing)? off\b", " disabled "),
        (r"\b(?:turn|switch)(?:s|ed|ing)? on\b", " enabled "),
        (r"\b(?:gave|give|gives|giving) up(?: on)?\b", " abandoned "),
        (r"\b(?:get|gets|got|getting) rid of\b", " removed "),
        (r"\b(?:falls?|fell) back\b", " fallback "),
        (r"\bantes\b", " _past_ "),  # "antes usaba X": a former stance
        (r"'s\b", ""),
    ]
]
_TOKEN = re.compile(r"_[a-z]+_|#?[a-z0-9][a-z0-9.+#/-]*[a-z0-9+#]|#?[a-z0-9]|[.,;:!?()]")

_NEG = {"_neg_", "not", "no", "never", "nunca", "jamas", "tampoco", "ni", "nor", "none", "nobody", "nadie", "nada"}
_COPULA = set(
    "is are was were be been being es son era eran fue fueron sera seran esta estan estaba estaban estuvo "
    "sigue siguen queda quedo remains remain stays stay get gets got become becomes became seems seem".split()
)
_GENERIC = {w: "@user" for w in "user users usuario usuaria usuarios".split()}
_GENERIC |= {w: "@project" for w in "project projects proyecto proyectos".split()}
_GENERIC |= {w: "@team" for w in "team teams equipo equipos".split()}
_STOP = set(
    "a an the of to and or it its this that these those which who whom what there their they them he she we i you "
    "our my his her your us me all every each any some many much more most too very just still also now then only "
    "already always often usually really again anymore either as so than via does do did done has have had will "
    "would should must can could may might shall need needs here up out about into across between per with by "
    "from over said says say asked asks ask told tell mentioned decided decides decide agreed agrees thinks think "
    "believes noted confirmed trying tries tried try started going "
    "el la los las lo le les un una unos unas de del al y e o u que se su sus mi mis tu nos por con como ahora ya "
    "siempre todo toda todos todas cada muy mas tambien solo aun todavia hoy este estos estas ese esa eso esos esas "
    "hay ha han he hemos a hacia dijo dice pidio pide decidio comento menciono confirmo cree piensa acordo".split()
)
_QUAL = set(
    "in on at for during within without before except unless if when under "
    "para en durante sin salvo excepto si cuando".split()
)
_STRONG = set(".;:!?()") | {"because", "since", "after", "although", "though", "while", "whereas"}
_STRONG |= {"porque", "desde", "tras", "aunque", "mientras"}
_CONTRAST = {"but", "pero", "sino", "however", "yet"}
_WEAK = {",", "and", "or", "y", "e", "o", "u", "then", "luego"}
_EN_DET = {"the", "a", "an", "this", "that", "its", "their", "his", "her", "our", "my", "your"}
_ES_DET = {"el", "la", "los", "las", "un", "una", "unos", "unas", "su", "sus", "del"}
_LIKE_PREV = {"i", "we", "they", "you", "would", "do", "does", "did", "really", "also", "still", "users", "people"}
_WORK_PREV = {"_neg_", "not", "does", "do", "did", "will", "would", "should", "must", "can", "could"}
_ID_WORDS = {"bug", "issue", "ticket", "pr", "incident", "step", "phase", "line", "page", "item", "caso", "fase"}
_ES_MARK = {"el", "la", "los", "las", "de", "del", "que", "y", "es", "esta", "para", "por", "con", "un", "una", "se", "le", "ya", "nunca", "usa"}
_EN_MARK = {"the", "is", "are", "was", "and", "of", "to", "with", "for", "not", "never", "does", "a", "an", "uses"}
_WINDOW = 4  # a negation reaches the first predicate at most this many tokens later
_EN_STEM = snowballstemmer.stemmer("english")
_ES_STEM = snowballstemmer.stemmer("spanish")


@dataclass(frozen=True)
class _Tok:
    word: str  # folded surface form
    role: str  # term, stance, neg, past, marker, copula, generic, stop, bound
    forms: frozenset[str] = frozenset()  # stems (both languages) of a term; the word of a value
    lex: tuple[str, int, str] | None = None  # (class, polarity, kind) of a stance word

    @property
    def is_value(self) -> bool:
        return any(c.isdigit() for c in self.word)


@dataclass(frozen=True)
class _Claim:
    cls: str  # pref, state, approval, health, truth, or neutral
    pol: int  # +1 affirmed / positive, -1 negated / negative
    word: str  # how the text says it, for the reason
    core: tuple[_Tok, ...]  # what the stance is about
    qual: tuple[_Tok, ...]  # restricting phrases: "for quick scripts", "in staging"
    subject: frozenset[str]  # who holds an object stance; empty when unknown or not an object stance


@dataclass(frozen=True)
class _Statement:
    claims: tuple[_Claim, ...]
    terms: tuple[_Tok, ...]
    values: tuple[tuple[_Tok, str, int], ...]  # (anchor term, value, polarity)
    ids: frozenset[str]  # values that name a thing ("bug 123"), not an attribute


def check_contradiction(old: str, new: str) -> Verdict:
    """Returns whether `new` takes the opposite stance of `old` on a shared thing, and why."""
    before, after = _analyse(old), _analyse(new)
    for a in before.claims:
        for b in after.claims:
            term = _conflict(a, b, before, after)
            if term is not None:
                return Verdict(True, f'stance on "{term.word}" flips: {a.word} → {b.word}')
    change = _value_change(before, after)
    return Verdict(bool(change), change)


# --- reading a statement --------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _analyse(text: str) -> _Statement:
    """Returns the claims, terms and anchored values of one memory text."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))
    folded = folded.replace("’", "'")
    for pattern, repl in _REWRITES:
        folded = pattern.sub(repl, folded)
    words = _TOKEN.findall(folded.replace("'", " "))
    spanish = sum(w in _ES_MARK for w in words) > sum(w in _EN_MARK for w in words)
    toks = [_classify(w, words[i - 1] if i else "", spanish) for i, w in enumerate(words)]
    claims: list[_Claim] = []
    values: list[tuple[_Tok, str, int]] = []
    ids: set[str] = set()
    last: tuple[_Claim, str, int, str] | None = None  # stance to lend an elliptic clause ("but not Go")
    for bound, body in _clauses(toks):
        elliptic = last if bound in _WEAK | _CONTRAST else None
        found, last = _clause_claims(body, elliptic)
        claims += found
        _collect_values(body, found, values, ids)
    terms = tuple(t for t in toks if t.role == "term")
    return _Statement(tuple(claims), terms, tuple(values), frozenset(ids))


@lru_cache(maxsize=8192)
def _classify(word: str, prev: str, spanish: bool) -> _Tok:
    """Returns the token of `word` with its role; `prev` disambiguates nouns from verbs."""
    if word in _NEG:
        return _Tok(word, "neg")
    if word in ("_past_", "_from_", "_to_", "_instead_"):
        return _Tok(word, "past" if word == "_past_" else "marker")
    if word in _STRONG or word in _CONTRAST or word in _WEAK:
        return _Tok(word, "bound")
    if word in _COPULA:
        return _Tok(word, "copula")
    if word in _GENERIC:
        return _Tok(word, "generic", frozenset({_GENERIC[word]}))
    if word in _STOP or word in _QUAL:
        return _Tok(word, "stop")
    if any(c.isdigit() for c in word):
        return _Tok(word, "term", frozenset({word.lstrip("#")}))
    en, es = _EN_STEM.stemWord(word), _ES_STEM.stemWord(word)
    lex = (_ES_LEX.get(es) or _EN_LEX.get(en)) if spanish else (_EN_LEX.get(en) or _ES_LEX.get(es))
    if lex and _is_verb(word, prev, spanish):
        return _Tok(word, "stance", frozenset({en, es}), lex)
    return _Tok(word, "term", frozenset({en, es}))


def _is_verb(word: str, prev: str, spanish: bool) -> bool:
    """Returns False for lexicon words used as nouns or prepositions ("the fix", "tools like X")."""
    if prev in (_ES_DET if spanish else _EN_DET):
        return False
    if word == "like":
        return prev in _LIKE_PREV or prev in _NEG or prev in ("", "_neg_")
    if word == "work":
        return prev in _WORK_PREV
    return word != "fix"


def _clauses(toks: list[_Tok]) -> list[tuple[str, list[_Tok]]]:
    """Returns (boundary word, tokens) clauses; a weak piece without a predicate stays joined."""
    pieces: list[tuple[str, list[_Tok]]] = [("", [])]
    for tok in toks:
        if tok.role == "bound":
            pieces.append((tok.word, []))
        else:
            pieces[-1][1].append(tok)
    out: list[tuple[str, list[_Tok]]] = []
    for bound, body in pieces:
        has_predicate = any(t.role in ("stance", "neg", "past") for t in body)
        if out and bound in _WEAK and not has_predicate:
            out[-1][1].extend(body)
        elif body:
            out.append((bound, body))
    return out


def _clause_claims(body: list[_Tok], elliptic: tuple | None) -> tuple[list[_Claim], tuple | None]:
    """Returns the claims of one clause and the stance a following elliptic clause may borrow."""
    entries = _stance_words(body)
    if not entries and elliptic is not None and any(t.role == "term" for t in body):
        cls, base, kind, subject = elliptic  # "likes Java, but not Go" → "not likes Go"
        pol = base * (-1) ** sum(t.role == "neg" for t in body)
        claims = _object_claims(body, cls, pol, kind, ("not " if pol != base else "") + "(same verb)", subject)
        return claims, elliptic
    if not entries:
        pol = -1 if any(t.role == "neg" for t in body) else 1
        core, qual = _split_qual(body)
        return [_Claim("neutral", pol, "negated" if pol < 0 else "affirmed", core, qual, frozenset())], None
    claims: list[_Claim] = []
    lend = None
    for n, (first, last, cls, pol, base, kind, word) in enumerate(entries):
        start = entries[n - 1][1] + 1 if n else 0
        stop = entries[n + 1][0] if n + 1 < len(entries) else len(body)
        before, after = body[start:first], body[last + 1 : stop]
        subject = frozenset(f for t in body[:first] if t.role in ("term", "generic") for f in t.forms)
        copula = any(t.role == "copula" for t in body[max(0, first - 3) : first])
        passive = kind != "obj" and copula and _participle(body[last].word)
        found = [] if kind == "subj" or passive else _object_claims(after, cls, pol, kind, word, subject)
        if not any(c.core for c in found) and kind != "obj":
            found = _subject_claims(before, after, cls, pol, kind, word)
        elif kind not in ("move",):
            lend = (cls, base, kind, subject)
        claims += found
    return claims, lend


def _stance_words(body: list[_Tok]) -> list[tuple[int, int, str, int, int, str, str]]:
    """Returns (first, last, class, polarity, base polarity, kind, words) per predicate.

    A negation flips the first stance word within _WINDOW tokens; stance words with nothing
    said between them chain ("wants to use", "prefers to avoid") and multiply their polarities.
    """
    entries: list[tuple[int, int, str, int, int, str, str]] = []
    pending: list[int] = []
    last_content = -1
    for i, tok in enumerate(body):
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
        if entries and entries[-1][1] > last_content:
            first, _, cls, prev_pol, prev_base, _, prev_word = entries.pop()
            entries.append((first, i, cls, prev_pol * pol, prev_base * base, kind, f"{prev_word} {word}"))
        else:
            entries.append((i, i, cls, pol, base, kind, word))
    return entries


def _participle(word: str) -> bool:
    return word.endswith(("ed", "en", "ado", "ada", "ados", "adas", "ido", "ida", "idos", "idas", "to", "ta", "tos", "tas"))


def _marker(word: str, cls: str, pol: int, kind: str) -> str | None:
    """Returns how `word` splits the object of a stance: from, to, instead, qual, or None."""
    if word in ("_from_", "_to_", "_instead_"):
        return word.strip("_")
    if kind == "move" and word in ("from", "de"):
        return "from"
    if kind == "move" and word in ("to", "a", "hacia", "into"):
        return "to"
    if (kind == "replace" and word in ("with", "con", "por", "by", "for")) or (kind == "abandon" and word in ("for", "por")):
        return "to"
    if word == "over" and cls == "pref" and pol > 0:
        return "instead"
    return "qual" if word in _QUAL else None


def _object_claims(after, cls, pol, kind, word, subject) -> list[_Claim]:
    """Returns claims on the object of a stance word, one per segment ("X" for "Y")."""
    segments: list[tuple[int, list[_Tok], list[_Tok]]] = [(0 if kind == "move" else pol, [], [])]
    in_qual = False
    for tok in after:
        mark = _marker(tok.word, cls, pol, kind)
        if mark in ("from", "to", "instead"):
            segments.append((pol if mark == "from" else -pol, [], []))
            in_qual = False
        elif mark == "qual":
            in_qual = True
        elif tok.role == "term":
            segments[-1][2 if in_qual else 1].append(tok)
    return [_Claim(cls, p, word, tuple(c), tuple(q), subject) for p, c, q in segments if p and c]


def _subject_claims(before, after, cls, pol, kind, word) -> list[_Claim]:
    """Returns the claim on the subject of an intransitive or passive stance ("X is disabled")."""
    core, qual = _split_qual(before)
    extra: list[_Tok] = []
    replaced_by: list[_Tok] = []
    mode = ""
    for tok in after:
        if tok.word in ("by", "por"):
            if kind != "replace":
                break  # the agent ("rejected by the security team") does not narrow the claim
            mode = "by"
        elif tok.word in _QUAL and mode != "by":
            mode = "qual"
        elif tok.role == "term" and mode:
            (replaced_by if mode == "by" else extra).append(tok)
    claims = [_Claim(cls, pol, word, core, qual + tuple(extra), frozenset())] if core else []
    if replaced_by:
        claims.append(_Claim(cls, -pol, word, tuple(replaced_by), (), frozenset()))
    return claims


def _split_qual(toks) -> tuple[tuple[_Tok, ...], tuple[_Tok, ...]]:
    """Returns the terms before the first restricting preposition, and the terms after it."""
    cut = next((i for i, t in enumerate(toks) if t.word in _QUAL), len(toks))
    return (tuple(t for t in toks[:cut] if t.role == "term"), tuple(t for t in toks[cut:] if t.role == "term"))


def _collect_values(body, claims, values, ids) -> None:
    """Appends (anchor, value, polarity) for each number or versioned name of a clause."""
    for k, tok in enumerate(body):
        if tok.role != "term" or not tok.is_value:
            continue
        pol = next((c.pol for c in claims if tok in c.core or tok in c.qual), 1)
        near = [t for t in body[max(0, k - 3) : k][::-1] + body[k + 1 : k + 3] if t.role == "term" and not t.is_value]
        if tok.word.startswith("#") or (k and body[k - 1].word in _ID_WORDS):
            ids.add(tok.word.lstrip("#"))
            continue
        values.extend((anchor, tok.word, pol) for anchor in near)


# --- comparing two statements ---------------------------------------------------------------


def _close(x: str, y: str) -> bool:
    """Returns whether two stems are one word: equal, a short inflection apart, or sharing a long prefix."""
    if x == y:
        return True
    short, long = sorted((x, y), key=len)
    if len(short) < 3:
        return False
    if long.startswith(short) and len(long) - len(short) <= 2:
        return True
    common = len(os.path.commonprefix([x, y]))
    return common >= 5 and common >= len(short) - 2


def _same(a: _Tok, b: _Tok) -> bool:
    if a.is_value or b.is_value:
        return a.forms == b.forms
    return any(_close(x, y) for x in a.forms for y in b.forms)


def _in(tok: _Tok, pool) -> bool:
    return any(_same(tok, other) for other in pool)


def _conflict(a: _Claim, b: _Claim, sa: _Statement, sb: _Statement) -> _Tok | None:
    """Returns the shared term on which claims `a` (old) and `b` (new) disagree, if they do."""
    if a.pol == b.pol:
        return None
    neg, pos_stmt = (a, sb) if a.pol < 0 else (b, sa)
    if a.cls == b.cls == "neutral":
        # The negation must deny exactly what the other clause affirms ("never deploy on Fridays").
        neg_terms = neg.core + neg.qual
        pos_terms = (b.core + b.qual) if neg is a else (a.core + a.qual)
        ok = len(neg_terms) >= 2 and all(_in(t, pos_terms) for t in neg_terms)
        return neg_terms[0] if ok else None
    if "neutral" in (a.cls, b.cls):
        (n, n_stmt), (s, s_stmt) = ((a, sa), (b, sb)) if a.cls == "neutral" else ((b, sb), (a, sa))
        n_terms = n.core + n.qual
        shared = [t for t in s.core if _in(t, n_terms)]
        if not shared or sum(_in(t, s_stmt.terms) for t in n_terms) < 2:
            return None  # one shared word is not a shared predicate ("secrets")
        if n.pol < 0 and not all(_in(t, s_stmt.terms) for t in n_terms):
            return None
        return shared[0] if s.pol > 0 or _not_narrower(s, n_stmt, shared) else None
    if a.cls != b.cls:
        return None
    shared = [t for t in a.core if _in(t, b.core)]
    if not shared or (a.subject and b.subject and not a.subject & b.subject):
        return None  # nothing in common, or different holders ("the user" vs "the billing service")
    return shared[0] if _not_narrower(neg, pos_stmt, [t for t in neg.core if _in(t, (b if neg is a else a).core)]) else None


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
    for anchor, old, pol in a.values:
        olds = {v for x, v, p in a.values if p == pol and _same(x, anchor)}
        news = {v for x, v, p in b.values if p == pol and _same(x, anchor)}
        if news and not olds & news and not any(_refines(o, n) for o in olds for n in news):
            return f'value of "{anchor.word}" changes: {old} → {sorted(news)[0]}'
    return ""


def _refines(x: str, y: str) -> bool:
    """Returns whether one version is a prefix of the other ("3.12" and "3.12.1")."""
    xs, ys = x.split("."), y.split(".")
    n = min(len(xs), len(ys))
    return xs[:n] == ys[:n]
