"""The NUL character, which PostgreSQL text and jsonb cannot hold.

PostgreSQL refuses U+0000 in text (22021, "invalid byte sequence for encoding UTF8: 0x00")
and the escape `\\u0000` in jsonb (22P05): without these checks a NUL would be stored and
then cut off or mangled by clients that read C strings. Checked where text enters the
engine: string literals, parameters, and the text -> jsonb cast (one vectorised regex
pass per column).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import CharacterNotInRepertoire, UntranslatableCharacter

# an escape \u0000 not itself escaped (preceded by an even number of backslashes)
_JSON_NUL = r"(^|[^\\])(\\\\)*\\u0000"


def check_text(s: str) -> str:
    if "\x00" in s:
        raise CharacterNotInRepertoire('invalid byte sequence for encoding "UTF8": 0x00')
    return s


def check_jsonb_column(col: pa.Array) -> None:
    """Refuse jsonb input text holding the escape `\\u0000`."""
    if len(col) and pc.any(pc.match_substring_regex(col, _JSON_NUL)).as_py():
        raise UntranslatableCharacter(
            "unsupported Unicode escape sequence",
            detail="\\u0000 cannot be converted to text.",
        )
