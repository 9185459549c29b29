"""Reads an IDX image data set (Fashion-MNIST by default) as ps_worker does.

The four files of a data directory are train-images-idx3-ubyte.gz,
train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and
t10k-labels-idx1-ubyte.gz, gzip-compressed or plain (detected from the first
two bytes, as worker/train/idx_reader.cc does). Pixels are scaled from
[0, 255] to [0, 1]; the class count is 1 + the largest label of either set,
so a model sized from it agrees with ps_worker's on the same files.

Every problem with a file raises DataError naming the file and what is wrong.
"""

import gzip
import os

import numpy as np

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
IMAGES_MAGIC = 0x00000803  # unsigned bytes, 3 dimensions
LABELS_MAGIC = 0x00000801  # unsigned bytes, 1 dimension
GZIP_MAGIC = b"\x1f\x8b"


class DataError(Exception):
    """A data file is missing or malformed; the message names the file."""


def read_idx(path, expected_magic):
    """Returns the uint8 array an IDX file holds, shaped by its header."""
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such file; install the dataset-fashion-mnist package "
                        "(deploy/setup.sh does) or pass --data_dir")
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise DataError(f"{path}: corrupt gzip stream ({err})") from None
    if len(raw) < 4:
        raise DataError(f"{path}: {len(raw)} bytes, too short for an IDX magic number")
    magic = int.from_bytes(raw[:4], "big")
    if magic != expected_magic:
        raise DataError(f"{path}: magic number 0x{magic:08x}, expected 0x{expected_magic:08x}")
    ndim = magic & 0xFF
    header_bytes = 4 * (1 + ndim)
    if len(raw) < header_bytes:
        raise DataError(f"{path}: truncated header ({len(raw)} bytes, {header_bytes} needed)")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    count = int(np.prod(shape, dtype=np.int64))
    if len(raw) - header_bytes != count:
        raise DataError(f"{path}: header says {shape} = {count} bytes of data, "
                        f"the file holds {len(raw) - header_bytes}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header_bytes).reshape(shape)


def read_split(data_dir, prefix):
    """(images float32 [n, rows*cols] in [0, 1], labels int64 [n]) of 'train' or 't10k'."""
    images_path = os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz")
    labels_path = os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz")
    images = read_idx(images_path, IMAGES_MAGIC)
    labels = read_idx(labels_path, LABELS_MAGIC)
    if images.shape[0] != labels.shape[0]:
        raise DataError(f"{images_path} holds {images.shape[0]} images but {labels_path} "
                        f"holds {labels.shape[0]} labels")
    pixels = images.reshape(images.shape[0], -1).astype(np.float32)
    pixels /= np.float32(255.0)
    return pixels, labels.astype(np.int64)


def read_train_test(data_dir=DEFAULT_DATA_DIR):
    """Returns (x_train, y_train, x_test, y_test, num_classes)."""
    x_test, y_test = read_split(data_dir, "t10k")
    x_train, y_train = read_split(data_dir, "train")
    if x_train.shape[1] != x_test.shape[1]:
        raise DataError(f"{data_dir}: training images have {x_train.shape[1]} pixels, "
                        f"test images {x_test.shape[1]}")
    if x_train.shape[0] == 0:
        raise DataError(f"{data_dir}: the training set is empty")
    num_classes = 1 + int(max(y_train.max(), y_test.max() if y_test.size else 0))
    return x_train, y_train, x_test, y_test, num_classes


def shard(x, y, worker_index, num_workers, max_examples=0):
    """Worker i of n gets examples i, i + n, ... of the first max_examples (0: all)."""
    if max_examples > 0:
        x, y = x[:max_examples], y[:max_examples]
    return x[worker_index::num_workers], y[worker_index::num_workers]
