"""Keys as a reader sees them: NFKC plus Unicode's confusable skeleton (UTS #39).

A leaf (the standard library and Unicode's data) that ``secret_names`` reads, so the compiler and
the runtime's redaction alike read `pаssword` with a Cyrillic `а`, `ｐａｓｓｗｏｒｄ` (fullwidth) and
`𝐩𝐚𝐬𝐬𝐰𝐨𝐫𝐝` (mathematical bold) as `password`. A key mixing
scripts (Latin with Cyrillic or Greek letters) is reported on its own (X603), whatever it names.

The confusables table is Unicode's confusables.txt as the `confusable_homoglyphs` package ships
it (a maintained JSON of confusables.txt and Scripts.txt): each character maps to the characters
it can be mistaken for, both ways. The skeleton here is the table's ASCII letter or digit for each
character that has one (keys are compared with ASCII credential words, so only that direction
matters); NFKC first folds compatibility forms (fullwidth, mathematical alphabets, ligatures).
The data is loaded on the first key with a letter outside Latin (a JSON file of 900 kB, read
once per process): ASCII and accented Latin keys, those of almost every playbook, never pay for it.
"""

from __future__ import annotations

import functools
import unicodedata


@functools.lru_cache(maxsize=1024)
def _prototype(char: str) -> str:
    """The ASCII letter or digit ``char`` can be mistaken for, else ``char``. Looked up per
    character: building a whole ASCII table from the data takes a second on a busy machine."""
    from confusable_homoglyphs.confusables import confusables_data

    for glyph in confusables_data.get(char, ()):
        target = glyph["c"]
        if len(target) == 1 and target.isascii() and target.isalnum():
            return target
    return char


@functools.lru_cache(maxsize=4096)
def skeleton(key: str) -> str:
    """``key`` as the ASCII key it imitates (unchanged when it is ASCII)."""
    if key.isascii():
        return key
    folded = unicodedata.normalize("NFKC", key)
    if folded.isascii():
        return folded
    # Marks go (`pässword` reads as `password`); each other character becomes its prototype.
    decomposed = unicodedata.normalize("NFD", folded)
    unmarked = "".join(c for c in decomposed if not unicodedata.combining(c))
    if unmarked.isascii():  # accented Latin (`descripción`): no need for the data
        return unmarked
    return "".join(c if c.isascii() else _prototype(c) for c in unmarked)


@functools.lru_cache(maxsize=4096)
def mixed_script(key: str) -> bool:
    """Letters of more than one script in one key (`pаssword`: Latin and Cyrillic)."""
    if key.isascii():
        return False
    from confusable_homoglyphs.categories import alias

    # Each distinct character once (a set, built in C): a long key costs one pass, not one
    # table search per character.
    scripts = {alias(c) for c in set(unicodedata.normalize("NFKC", key))} - _NEUTRAL
    if "LATIN" in scripts:  # UTS #39's highly restrictive level: Latin with Han, Kana, Hangul
        scripts -= _WITH_LATIN
    return len(scripts) > 1


_NEUTRAL = frozenset({"COMMON", "INHERITED", "Unknown"})
_WITH_LATIN = frozenset({"HAN", "HIRAGANA", "KATAKANA", "HANGUL", "BOPOMOFO"})
