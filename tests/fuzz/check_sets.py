"""The fuzzer's check of a release's cluster membership (deid.cluster_member), shared by the
methods whose releases keep one (their parts: tests/fuzz/checkers/<method>.py): every cluster
has >= k ids and the clusters partition the selected ids. A mixin of
tests/fuzz/checker.Checker (which provides conn and stats). Imports nothing of deid.
"""


class SetChecks:
    def _membership(self, name, k, rids, out):
        rel_id = self.conn.execute("SELECT release_id FROM deid.release WHERE name = %s AND status = 'committed'",
                                   [name]).fetchone()[0]
        seen, sizes = [], {}
        for cid, members in self.conn.execute(
                "SELECT cluster_id, rids FROM deid.cluster_member WHERE release_id = %s", [rel_id]):
            sizes[cid] = len(members)
            seen.extend(members)
        self.stats["clusters_checked"] += len(sizes)
        if sizes and min(sizes.values()) < k:
            out.append(("k", f"{name}: a cluster of {min(sizes.values())} < k={k}"))
        if len(seen) != len(set(seen)) or set(seen) != set(rids):
            out.append(("membership", f"{name}: the clusters hold {len(set(seen))} distinct of {len(seen)} ids,"
                        f" the selection picks {len(rids)}"))
        return sizes
