"""Users' words to APIs' words, without a model call.

Two layers feed the lexical ranker's query expansion:
- `USER_WORDS`, a small table of how people ask for what APIs name otherwise ("text" -> message
  sms, "bug" -> issue, "room" -> channel conversation, "shopper" -> customer). It is general
  vocabulary of messaging, code hosting, billing and telephony, not a list of any one catalog's
  operations; a request word expands to the API words at `EXPANSION` weight, beside itself.
- `abbreviations(texts)`, mined from the catalog itself: a description that writes
  "pull request (PR)" or "Short Message Service (SMS)" teaches the ranker that a request's "pr"
  means "pull request".
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from app.retrieval.text import STOPWORDS, stem, tokenize
from app.retrieval.text import words as split_words

EXPANSION = 0.6
"""Weight of an expanded API word against 1.0 for a word of the request itself."""

_GROUPS: tuple[tuple[str, str], ...] = (
    # request words -> API words
    ("text texts texting sms", "message sms send"),
    ("dm tell notify ping announce inform", "message post send"),
    ("chat", "message conversation"),
    ("note", "message comment"),
    ("reply answer answers responded", "replies comment"),
    ("room rooms group", "channel conversation"),
    ("bug bugs ticket tickets defect problem", "issue"),
    ("pr prs", "pull request"),
    ("ci pipeline pipelines build builds automation", "workflow run action"),
    ("again flaked retry rebuild", "rerun"),
    ("abort stop halt", "cancel"),
    ("codebase project", "repository repo"),
    ("version versions ship shipped changelog", "release"),
    ("bookmark", "star"),
    ("client clients shopper shoppers buyer buyers payer", "customer"),
    ("bill bills billed", "invoice charge"),
    ("chargeback chargebacks contested contest", "dispute"),
    ("cash money funds earnings", "balance payout"),
    ("withdraw", "payout"),
    ("membership memberships plan", "subscription"),
    ("discount off promo", "coupon promotion code"),
    ("sell selling offer", "product price"),
    ("remind nudge", "reminder"),
    ("snooze silence focus", "dnd snooze"),
    ("online around away", "presence"),
    ("phone ring dial", "call"),
    ("line lines", "phone number incoming"),
    ("voicemail transcript", "transcription recording"),
    ("bridge", "conference"),
    ("hold waiting", "queue member"),
    ("cost spend spending spent", "usage record"),
    ("threshold", "trigger"),
    ("delivered", "status message"),
    ("react thumbs", "reaction"),
    ("deck spreadsheet image chart picture", "file upload"),
    ("mms picture photo", "media"),
    ("edit fix typo", "update"),
    ("unsend", "delete"),
    ("link permanent", "permalink"),
    ("kick drop", "remove kick"),
    ("retire", "archive"),
    ("diff different", "compare"),
    ("identity logged login", "authenticated user"),
    ("throttled throttle quota", "rate limit"),
    ("inbox attention mentions", "notifications"),
    ("freeze", "lock"),
    ("own owner", "assignee"),
    ("traffic visitors visits", "views traffic"),
    ("company companies", "organization org"),
    ("cve cves vulnerable vulnerability", "dependabot alert"),
    ("people folks everyone", "members users"),
    ("signup enroll onboard", "create"),
    ("wipe", "delete"),
    ("secure shell", "ssh key"),
    # fourth round (read off the development half's misses as general vocabulary)
    ("developer developers engineer engineers coder coders programmer programmers", "user users"),
    ("branch branches", "ref branch"),
    ("callback callbacks whenever", "webhook hook"),
    ("workspace workspaces", "team"),
    ("approval approvals approve approved", "review"),
    ("remaining", "rate limit"),
    ("copy", "fork"),
    ("url address", "permalink"),
    ("function functions implemented implementation definition", "code"),
    ("announcement announcements", "message"),
    ("seller sellers merchant merchants vendor vendors", "connected account"),
    ("squad squads department departments", "team"),
    ("trunk mainline", "main default branch"),
    ("reimburse reimbursement repay", "refund"),
    ("credential credentials", "key"),
    ("hang", "call update"),
)


def _build() -> dict[str, tuple[str, ...]]:
    table: dict[str, set[str]] = {}
    for asked, named in _GROUPS:
        targets = set(tokenize(named))
        for word in asked.split():
            key = stem(word.lower())
            table.setdefault(key, set()).update(targets - {key})
    return {k: tuple(sorted(v)) for k, v in table.items()}


USER_WORDS: dict[str, tuple[str, ...]] = _build()
"""Stemmed request word -> stemmed API words."""

_CHANNEL = re.compile(r"(?<![\w&])#[A-Za-z][\w-]*")
_HANDLE = re.compile(r"(?<![\w.])@[A-Za-z][\w.-]*")
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_QUOTED = re.compile(r"(?<!\w)'[^']{1,80}'(?!\w)|\"[^\"]{1,80}\"")
_NAMED = re.compile(r"\b(?:called|named|titled)\s+\S+", re.IGNORECASE)
_FILE_TYPES = "py|ts|js|tsx|jsx|md|json|ya?ml|txt|go|rs|java|rb|c|h|cpp|css|html|toml|lock|sh"
_FILE = re.compile(rf"(?<![\w./-])(?:[\w-]+/)*[\w-]+\.(?:{_FILE_TYPES})\b")
"""Patterns start only where their run of characters starts, so a long pasted text costs
linear time."""
_PHONE = re.compile(r"(?<![\w+])\+\d[\d\s().-]{6,}\d")


def rewrite(query: str, *, values: bool = False) -> str:
    """A request with conventions spelled out: `#eng` is a channel, `@maria` a user,
    `+1 555 0100` a phone number. With `values` (catalogs of API operations), also
    `bob@x.io` an email and `src/app.ts` a file path, and values ("called notes", a quoted
    'quarterly report') stand for what they are: arguments, not what to do. (On MetaTool's
    and BFCL's free-text tools, whose descriptions name the values they take, that cost
    recall.)"""
    if values:
        query = _values(query)
    if "+" in query:
        query = _PHONE.sub(" phone ", query)
    if "#" in query:
        query = _CHANNEL.sub(" channel ", query)
    if "@" in query:
        query = _HANDLE.sub(" user ", query)
    return query


def _values(query: str) -> str:
    if "@" in query:
        query = _EMAIL.sub(" email ", query)
    if "'" in query or '"' in query:
        query = _QUOTED.sub(" text ", query)
    query = _NAMED.sub(" name ", query)
    if "." in query:
        query = _FILE.sub(" file path ", query)
    return query


_ABBREVIATION = re.compile(r"\(([A-Za-z]{2,6})s?\)")
_WORD = re.compile(r"[A-Za-z][\w-]*")


@lru_cache(maxsize=1 << 14)
def _abbreviations_in(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    found: list[tuple[str, tuple[str, ...]]] = []
    for match in _ABBREVIATION.finditer(text):
        letters = match.group(1).lower()
        before = _WORD.findall(text[max(0, match.start() - 80) : match.start()])
        candidates = before[-len(letters) :]
        if len(candidates) != len(letters):
            continue
        if "".join(w[0].lower() for w in candidates) != letters:
            continue
        words = tuple(tokenize(" ".join(candidates)))
        if words:
            found.append((letters, words))
    return tuple(found)


def abbreviations(texts: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Abbreviation -> the words it stands for, from "long form (ABBR)" in the texts.

    The long form is the run of words before the parenthesis whose initials spell the
    abbreviation ("pull request (PR)", "Short Message Service (SMS)")."""
    found: dict[str, tuple[str, ...]] = {}
    for text in texts:
        if "(" in text:
            for letters, words in _abbreviations_in(text):
                found.setdefault(letters, words)
    return found


_DERIVED = ("er", "at")
"""Stem endings that make a noun of a verb: reviewer, follower, invitation (invitat). ("or" was
measured too: connect and connector pulled Stripe's connected accounts to Twilio's apps.)"""
_DERIVED_MIN = 5
"""Shorter stems pair too loosely (auth/author, form/format)."""


def derivations(vocabulary: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Stems of the catalog that are one word's verb and noun, both ways ("review" and
    "reviewer", "invit" and "invitat"), mined from the catalog's own vocabulary: "request a
    review" then reaches `pulls_request_reviewers`, "who follows me" the followers."""
    stems = {w for w in vocabulary if w.isalpha()}
    found: dict[str, set[str]] = {}
    for base in stems:
        if len(base) < _DERIVED_MIN:
            continue
        for ending in _DERIVED:
            if base + ending in stems:
                found.setdefault(base, set()).add(base + ending)
                found.setdefault(base + ending, set()).add(base)
    return {k: tuple(sorted(v)) for k, v in found.items()}


Words = Iterable[Sequence[str]]
"""Token lists, one per operation."""

_SHORTENED_MIN = 3
"""Operations whose name shortens a word of their summary the same way, for the pair to count."""


def shortenings(names: Words, summaries: Words) -> dict[str, tuple[str, ...]]:
    """Words a catalog's operation names shorten, both ways: GitHub names its operations
    `repos_…` and `orgs_…` where their summaries say "repository" and "organization", so
    the one is the other (`repo` and `repository`, `org` and `organizat`, `config` and
    `configurat`). Mined from the pairs (stemmed name word, stemmed summary word) where the
    name word starts the summary word, in at least `_SHORTENED_MIN` operations and in at least
    half of those the name word names (`repo` and `report` do not pair)."""
    counts: dict[tuple[str, str], int] = {}
    named: dict[str, int] = {}
    for name, summary in zip(names, summaries, strict=True):
        said = set(summary)
        for word in set(name):
            named[word] = named.get(word, 0) + 1
        for short in set(name) - said:
            for long in said:
                if len(long) > len(short) >= 3 and long.startswith(short):
                    counts[(short, long)] = counts.get((short, long), 0) + 1
    found: dict[str, set[str]] = {}
    for (short, long), n in counts.items():
        if n >= _SHORTENED_MIN and 2 * n >= named[short]:
            found.setdefault(short, set()).add(long)
            found.setdefault(long, set()).add(short)
    return {k: tuple(sorted(v)) for k, v in found.items()}


_ALIAS_MIN = 4
_ALIAS_DICE = 0.45


def aliases(names: Words, summaries: Words) -> dict[str, tuple[str, ...]]:
    """A summary word -> the operation-name word it stands beside: Slack names `conversations`
    what its summaries call a channel, and `dnd` what they call do not disturb. Mined from the
    (summary word, name word) pairs of operations whose name lacks the summary word, when they
    go together (Dice coefficient at least `_ALIAS_DICE` over operations, in at least
    `_ALIAS_MIN`)."""
    pairs: dict[tuple[str, str], int] = {}
    named: dict[str, int] = {}
    said: dict[str, int] = {}
    for name, summary in zip(names, summaries, strict=True):
        in_name, in_summary = set(name), set(summary)
        for word in in_name:
            named[word] = named.get(word, 0) + 1
        for word in in_summary:
            said[word] = said.get(word, 0) + 1
        for word in in_summary - in_name:
            for short in in_name - in_summary:
                pairs[(word, short)] = pairs.get((word, short), 0) + 1
    found: dict[str, set[str]] = {}
    for (word, short), n in pairs.items():
        if n >= _ALIAS_MIN and 2 * n >= _ALIAS_DICE * (said[word] + named[short]):
            found.setdefault(word, set()).add(short)
    return {k: tuple(sorted(v)) for k, v in found.items()}


def merged(*tables: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """Several word -> words tables as one (words of each key in table order, once)."""
    out: dict[str, tuple[str, ...]] = {}
    for table in tables:
        for key, words in table.items():
            out[key] = tuple(dict.fromkeys((*out.get(key, ()), *words)))
    return out


_ADDRESSED = frozenset({"me", "us"})
_SPOKEN = tuple(sorted(w for w in USER_WORDS if w in STOPWORDS))
"""The table's words the tokenizer drops: tell, again, off, own."""


def spoken_keys(text: str) -> list[str]:
    """Words of the users'-words table that the tokenizer drops as conversational filler
    ("tell", "again", "off", "own"), where they ask for something: "tell #design the mockups
    are up" is a message to send, "tell me the balance" is filler (the word after is me or
    us). The tokens' `expansions` never see them otherwise."""
    lowered = text.lower()
    if not any(key in lowered for key in _SPOKEN):  # most requests: no words() pass
        return []
    found = [*split_words(text), ""]
    return [
        w
        for w, after in itertools.pairwise(found)
        if w in STOPWORDS and w in USER_WORDS and after not in _ADDRESSED
    ]


def expansions(tokens: Iterable[str], mined: Mapping[str, tuple[str, ...]]) -> dict[str, float]:
    """API words for a request's tokens (not the tokens themselves), at `EXPANSION` weight."""
    out: dict[str, float] = {}
    for token in set(tokens):
        for word in (*USER_WORDS.get(token, ()), *mined.get(token, ())):
            out.setdefault(word, EXPANSION)
    return out
