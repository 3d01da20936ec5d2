"""Read a Rust source as text, without a Rust toolchain: a small tokenizer for what
dsl_keys_noetl5.py scans in NoETL 5's sources (serde structs with their attributes, and
``.get("key")`` reads with the default their chain applies).

Comments are blanked (offsets and line numbers kept), string, raw-string and char literals are
skipped as units, brackets are matched by depth, ``#[cfg(test)] mod`` blocks are blanked (the
engine does not run them). Every regular expression starts on fixed text and has no nested
quantifier: each is linear on every input.
"""

from __future__ import annotations

import re

_RAW = re.compile(r"b?r(#*)\"")


def literal_end(text: str, i: int) -> int | None:
    """Offset just past the string or char literal starting at ``i`` (``"..."``, ``r#"..."#``,
    ``b"..."``, ``'c'``), or None when none starts there (a lifetime ``'a`` is no literal)."""
    c = text[i]
    if c in "rb" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
        raw = _RAW.match(text, i)
        if raw:
            end = text.find('"' + raw.group(1), raw.end())
            return len(text) if end < 0 else end + 1 + len(raw.group(1))
        if text.startswith('b"', i):
            return literal_end(text, i + 1)
        return None
    if c == '"':
        i += 1
        while i < len(text) and text[i] != '"':
            i += 2 if text[i] == "\\" else 1
        return i + 1
    if c == "'" and i + 2 < len(text) and (text[i + 2] == "'" or text[i + 1] == "\\"):
        end = text.find("'", i + 2)
        return None if end < 0 else end + 1
    return None


def blank_comments(text: str) -> str:
    """The text with every comment (``//...``, ``/* ... */``) replaced by spaces (newlines kept,
    so offsets and line numbers hold) and string literals left as they are."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        end = literal_end(text, i) if text[i] in "\"'rb" else None
        if end is not None:
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out[i:end] = ["\n" if ch == "\n" else " " for ch in text[i:end]]
            i = end
        else:
            i += 1
    return "".join(out)


def closing(text: str, open_at: int) -> int:
    """Offset of the bracket closing the one at ``open_at`` (strings skipped)."""
    pairs = {"{": "}", "(": ")", "[": "]", "<": ">"}
    opener = text[open_at]
    depth, i = 0, open_at
    while i < len(text):
        c = text[i]
        end = literal_end(text, i) if c in "\"'rb" else None
        if end is not None:
            i = end
            continue
        if c == opener:
            depth += 1
        elif c == pairs[opener]:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unclosed {opener} at {open_at}")


_CFG_TEST = re.compile(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{")


def source_text(text: str) -> str:
    """Comments and ``#[cfg(test)] mod ... { }`` blocks blanked: what the engine runs."""
    text = blank_comments(text)
    for match in reversed(list(_CFG_TEST.finditer(text))):
        end = closing(text, match.end() - 1)
        text = (
            text[: match.start()]
            + re.sub(r"[^\n]", " ", text[match.start() : end + 1])
            + text[end + 1 :]
        )
    return text


def line_of(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


# --- serde structs ---------------------------------------------------------------------------

_STRUCT = re.compile(r"\bstruct\s+(\w+)")
_ENUM = re.compile(r"\benum\s+(\w+)")
_ATTR = re.compile(r"#\[serde\(")
_STR_ARG = re.compile(r"\b(rename|alias|default|rename_all)\s*=\s*\"([^\"]*)\"")
_FN = re.compile(r"\bfn\s+(\w+)\s*\(\s*\)\s*->")
_LITERAL = re.compile(r"-?\d[\d_]*(\.\d+)?|true|false|None|Vec::new\(\)|HashMap::new\(\)")
_TO_STRING = re.compile(r"\"([^\"]*)\"\s*\.\s*(?:to_string|to_owned|into)\(\)")


def _serde_args(attrs: str) -> tuple[dict[str, list[str]], set[str]]:
    """``#[serde(...)]`` arguments of an attribute run: key=value pairs and bare words."""
    pairs: dict[str, list[str]] = {}
    words: set[str] = set()
    for match in _ATTR.finditer(attrs):
        body = attrs[match.end() : closing(attrs, match.end() - 1)]
        for key, value in _STR_ARG.findall(body):
            pairs.setdefault(key, []).append(value)
        bare = _STR_ARG.sub("", body)
        words |= {w.strip() for w in bare.split(",") if w.strip() and "=" not in w}
    return pairs, words


def _case(name: str, rule: str | None) -> str:
    if rule in ("lowercase",):
        return name.lower()
    if rule == "snake_case":
        return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()
    if rule == "camelCase":
        parts = name.split("_")
        return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])
    return name


def enum_defaults(text: str) -> dict[str, str]:
    """enum name -> the wire name of its ``#[default]`` variant."""
    found = {}
    for match in _ENUM.finditer(text):
        open_at = text.find("{", match.end())
        if open_at < 0 or text[match.end() : open_at].strip():
            continue
        body = text[open_at + 1 : closing(text, open_at)]
        head = text[text.rfind("}", 0, match.start()) + 1 : match.start()]
        rule = _serde_args(head)[0]
        mark = body.find("#[default]")
        if mark >= 0:
            rest = body[mark + len("#[default]") :]
            rest = rest[_attributes_end(rest) :].lstrip()
            variant = rest.split(",", 1)[0].split("{", 1)[0].split("(", 1)[0].strip()
            if variant.isidentifier():
                found[match.group(1)] = _case(variant, (rule.get("rename_all") or [None])[0])
    return found


def fn_default(text: str, name: str) -> str:
    """What ``fn name() -> T { ... }`` returns when its body is one literal; else ``name()``."""
    for match in _FN.finditer(text):
        if match.group(1) != name:
            continue
        open_at = text.find("{", match.end())
        body = text[open_at + 1 : closing(text, open_at)].strip()
        quoted = _TO_STRING.fullmatch(body) or re.fullmatch(r"String::from\(\"([^\"]*)\"\)", body)
        if quoted:
            return repr(quoted.group(1))
        if _LITERAL.fullmatch(body):
            return body.replace("_", "")
    return f"{name}()"


def _type_default(typ: str, enums: dict[str, str]) -> str:
    base = typ.split("<", 1)[0].split("::")[-1].strip()
    if base == "Option":
        return "None"
    if base in ("Vec", "HashSet", "BTreeSet"):
        return "[]"
    if base in ("HashMap", "BTreeMap", "Map"):
        return "{}"
    if base == "bool":
        return "false"
    if base in ("String", "str"):
        return "''"
    if re.fullmatch(r"[iu](8|16|32|64|128|size)", base):
        return "0"
    if base in ("f32", "f64"):
        return "0.0"
    if base == "Value":
        return "null"
    if base in enums:
        return repr(enums[base])
    return f"{base}::default()"


def _top_level_fields(body: str):
    """(offset, text) of each comma-separated field of a struct body, brackets respected."""
    depth, start = 0, 0
    for i, c in enumerate(body):
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            depth -= 1
        elif c == "," and depth == 0:
            yield start, body[start:i]
            start = i + 1
    if body[start:].strip():
        yield start, body[start:]


def _attributes_end(chunk: str) -> int:
    """Offset just past the ``#[...]`` attributes leading a field."""
    pos = 0
    while True:
        start = len(chunk) - len(chunk[pos:].lstrip())
        if not chunk.startswith("#[", start):
            return pos
        pos = closing(chunk, start + 1) + 1


def struct_fields(text: str, name: str) -> list[dict]:
    """Each field of ``struct name`` a playbook can write: key, aliases, default, line."""
    enums = enum_defaults(text)
    for match in _STRUCT.finditer(text):
        if match.group(1) != name:
            continue
        open_at = text.find("{", match.end())
        if open_at < 0 or ";" in text[match.end() : open_at]:
            continue
        head = text[text.rfind("}", 0, match.start()) + 1 : match.start()]
        struct_pairs, struct_words = _serde_args(head)
        rename_all = (struct_pairs.get("rename_all") or [None])[0]
        body = text[open_at + 1 : closing(text, open_at)]
        rows = []
        for offset, chunk in _top_level_fields(body):
            attrs_end = _attributes_end(chunk)
            head, colon, typ = chunk[attrs_end:].partition(":")
            words = head.split()
            if not colon or not words or words[0] not in ("pub", "pub(crate)", *words[-1:]):
                continue
            ident = words[-1].removeprefix("r#")
            if not ident.isidentifier():
                continue
            pairs, flags = _serde_args(chunk[:attrs_end])
            if {"flatten", "skip", "skip_deserializing"} & flags:
                continue
            typ = typ.strip()
            key = pairs["rename"][0] if "rename" in pairs else _case(ident, rename_all)
            if "default" in pairs:
                default = fn_default(text, pairs["default"][0])
            elif "default" in flags or "default" in struct_words:
                default = _type_default(typ, enums)
                if "default" in struct_words and "default" not in flags:
                    default = f"{name}::default()"
            elif typ.startswith("Option<"):
                default = "None"
            else:
                default = "required"
            at = open_at + 1 + offset + attrs_end + head.rfind(words[-1])
            rows.append(
                {
                    "key": key,
                    "aliases": pairs.get("alias", []),
                    "default": default,
                    "read_by": name,
                    "line": line_of(text, at),
                }
            )
        return rows
    raise LookupError(f"no struct {name}")


# --- .get("key") reads -----------------------------------------------------------------------

_GET = re.compile(r"\.\s*get\(\s*\"(\w+)\"\s*\)")


def _receiver(text: str, at: int) -> str:
    """The path a call at ``at`` is made on (``spec.extra`` of ``spec\n    .extra\n    .get``):
    names and dots back from the call, across the line breaks of a chain split over lines."""
    end = len(text[:at].rstrip())
    i = end
    while i > 0:
        c = text[i - 1]
        if c.isalnum() or c == "_" or c == ".":
            i -= 1
        elif c.isspace() and text[i] == ".":  # a chain continued on the next line
            while i > 0 and text[i - 1].isspace():
                i -= 1
        else:
            break
    return "".join(text[i:end].split())


def _chain(text: str, start: int) -> str:
    """The method chain after a call: up to the statement's end (``;``), a block's ``{``, or
    the bracket or comma closing the expression it is in."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        end = literal_end(text, i) if c in "\"'rb" else None
        if end is not None:
            i = end
            continue
        if c in "([":
            depth += 1
        elif c in ")]":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and c in ";{,":
            break
        i += 1
    return text[start:i]


def read_default(chain: str) -> str:
    """The default a ``.get(..)`` chain applies when the key is absent."""
    for marker, shown in (
        (".unwrap_or_default()", "default"),
        (".unwrap_or(", None),
        (".unwrap_or_else(", None),
        (".ok_or_else(", "required (error)"),
        (".ok_or(", "required (error)"),
        (".expect(", "required (panic)"),
    ):
        at = chain.find(marker)
        if at < 0:
            continue
        if shown:
            return shown
        open_at = at + len(marker) - 1
        value = " ".join(chain[open_at + 1 : closing(chain, open_at)].split())
        return value if len(value) <= 40 else value[:37] + "..."
    return "None"


def get_reads(text: str, receivers: dict[str, str]) -> list[dict]:
    rows = []
    for match in _GET.finditer(text):
        receiver = _receiver(text, match.start())
        if receiver not in receivers:
            continue
        rows.append(
            {
                "key": match.group(1),
                "aliases": [],
                "default": read_default(_chain(text, match.end())),
                "read_by": receivers[receiver],
                "line": line_of(text, match.start()),
            }
        )
    return rows
