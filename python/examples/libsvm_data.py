"""Reads a binary-labelled LibSVM or libffm file (plain or gzip) into flat NumPy arrays.

Lines are `label index:value ...` or, with fields (libffm, as ps_gen_libsvm
--num_fields writes them), `label field:index:value ...`, with labels 0/1 or
-1/+1 (also written 0.0/1.0) and indices any uint64 (worker/train/
libsvm_reader.h has the full format). A plain `index:value` feature is in
field 0. A `qid:N` token is skipped.

The result is CSR-like, the layout torch.nn.functional.embedding_bag takes:
example i has the features ids[offsets[i]:offsets[i + 1]] with the values
values[offsets[i]:offsets[i + 1]] and fields fields[...], its features
ordered by field (stably), so that bags(F) can cut each example into one
bag per field.
"""

import gzip
import re

import numpy as np

from idx_data import DataError, GZIP_MAGIC


class LibsvmData:
    def __init__(self, labels, offsets, ids, values, fields=None, path=""):
        self.labels = labels    # float32 [n], 0 or 1
        self.offsets = offsets  # int64 [n + 1]
        self.ids = ids          # uint64 [nnz]
        self.values = values    # float32 [nnz]
        self.fields = np.zeros(ids.shape[0], np.int32) if fields is None else fields  # [nnz]
        self.path = path        # for messages

    def __len__(self):
        return self.labels.shape[0]

    def __getitem__(self, rows):
        return self.select(rows)

    def bag_offsets(self, num_fields):
        """Offsets of len(self) * num_fields bags, example-major: bag i * F + f
        holds example i's features of field f (empty when it has none).

        Raises DataError naming the file when a feature's field is F or more.
        """
        if self.fields.shape[0] and int(self.fields.max()) >= num_fields:
            field = int(self.fields.max())
            raise DataError(f"{self.path}: a feature has field {field}, but the model has "
                            f"{num_fields} field(s) (--num_fields={num_fields}); fields must be "
                            f"in [0, {num_fields})")
        n = len(self)
        example = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.offsets))
        counts = np.bincount(example * num_fields + self.fields, minlength=n * num_fields)
        offsets = np.zeros(n * num_fields, dtype=np.int64)
        np.cumsum(counts[:-1], out=offsets[1:])
        return offsets

    def select(self, rows):
        """The examples `rows` (an index array), in that order, as one LibsvmData."""
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        counts = ends - starts
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        # Positions of every selected feature: each row's start, then +1 along the row.
        within = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1], counts)
        positions = np.repeat(starts, counts) + within
        return LibsvmData(self.labels[rows], offsets, self.ids[positions],
                          self.values[positions], self.fields[positions], self.path)


# Whole `index:value` and `field:index:value` tokens: the common cases, parsed
# by the regular expression engine rather than token by token in Python.
FEATURE = re.compile(r"(?:^|(?<=\s))(\d+):([^\s:]+)(?=\s|$)")
FIELD_FEATURE = re.compile(r"(?:^|(?<=\s))(\d+):(\d+):([^\s:]+)(?=\s|$)")
MAX_FIELD = 65535  # as worker/train/libsvm_reader.h


def _parse_label(path, number, token):
    try:
        value = float(token)
    except ValueError:
        raise DataError(f"{path}:{number}: expected a label (0, 1, -1 or +1), got '{token}'")
    if value == 1.0:
        return 1.0
    if value in (0.0, -1.0):
        return 0.0
    raise DataError(f"{path}:{number}: label '{token}' is not binary (0, 1, -1 or +1)")


def _parse_features_slowly(path, number, tokens, ids, values, fields):
    """Token by token: skips qid:N and a trailing #comment, names the first bad token."""
    for column, token in enumerate(tokens, 2):
        if token.startswith("#"):
            break
        parts = token.split(":")
        if parts[0] == "qid":
            continue
        if len(parts) not in (2, 3):
            raise DataError(f"{path}:{number}: token {column}: expected index:value or "
                            f"field:index:value, got '{token}'")
        try:
            field = int(parts[0]) if len(parts) == 3 else 0
            feature = int(parts[-2])
            value = float(parts[-1])
        except ValueError:
            raise DataError(f"{path}:{number}: token {column}: expected index:value with an "
                            f"unsigned integer index, got '{token}'") from None
        if not 0 <= feature < 1 << 64:
            raise DataError(f"{path}:{number}: token {column}: index {feature} is not a 64-bit "
                            "unsigned integer")
        if not 0 <= field <= MAX_FIELD:
            raise DataError(f"{path}:{number}: token {column}: field {field} is not in "
                            f"[0, {MAX_FIELD}]")
        ids.append(feature)
        values.append(value)
        fields.append(field)


def _open_text(path):
    """The file as text lines, gunzipped when it starts with gzip's magic bytes."""
    try:
        with open(path, "rb") as f:
            gzipped = f.read(2) == GZIP_MAGIC
        if gzipped:
            return gzip.open(path, "rt", encoding="ascii", errors="replace")
        return open(path, "rt", encoding="ascii", errors="replace")
    except OSError as err:
        raise DataError(f"{path}: cannot read it: {err.strerror}") from None


def read_libsvm(path, shard_index=0, num_shards=1, max_examples=0):
    """Examples shard_index, shard_index + num_shards, ... of the first max_examples (0: all).

    Streams the file: other shards' lines are skipped without being parsed.
    """
    if not path:
        raise DataError("no LibSVM file given (--train_data, --test_data)")
    labels, offsets, ids, values, fields = [], [0], [], [], []
    index = 0
    with _open_text(path) as lines:
        try:
            for number, line in enumerate(lines, 1):
                line = line.lstrip()
                if not line or line[0] == "#":
                    continue
                if max_examples and index >= max_examples:
                    break
                mine = index % num_shards == shard_index
                index += 1
                if not mine:
                    continue  # another worker's example: not parsed
                tokens = line.split()
                labels.append(_parse_label(path, number, tokens[0]))
                pairs = FEATURE.findall(line, len(tokens[0]))
                triples = [] if pairs else FIELD_FEATURE.findall(line, len(tokens[0]))
                if pairs and len(pairs) == len(tokens) - 1:
                    feature_ids, feature_values = zip(*pairs)
                    ids.extend(map(int, feature_ids))
                    values.extend(map(float, feature_values))
                    fields.extend([0] * len(pairs))
                elif (triples and len(triples) == len(tokens) - 1
                      and max(int(t[0]) for t in triples) <= MAX_FIELD):
                    feature_fields, feature_ids, feature_values = zip(*triples)
                    ids.extend(map(int, feature_ids))
                    values.extend(map(float, feature_values))
                    fields.extend(map(int, feature_fields))
                elif len(tokens) > 1:  # names the first bad token
                    _parse_features_slowly(path, number, tokens[1:], ids, values, fields)
                offsets.append(len(ids))
        except (OSError, EOFError) as err:
            raise DataError(f"{path}: corrupt gzip stream ({err})") from None
    try:
        ids = np.asarray(ids, dtype=np.uint64)
    except OverflowError:
        too_large = next(feature for feature in ids if feature >= 1 << 64)
        raise DataError(f"{path}: feature index {too_large} does not fit 64 bits") from None
    offsets = np.asarray(offsets, dtype=np.int64)
    values = np.asarray(values, dtype=np.float32)
    fields = np.asarray(fields, dtype=np.int32)
    if fields.shape[0] and fields.max() > 0:
        # Each example's features by field (stably): bag_offsets' layout.
        example = np.repeat(np.arange(offsets.shape[0] - 1), np.diff(offsets))
        order = np.lexsort((fields, example))
        ids, values, fields = ids[order], values[order], fields[order]
    return LibsvmData(np.asarray(labels, dtype=np.float32), offsets, ids, values, fields, path)
