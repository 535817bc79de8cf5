#!/usr/bin/env python3
"""Regenerates the Unicode tables in common/ipl_unicode.c from Python's unicodedata.

    python3.13 tools/gen-unicode-tables.py common/ipl_unicode.c

Rewrites, in place, the text between the "BEGIN GENERATED" and "END GENERATED" lines: the
general categories L* and N*, the NFC quick-check set, canonical combining classes, canonical
decompositions and the primary composites (canonical pairs not in Full_Composition_Exclusion).
The Unicode version is the one of the Python running this script (unicodedata.unidata_version),
written into the tables as IPL_UNICODE_VERSION: use Python 3.13 for Unicode 15.1, the version
of the Oniguruma regex engine in current Hugging Face tokenizers. Hangul is algorithmic.
"""
import sys
import unicodedata as ud

MAX = 0x110000


def ranges(pred):
    out, start = [], None
    for cp in range(MAX + 1):
        ok = cp < MAX and pred(cp)
        if ok and start is None:
            start = cp
        elif not ok and start is not None:
            out.append((start, cp - 1))
            start = None
    return out


def rows(items, per_line):
    lines = []
    for i in range(0, len(items), per_line):
        lines.append("    " + " ".join(items[i:i + per_line]))
    return "\n".join(lines)


def main():
    path = sys.argv[1]
    letters = ranges(lambda c: ud.category(chr(c)).startswith("L"))
    numbers = ranges(lambda c: ud.category(chr(c)).startswith("N"))
    ccc = []
    for cp in range(MAX):
        c = ud.combining(chr(cp))
        if not c:
            continue
        if ccc and ccc[-1][1] == cp - 1 and ccc[-1][2] == c:
            ccc[-1][1] = cp
        else:
            ccc.append([cp, cp, c])
    decomp, comp = [], []
    for cp in range(MAX):
        d = ud.decomposition(chr(cp))
        if not d or d.startswith("<"):
            continue  # none, or a compatibility decomposition (NFKC only)
        parts = [int(x, 16) for x in d.split()]
        assert len(parts) in (1, 2)
        decomp.append((cp, parts[0], parts[1] if len(parts) == 2 else 0))
        # A primary composite: a two-part canonical decomposition that NFC keeps composed.
        if len(parts) == 2 and ud.normalize("NFC", chr(cp)) == chr(cp):
            comp.append((parts[0], parts[1], cp))
    comp.sort()
    # Code points that can make a text not NFC: a non-zero combining class, NFC_Quick_Check=No
    # (NFC changes the character alone) or Maybe (it can compose with what precedes it).
    maybe = {b for _, b, _ in comp} | set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    unsafe = ranges(lambda c: ud.combining(chr(c)) != 0 or c in maybe or
                    (not 0xD800 <= c <= 0xDFFF and ud.normalize("NFC", chr(c)) != chr(c)))

    gen = []
    gen.append('#define IPL_UNICODE_VERSION "%s"' % ud.unidata_version)
    gen.append("/* General category L* (Lu Ll Lt Lm Lo): inclusive ranges, sorted. */")
    gen.append("static const uint32_t s_letters[][2] = {")
    gen.append(rows(["{0x%x, 0x%x}," % r for r in letters], 6))
    gen.append("};")
    gen.append("/* General category N* (Nd Nl No): inclusive ranges, sorted. */")
    gen.append("static const uint32_t s_numbers[][2] = {")
    gen.append(rows(["{0x%x, 0x%x}," % r for r in numbers], 6))
    gen.append("};")
    gen.append("/* NFC quick check: code points that are not both NFC_QC=Yes and of class 0. */")
    gen.append("static const uint32_t s_nfc_unsafe[][2] = {")
    gen.append(rows(["{0x%x, 0x%x}," % r for r in unsafe], 6))
    gen.append("};")
    gen.append("/* Canonical_Combining_Class != 0: {first, last, class}, sorted. */")
    gen.append("static const s_ccc_range_t s_ccc[] = {")
    gen.append(rows(["{0x%x, 0x%x, %d}," % tuple(r) for r in ccc], 5))
    gen.append("};")
    gen.append("/* Canonical decompositions, one level: {code point, first, second or 0}, sorted. */")
    gen.append("static const s_pair_map_t s_decomp[] = {")
    gen.append(rows(["{0x%x, 0x%x, 0x%x}," % r for r in decomp], 5))
    gen.append("};")
    gen.append("/* Primary composites: {first, second, composite}, sorted by (first, second). */")
    gen.append("static const s_pair_map_t s_comp[] = {")
    gen.append(rows(["{0x%x, 0x%x, 0x%x}," % r for r in comp], 5))
    gen.append("};")

    text = open(path, encoding="utf-8").read()
    begin = text.index("/* BEGIN GENERATED")
    begin = text.index("\n", begin) + 1
    end = text.index("/* END GENERATED")
    text = text[:begin] + "\n".join(gen) + "\n" + text[end:]
    open(path, "w", encoding="utf-8").write(text)


if __name__ == "__main__":
    main()
