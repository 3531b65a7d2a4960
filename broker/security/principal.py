"""The principal of a connection, as Kafka's DefaultKafkaPrincipalBuilder builds it: the SASL user
(``User:alice``), else on TLS the client certificate's subject mapped by
``ssl.principal.mapping.rules`` (``User:CN=client,O=example``), else ``User:ANONYMOUS``.

``ssl.principal.mapping.rules`` follows Kafka's SslPrincipalMapper: a comma-separated list of
``RULE:pattern/replacement/[LU]`` and ``DEFAULT`` entries, tried in order; a rule applies when its
pattern matches the whole subject (RFC 2253), and every match is then replaced (``$1`` refers to a
group; ``L``/``U`` lower- or upper-case the result). ``DEFAULT`` is the subject itself. When no rule
applies the client cannot be authenticated: Kafka closes the connection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"

_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    """No ``ssl.principal.mapping.rules`` entry applies to the subject."""


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None = None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, subject: str) -> str | None:
        if self.pattern is None:
            return subject
        if self.pattern.fullmatch(subject) is None:
            return None
        result = self.pattern.sub(lambda m: _expand(self.replacement, m), subject)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


def _expand(replacement: str, match: re.Match[str]) -> str:
    """Java's Matcher.appendReplacement: ``$n`` is group n (the longest number that names a group;
    a reference to a group the pattern lacks stays literal, as SslPrincipalMapper escapes it),
    ``\\x`` is x."""
    groups = match.re.groups
    out, i = [], 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 1
            while j < len(replacement) and replacement[j].isdigit():
                j += 1
            digits = replacement[i + 1:j]
            number = int(digits)
            while number > groups and number >= 10:
                number //= 10
            if number > groups or digits.startswith("0") and number != 0:
                out.append(replacement[i:j])
            else:
                out.append(match.group(number) or "")
                out.append(digits[len(str(number)):])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_rules(text: str | None) -> list[Rule]:
    """``ssl.principal.mapping.rules``; raises ValueError for a rule that cannot be read."""
    rules = []
    for raw in (m.group(1) for m in _SPLITTER.finditer((text or "DEFAULT").strip())):
        m = _PARSER.match(raw)
        if m is None or m.end() != len(raw):
            unmatched = raw[m.end():] if m is not None else raw
            raise ValueError(f"Invalid rule: `{raw}`, unmatched substring: `{unmatched}`")
        if m.group(1) is not None:
            rules.append(Rule())
        elif m.group(2) is not None:
            try:
                pattern = re.compile(m.group(2))
            except re.error as e:
                raise ValueError(f"Invalid rule: `{raw}`: {e}") from None
            rules.append(Rule(pattern, m.group(3), m.group(4)))
    return rules


def map_subject(rules: list[Rule], subject: str) -> str:
    for rule in rules:
        name = rule.apply(subject)
        if name is not None:
            return name
    raise NoMatchingRule(f"No rules apply to {subject}, rules {rules}")
