"""Escaping what comes from files the patch may control before it reaches a terminal or a line-based
output: paths, keys, values and card details, with line breaks, NUL, ESC, bidi marks and undecodable
file-name bytes shown as visible escapes. Every error line goes through `one_line` (gate.core.errors).
"""

from __future__ import annotations


def one_line(text: str) -> str:
    """`text` with every character that is not printable escaped: it cannot break a line or drive a terminal."""
    # Paths, keys, values and card details come from files the patch may control: escape line
    # breaks, NUL, ESC, bidi marks and undecodable file-name bytes.
    return "".join(char if char.isprintable() else escaped(char) for char in text)


def escaped(char: str) -> str:
    """One character that must not be shown as itself, as a visible escape: \\n, \\xNN, \\uNNNN or
    \\UNNNNNNNN (a byte os.fsdecode could not decode, kept as a lone surrogate, shows as that byte)."""
    code = ord(char)
    if char in "\n\r\t":
        return repr(char)[1:-1]
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
