"""ReleasePlan: what a method returns -- plain data, no SQL, no plpy, no writer.

A plan lists the release tables to create (each a list of typed columns holding numpy arrays)
and the catalog artefacts to log (RID sets of 001 Theorem 3, equivalence classes). The writer
(writer.py) turns it into tables; the verifier checks what was stored against it.
"""
from dataclasses import dataclass, field

import numpy as np


@dataclass
class ReadSpec:
    """What a request reads, planned by a plug-in (plan_read) and read by the role the request
    reads as (pipeline.read_pending through snapshot.read_spec): the source's `names` and row id
    of the rows matching the rendered selection ((sql, params) or None)."""
    rel: object               # catalog.Relation
    names: list
    rid: str
    selection: tuple = None
    by_rid: bool = True       # order the rows by row id (the order methods and verifier share)


@dataclass
class SetReadSpec:
    """A set-valued read (003): the records of the source as sets of items, read by
    snapshot.read_sets -- an array column `item` of rows identified by `record` (long=False),
    or a long table of (record, item) rows (long=True)."""
    rel: object               # catalog.Relation
    record: str
    item: str
    long: bool = False
    selection: tuple = None

    @property
    def names(self):
        return [self.item]


@dataclass
class Fixed:
    """A NOT NULL number column the method computed (int32 -> integer, int64 -> bigint,
    float64 -> double precision)."""
    name: str
    values: np.ndarray


@dataclass
class Labels:
    """A text column given as dictionary codes: row i holds labels[codes[i]]; a code equal to
    len(labels) is NULL."""
    name: str
    codes: np.ndarray
    labels: list


@dataclass
class SourceValues:
    """A source column's values (a frame.EncodedColumn) in the column's own release type
    (``column``: its catalog.Column), rows taken in the order ``take`` (None: as they are)."""
    name: str
    values: object
    column: object
    take: np.ndarray = None


@dataclass
class SourceCodes:
    """Distinct values of a source column, given as codes into frame.value_dictionary's
    (``row_codes``, ``dictionary``) of that column, in the column's own release type."""
    name: str
    values: object
    column: object
    codes: np.ndarray
    dictionary: list
    row_codes: np.ndarray


@dataclass
class Synthetic:
    """Synthetic numbers released in a source column's own type (004 Alg. 3): float64 values,
    NOT NULL; integer and date columns hold whole numbers (days since 1970-01-01 for dates)."""
    name: str
    values: np.ndarray
    column: object            # catalog.Column: its type is the release column's type


@dataclass
class TextArrays:
    """A NOT NULL text[] column: row i holds labels[codes[offsets[i]:offsets[i + 1]]]."""
    name: str
    offsets: np.ndarray
    codes: np.ndarray
    labels: list


@dataclass
class IntArrays:
    """A NOT NULL integer[] column: row i holds values[offsets[i]:offsets[i + 1]]."""
    name: str
    offsets: np.ndarray
    values: np.ndarray


@dataclass
class Table:
    name: str                 # unqualified; created in the release storage schema
    columns: list             # Fixed | Labels | SourceValues | SourceCodes | Synthetic, in order

    @property
    def rows(self):
        c = self.columns[0]
        if isinstance(c, SourceValues):
            return len(c.take) if c.take is not None else len(c.values.values)
        if isinstance(c, (TextArrays, IntArrays)):
            return len(c.offsets) - 1
        return len(c.codes if isinstance(c, (Labels, SourceCodes)) else c.values)


@dataclass
class Clusters:
    """004 Def. 1: the source rows each cluster of a condensation release condensed -- the
    clusters' sizes and their RIDs concatenated, cluster after cluster, each sorted."""
    sizes: np.ndarray
    rids: np.ndarray


@dataclass
class RidSets:
    """001 Theorem 3 for one sensitive attribute: its entries (one per group and value: the
    group, the value's code into ``dictionary`` -- len(dictionary) is NULL -- and the size of
    its RID set) and the RID sets concatenated, entry after entry, each sorted."""
    attribute: str
    group: np.ndarray
    code: np.ndarray
    dictionary: list
    count: np.ndarray
    rids: np.ndarray


@dataclass
class Classes:
    """Equivalence classes of the release: per class its size and, per quasi-identifier, its
    generalized value (text)."""
    sizes: np.ndarray
    labels: dict              # quasi-identifier -> list of str, one per class


@dataclass
class SourceClasses:
    """Equivalence classes per source system (002 sec. 2: k data twins in every source), derived
    set-based by the catalog writer from the stored release table (the plan's first table): for
    each source its quasi-identifiers (``sources``: source -> columns) grouped, with their
    counts. The classes over all quasi-identifiers jointly are not kept: they follow from the
    release (GROUP BY all of them)."""
    sources: dict             # source -> list of quasi-identifier columns of the release table


@dataclass
class Membership:
    """Record -> cluster membership of a disassociated release (003), kept for audit in
    deid.cluster_member: record ids (ascending) and their cluster ids."""
    record_ids: np.ndarray
    cluster_ids: np.ndarray


@dataclass
class EstimateView:
    """An anatomy release's view of 001's estimate (log/estimate_view.py): the QIT joined with
    every count table, one row per QIT row and combination of its group's sensitive values,
    weighted by the product of their shares of the group. Names only: the SQL is the writer's."""
    name: str                 # the view's name in schema release (<release>_estimate)
    qit: str                  # the stored QIT's name
    counts: list              # [(attribute, stored count table's name)], in the request's order


@dataclass
class ReleasePlan:
    tables: list
    rows: int
    groups: int
    discernibility: float
    rid_sets: list = field(default_factory=list)
    classes: Classes = None           # or SourceClasses
    clusters: Clusters = None
    membership: Membership = None
    metrics: dict = field(default_factory=dict)
    evidence: object = None   # the verifier's Evidence (verify.<method>): what it compares the stored release with
    estimate: EstimateView = None     # anatomy: the BI view of 001's estimate, published with the release
    digests: dict = None      # where the writer puts the digests it took of what it wrote
    #                           (the request's RunState.digests; log/release_log.write_artefacts)

    def drop_written(self) -> None:
        """Forget what the writer stored (tables, RID sets, classes, clusters, membership):
        once written, only the evidence, the counts and the metrics are needed."""
        self.tables, self.rid_sets = [], []
        self.classes = self.clusters = self.membership = None
