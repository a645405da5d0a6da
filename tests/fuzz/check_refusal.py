"""The fuzzer's checks of a refused request: a SQLSTATE that is not an internal error, no Python
internals in the text, a HINT, nothing left behind (no committed log row, no relation of the
release's name), and -- for a caller without SELECT (a policy) -- no detail, no cell value and
no number below k that the request itself did not contain, in the error or in the progress
NOTICEs sent before it. A mixin of tests/fuzz/checker.Checker (conn). Imports nothing of deid.
"""
import re

INTERNAL = re.compile(r"plpy\.|spiexceptions|Traceback|\bNone\b|Error\(|<class ")
NUMBER = re.compile(r"(?<![\w.-])\d+(?![\w.-])")
# deid's own constant text: ranges, examples, paper references, dates, levels -- not data
STATIC = re.compile(r"\[[^\]]*\]|e\.g\.[^.;]*|\b(?:Def|Fig|Figs|sec|Alg|Theorem|Table)\.? ?\d+|\b00\d\b"
                    r"|\d{4}-\d{2}-\d{2}|\blimit \d+ of \d+|\blevels? \d+|\b\d+(?:\.\d+)? ?(?:s|ms|KB|MB|%)\b")
# a refusal that depends on the data (a number in it may be a count); validation errors of the
# request itself hold deid's constants ("k must be at least 2")
DATA_STATES = {"DE001", "22004"}
DATA_WORDS = re.compile(r"\b(?:rows?|records?|NULL|class(?:es)?|groups?|distinct|hierarchy)\b", re.I)


class RefusalChecks:
    def check_refusal(self, err, release, policy_caller, k, request_text, secrets, notices=()):
        """Findings for an error raised by a request (err: a psycopg.Error); notices: the
        texts of the NOTICEs the request sent before it failed."""
        out = []
        d = getattr(err, "diag", None)
        state = getattr(d, "sqlstate", None) if d else None
        primary = (d.message_primary if d else None) or str(err)
        hint, detail = (d.message_hint if d else None), (d.message_detail if d else None)
        if not state:
            out.append(("internal", f"no SQLSTATE: {primary[:200]}"))
        elif state.startswith("XX"):
            out.append(("internal", f"{state}: {primary[:200]}"))
        for text in (primary, detail or "", hint or ""):
            if INTERNAL.search(text):
                out.append(("internal", f"{state}: Python internals in {text[:200]!r}"))
                break
        if state == "42883":
            out.append(("enum_selection_42883", f"{state}: {primary[:200]}"))
        if not hint:
            out.append(("no_hint", f"{state}: {primary[:200]}"))
        if release:
            left = self.conn.execute(
                "SELECT (SELECT count(*) FROM deid.release WHERE name = %s AND status = 'committed'),"
                " (SELECT count(*) FROM pg_class WHERE relnamespace IN ('release'::regnamespace,"
                " 'deid_release'::regnamespace) AND (relname = %s OR relname LIKE %s))",
                [release, release, release.replace("_", "\\_") + "\\_%"]).fetchone()
            if any(left):
                out.append(("left_behind", f"{state}: a refused request left {left} (log rows, relations)"))
        if policy_caller:
            text = " ".join(x for x in (primary, hint) if x)
            if detail:
                echo = set(NUMBER.findall(detail)) <= set(NUMBER.findall(request_text))
                out.append(("policy_detail_echo" if echo else "leak",
                            f"{state}: a detail for a caller without SELECT: {detail[:200]!r}"))
            found = [s for s in secrets if (s in text or (detail and s in detail)) and s not in request_text]
            if found:
                out.append(("leak", f"{state}: value {found[0]!r} in {text[:200]!r}"))
            asked = set(NUMBER.findall(request_text))
            data = state in DATA_STATES or DATA_WORDS.search(primary)
            small = [n for n in NUMBER.findall(STATIC.sub(" ", text))
                     if data and n not in asked and isinstance(k, int) and int(n) < k]
            if small:
                out.append(("leak", f"{state}: number {small[0]} < k={k} in {text[:200]!r}"))
            for n in notices:           # progress sent before the refusal may not leak counts
                counts = [x for x in NUMBER.findall(STATIC.sub(" ", n)) if x not in asked
                          and isinstance(k, int) and int(x) < k]
                if counts or any(s in n for s in secrets if s not in request_text):
                    out.append(("notice_count", f"{state}: NOTICE {n[:200]!r} before a refusal, k={k}"))
                    break
        return state, out

    def orphans(self):
        """Catalog rows of releases that have no log row (a failed request that left something)."""
        return self.conn.execute(
            "SELECT (SELECT count(*) FROM deid.rid_set s WHERE NOT EXISTS (SELECT 1 FROM deid.release r"
            " WHERE r.release_id = s.release_id)) + (SELECT count(*) FROM deid.cluster_member s WHERE"
            " NOT EXISTS (SELECT 1 FROM deid.release r WHERE r.release_id = s.release_id)) +"
            " (SELECT count(*) FROM deid.equivalence_class s WHERE NOT EXISTS (SELECT 1 FROM"
            " deid.release r WHERE r.release_id = s.release_id))").fetchone()[0]
