"""Reads a binary-labelled LibSVM file (plain or gzip) into flat NumPy arrays.

Lines are `label index:value index:value ...` with labels 0/1 or -1/+1 (also
written 0.0/1.0) and indices any uint64, as ps_gen_libsvm writes them
(worker/train/libsvm_reader.h has the full format). A `qid:N` token is
skipped. libffm lines (`field:index:value`) are refused: this example sums
all of an example's features into one bag.

The result is CSR-like, the layout torch.nn.functional.embedding_bag takes:
example i has the features ids[offsets[i]:offsets[i + 1]] with the values
values[offsets[i]:offsets[i + 1]].
"""

import gzip
import re

import numpy as np

from idx_data import DataError, GZIP_MAGIC


class LibsvmData:
    def __init__(self, labels, offsets, ids, values):
        self.labels = labels    # float32 [n], 0 or 1
        self.offsets = offsets  # int64 [n + 1]
        self.ids = ids          # uint64 [nnz]
        self.values = values    # float32 [nnz]

    def __len__(self):
        return self.labels.shape[0]

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
                          self.values[positions])


# A whole `index:value` token (no other colon in it): the common case, parsed
# by the regular expression engine rather than token by token in Python.
FEATURE = re.compile(r"(?:^|(?<=\s))(\d+):([^\s:]+)(?=\s|$)")


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


def _parse_features_slowly(path, number, tokens, ids, values):
    """Token by token: skips qid:N and a trailing #comment, names the first bad token."""
    for column, token in enumerate(tokens, 2):
        if token.startswith("#"):
            break
        parts = token.split(":")
        if parts[0] == "qid":
            continue
        if len(parts) != 2:
            what = ("a libffm field:index:value feature, which this example does not read "
                    "(write the file without --num_fields)") if len(parts) == 3 else "index:value"
            raise DataError(f"{path}:{number}: token {column}: expected {what}, got '{token}'")
        try:
            feature = int(parts[0])
            value = float(parts[1])
        except ValueError:
            raise DataError(f"{path}:{number}: token {column}: expected index:value with an "
                            f"unsigned integer index, got '{token}'") from None
        if not 0 <= feature < 1 << 64:
            raise DataError(f"{path}:{number}: token {column}: index {feature} is not a 64-bit "
                            "unsigned integer")
        ids.append(feature)
        values.append(value)


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
    labels, offsets, ids, values = [], [0], [], []
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
                if len(pairs) == len(tokens) - 1:
                    if pairs:
                        feature_ids, feature_values = zip(*pairs)
                        ids.extend(map(int, feature_ids))
                        values.extend(map(float, feature_values))
                else:
                    _parse_features_slowly(path, number, tokens[1:], ids, values)
                offsets.append(len(ids))
        except (OSError, EOFError) as err:
            raise DataError(f"{path}: corrupt gzip stream ({err})") from None
    try:
        ids = np.asarray(ids, dtype=np.uint64)
    except OverflowError:
        too_large = next(feature for feature in ids if feature >= 1 << 64)
        raise DataError(f"{path}: feature index {too_large} does not fit 64 bits") from None
    return LibsvmData(np.asarray(labels, dtype=np.float32), np.asarray(offsets, dtype=np.int64),
                      ids, np.asarray(values, dtype=np.float32))
