"""Unit tests of the examples' pieces that need no server: the IDX and LibSVM
readers (fields and bags included), the sharding and batch selection. The
AUC and the curve CSV are paramserver.torch's (python/tests/torch_parts_test.py)."""

import gzip
import os
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import idx_data  # noqa: E402
import libsvm_data  # noqa: E402
from idx_data import DataError  # noqa: E402


def idx_bytes(magic, shape, data):
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in shape)
    return header + bytes(data)


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))

    def write(self, name, content, gzipped=False):
        path = os.path.join(self.dir, name)
        mode = "wb" if isinstance(content, bytes) else "wt"
        with (gzip.open(path, mode) if gzipped else open(path, mode)) as f:
            f.write(content)
        return path


class IdxDataTest(TempDirTest):
    def write_split(self, prefix, images, labels, gzipped):
        n, rows, cols = images.shape
        self.write(f"{prefix}-images-idx3-ubyte.gz",
                   idx_bytes(idx_data.IMAGES_MAGIC, (n, rows, cols), images.ravel()), gzipped)
        self.write(f"{prefix}-labels-idx1-ubyte.gz",
                   idx_bytes(idx_data.LABELS_MAGIC, (n,), labels), gzipped)

    def test_reads_gzip_and_plain_files_scaled_with_classes_from_both_sets(self):
        train = np.arange(5 * 2 * 3, dtype=np.uint8).reshape(5, 2, 3) * 8
        self.write_split("train", train, [0, 1, 2, 1, 0], gzipped=True)
        self.write_split("t10k", np.full((2, 2, 3), 255, np.uint8), [3, 0], gzipped=False)
        x, y, x_test, y_test, classes = idx_data.read_train_test(self.dir)
        self.assertEqual(x.shape, (5, 6))
        self.assertEqual(x.dtype, np.float32)
        np.testing.assert_allclose(x[1], train[1].ravel() / 255.0, rtol=1e-6)
        np.testing.assert_array_equal(y, [0, 1, 2, 1, 0])
        np.testing.assert_array_equal(x_test, np.ones((2, 6), np.float32))
        self.assertEqual(classes, 4)  # 1 + the largest label of either set

    def test_shard_takes_every_nth_example_of_the_head(self):
        x = np.arange(10).reshape(10, 1)
        y = np.arange(10)
        xs, ys = idx_data.shard(x, y, 1, 3, max_examples=8)
        np.testing.assert_array_equal(ys, [1, 4, 7])
        np.testing.assert_array_equal(xs[:, 0], [1, 4, 7])

    def test_errors_name_the_file_and_the_problem(self):
        path = self.write("bad_magic", idx_bytes(0x00000802, (1,), [0]))
        with self.assertRaisesRegex(DataError, "bad_magic: magic number 0x00000802, expected "
                                               "0x00000801"):
            idx_data.read_idx(path, idx_data.LABELS_MAGIC)
        path = self.write("short", idx_bytes(idx_data.LABELS_MAGIC, (3,), [0, 1]))
        with self.assertRaisesRegex(DataError, r"short: header says \(3,\) = 3 bytes of data, "
                                               "the file holds 2"):
            idx_data.read_idx(path, idx_data.LABELS_MAGIC)
        with self.assertRaisesRegex(DataError, "missing: no such file"):
            idx_data.read_idx(os.path.join(self.dir, "missing"), idx_data.LABELS_MAGIC)
        self.write_split("train", np.zeros((2, 1, 1), np.uint8), [0, 1], gzipped=True)
        self.write("t10k-images-idx3-ubyte.gz",
                   idx_bytes(idx_data.IMAGES_MAGIC, (1, 1, 1), [0]), gzipped=True)
        self.write("t10k-labels-idx1-ubyte.gz",
                   idx_bytes(idx_data.LABELS_MAGIC, (2,), [0, 1]), gzipped=True)
        with self.assertRaisesRegex(DataError, "holds 1 images but .* holds 2 labels"):
            idx_data.read_train_test(self.dir)


class LibsvmDataTest(TempDirTest):
    def test_reads_labels_features_qid_comments_and_full_uint64_ids(self):
        path = self.write("a.svm", "1 5:1 qid:3 7:0.5 # comment\n"
                                   "# a comment line\n"
                                   "-1 18446744073709551615:2\n"
                                   "\n"
                                   "0.0 3:1\t4:1\n"
                                   "+1\n")
        data = libsvm_data.read_libsvm(path)
        np.testing.assert_array_equal(data.labels, [1, 0, 0, 1])
        np.testing.assert_array_equal(data.offsets, [0, 2, 3, 5, 5])
        self.assertEqual(data.ids.dtype, np.uint64)
        np.testing.assert_array_equal(data.ids, np.array([5, 7, 2**64 - 1, 3, 4], np.uint64))
        np.testing.assert_array_equal(data.values, [1, 0.5, 2, 1, 1])

    def test_shards_gzip_and_max_examples(self):
        lines = "".join(f"{i % 2} {i}:1 {i + 100}:1\n" for i in range(10))
        path = self.write("b.svm.gz", lines, gzipped=True)
        data = libsvm_data.read_libsvm(path, shard_index=1, num_shards=3, max_examples=8)
        np.testing.assert_array_equal(data.ids, np.array([1, 101, 4, 104, 7, 107], np.uint64))
        np.testing.assert_array_equal(data.labels, [1, 0, 1])

    def test_select_keeps_each_rows_features_in_the_given_order(self):
        path = self.write("c.svm", "1 1:1 2:1\n0 3:1\n1 4:1 5:1 6:1\n")
        data = libsvm_data.read_libsvm(path)
        batch = data.select(np.array([2, 0]))
        np.testing.assert_array_equal(batch.offsets, [0, 3, 5])
        np.testing.assert_array_equal(batch.ids, np.array([4, 5, 6, 1, 2], np.uint64))
        np.testing.assert_array_equal(batch.labels, [1, 1])

    def test_fields_sort_each_example_and_cut_it_into_bags(self):
        # libffm lines (field:index:value), a plain feature being in field 0.
        path = self.write("f.svm", "1 2:20:1 0:5:0.5 1:7:1 0:9:2\n0 9:1\n1 1:3:1 3:4:1 0:1:1\n")
        data = libsvm_data.read_libsvm(path)
        np.testing.assert_array_equal(data.offsets, [0, 4, 5, 8])
        np.testing.assert_array_equal(data.ids, np.array([5, 9, 7, 20, 9, 1, 3, 4], np.uint64))
        np.testing.assert_array_equal(data.fields, [0, 0, 1, 2, 0, 0, 1, 3])
        np.testing.assert_array_equal(data.values, [0.5, 2, 1, 1, 1, 1, 1, 1])
        batch = data[np.array([2, 0])]
        # Bag 2i + f: example i's features of field f (2 fields of example 2's 4 are empty).
        with self.assertRaisesRegex(DataError, "f.svm: a feature has field 3, but the model "
                                               r"has 2 field\(s\) \(--num_fields=2\)"):
            batch.bag_offsets(2)
        np.testing.assert_array_equal(batch.bag_offsets(4), [0, 1, 2, 2, 3, 5, 6, 7])
        np.testing.assert_array_equal(batch.ids, np.array([1, 3, 4, 5, 9, 7, 20], np.uint64))
        np.testing.assert_array_equal(data[np.array([1])].bag_offsets(1), [0])

    def test_errors_name_the_file_line_and_token(self):
        cases = [
            ("1 5:1:1:1 7\n", r":1: token 2: expected index:value or field:index:value"),
            ("1 5:1 7\n", r":1: token 3: expected index:value or field:index:value, got '7'"),
            ("1 70000:1:1\n", r":1: token 2: field 70000 is not in \[0, 65535\]"),
            ("1 x:1\n", r":1: token 2: expected index:value with an unsigned integer index"),
            ("1 -3:1\n", r":1: token 2: index -3 is not a 64-bit unsigned integer"),
            ("0 1:1\n2 3:1\n", r":2: label '2' is not binary"),
            ("yes 3:1\n", r":1: expected a label \(0, 1, -1 or \+1\), got 'yes'"),
            ("1 18446744073709551616:1\n", r": feature index 18446744073709551616 does not fit"),
        ]
        for text, message in cases:
            path = self.write("bad.svm", text)
            with self.subTest(text=text), self.assertRaisesRegex(DataError, "bad.svm" + message):
                libsvm_data.read_libsvm(path)
        with self.assertRaisesRegex(DataError, "nothing.svm: cannot read it"):
            libsvm_data.read_libsvm(os.path.join(self.dir, "nothing.svm"))
        with self.assertRaisesRegex(DataError, r"no LibSVM file given \(--train_data"):
            libsvm_data.read_libsvm("")


if __name__ == "__main__":
    unittest.main()
