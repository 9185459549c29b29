"""Where a Trainer's progress goes: ps_worker's lines on stdout, its
training-curve CSV (ps_worker --curve_csv's columns, so deploy/plot_training.sh
plots Python and C++ workers alike), and a progress bar on stderr drawn by
Debian's python3-tqdm.

Thread-safe: lines may come from the training thread and from the thread
that waits for a checkpoint.
"""

import sys
import threading
from typing import Optional, TextIO, Tuple

CSV_HEADER = ("seconds,epoch,step,examples,loss,examples_per_second,staleness,test_metric,"
              "test_value\n")


def _tqdm():
    try:
        from tqdm import tqdm  # Debian's python3-tqdm
    except ImportError:
        return None
    return tqdm


class Progress:
    """Lines, curve and bar of one worker's training.

    bar: True draws a bar (ImportError when tqdm is missing), False none,
    None one when stderr is a terminal and tqdm is installed.
    """

    def __init__(self, curve_csv: str = "", bar: Optional[bool] = None,
                 out: Optional[TextIO] = None) -> None:
        self._lock = threading.Lock()
        self._out = out  # None: sys.stdout at the time of each line
        self._bar = None
        self._bar_wanted = bar
        self._last_row: Optional[Tuple] = None
        self._csv = None
        if curve_csv:
            try:
                self._csv = open(curve_csv, "w", encoding="utf-8")
            except OSError as err:
                raise ValueError(f"--curve_csv={curve_csv}: cannot create it: {err.strerror}")
            self._csv.write(CSV_HEADER)
            self._csv.flush()

    def start_bar(self, total: int, initial: int, desc: str) -> None:
        """Shows the bar (if wanted) for steps initial .. total."""
        tqdm = _tqdm()
        wanted = self._bar_wanted
        if wanted is None:
            wanted = tqdm is not None and sys.stderr.isatty()
        if not wanted:
            return
        if tqdm is None:
            raise ImportError("a progress bar needs tqdm: apt-get install python3-tqdm "
                              "(and run /usr/bin/python3), or turn the bar off")
        self._bar = tqdm(total=total, initial=initial, desc=desc, unit="step", file=sys.stderr,
                         dynamic_ncols=True, mininterval=0.5)

    def advance(self, steps: int = 1, **postfix: str) -> None:
        if self._bar is None:
            return
        with self._lock:
            if postfix:
                self._bar.set_postfix(postfix, refresh=False)
            self._bar.update(steps)

    def line(self, text: str) -> None:
        """One line on stdout, flushed (launchers stream them), above the bar."""
        out = self._out or sys.stdout
        with self._lock:
            if self._bar is not None:
                self._bar.write(text, file=out)
                out.flush()
            else:
                print(text, file=out, flush=True)

    def point(self, seconds: float, epoch: int, step: int, examples: int, loss: float,
              examples_per_second: float, staleness: float) -> None:
        """A row of the curve."""
        with self._lock:
            self._last_row = (seconds, epoch, step, examples, loss, examples_per_second, staleness)
            if self._csv:
                self._csv.write("%.3f,%d,%d,%d,%.6f,%.1f,%.3f,,\n" % self._last_row)
                self._csv.flush()  # readable while training goes on

    def close_bar(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def finish(self, metric: str, value: float) -> None:
        """The curve's last row: the last point again, with the test result."""
        self.close_bar()
        with self._lock:
            if self._csv:
                row = self._last_row or (0.0, 0, 0, 0, 0.0, 0.0, 0.0)
                self._csv.write("%.3f,%d,%d,%d,%.6f,%.1f,%.3f," % row + f"{metric},{value:.4f}\n")
                self._csv.close()
                self._csv = None
