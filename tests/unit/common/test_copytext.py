"""Text-format COPY images (copytext): decoded back by an independent parser."""
import numpy as np
import pytest

from deid.write import copybin, copytext

SPECIAL = ["a", "b\tc", "d\\e", "", None, "x\ny", "\\N", "z\r", "\\.", "Zürich", "t\\t"]


def unescape(v):
    if v == "\\N":
        return None
    out, i = [], 0
    while i < len(v):
        if v[i] == "\\":
            out.append({"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}[v[i + 1]])
            i += 2
        else:
            out.append(v[i])
            i += 1
    return "".join(out)


def parse(image):
    """Rows of a text-format COPY image (tab-separated, newline-terminated, backslash escapes)."""
    text = image.decode()
    assert text == "" or text.endswith("\n")
    return [tuple(unescape(v) for v in line.split("\t")) for line in text.split("\n")[:-1]]


def expected(fields):
    return [tuple((f.dictionary + [None])[min(c, len(f.dictionary))] for f, c in zip(fields, row))
            for row in zip(*[f.codes for f in fields])]


@pytest.mark.parametrize("seed", range(3))
def test_special_characters_roundtrip(seed):
    rng = np.random.default_rng(seed)
    n = 500
    fields = [copybin.Text(rng.integers(0, len(SPECIAL) + 1, n), SPECIAL), copybin.Text(np.zeros(n, np.int64), ["*"]),
              copybin.Text(rng.integers(0, 3, n), ["p", "qq", "rrr"])]
    assert sorted(parse(copytext.records(fields)), key=repr) == sorted(expected(fields), key=repr)


def test_many_layouts_use_positioned_chunks():
    """Fields too varied to combine or to group by layout go through copybin's positioned path."""
    rng = np.random.default_rng(5)
    n = 3000
    words = [["w" * i + "\t" * (i % 3) for i in range(1, 300)] for _ in range(3)]
    fields = [copybin.Text(rng.integers(0, len(w), n), w) for w in words]
    assert len(copytext.parts(fields)) == 1          # no header, no trailer, one image
    assert sorted(parse(copytext.records(fields))) == sorted(expected(fields))


def test_accepts_only_dictionary_text():
    t = copybin.Text(np.zeros(2, np.int64), ["a"])
    assert copytext.accepts([t, t])
    assert not copytext.accepts([t, copybin.Fixed(np.zeros(2, np.int64), ">i8")])
    assert not copytext.accepts([])


def test_escape():
    assert copytext.escape(None) == "\\N"
    assert copytext.escape("a\\b\tc\nd\re") == "a\\\\b\\tc\\nd\\re"
