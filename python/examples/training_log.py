"""Progress lines and the training-curve CSV of an example worker.

The lines read like ps_worker's ("worker 0/4 epoch 2 step 938 loss 0.4595
examples/s 7366"), and the CSV has the columns of ps_worker --curve_csv
(worker/train/training_observer.h), so deploy/plot_training.sh plots Python
and C++ workers alike. The staleness column stays empty: the Python client
does not report the versions a push reached.
"""

import time

CSV_HEADER = ("seconds,epoch,step,examples,loss,examples_per_second,staleness,test_metric,"
              "test_value\n")


class ProgressLog:
    """Averages loss and speed over windows of `interval` seconds and prints them."""

    def __init__(self, who, interval, curve_csv=""):
        self.who = who
        self.interval = interval
        self.start = time.perf_counter()
        self.window_start = self.start
        self.window_loss = 0.0
        self.window_steps = 0
        self.window_examples = 0
        self.last_row = None
        self.csv = None
        if curve_csv:
            try:
                self.csv = open(curve_csv, "w", encoding="utf-8")
            except OSError as err:
                raise ValueError(f"--curve_csv={curve_csv}: cannot create it: {err.strerror}")
            self.csv.write(CSV_HEADER)
            self.csv.flush()

    def step(self, epoch, step, examples, loss, batch, epoch_end):
        """Records one step; prints a line when the window is over or the epoch ends."""
        self.window_loss += loss
        self.window_steps += 1
        self.window_examples += batch
        now = time.perf_counter()
        if now - self.window_start < self.interval and not epoch_end:
            return
        seconds = now - self.window_start
        mean_loss = self.window_loss / self.window_steps
        rate = self.window_examples / seconds if seconds > 0 else 0.0
        print(f"{self.who} epoch {epoch} step {step} loss {mean_loss:.4f} examples/s {rate:.0f}"
              f"{' (epoch end)' if epoch_end else ''}", flush=True)
        self.last_row = (now - self.start, epoch, step, examples, mean_loss, rate)
        if self.csv:
            self.csv.write("%.3f,%d,%d,%d,%.6f,%.1f,,,\n" % self.last_row)
            self.csv.flush()  # readable while training goes on
        self.window_start = now
        self.window_loss = 0.0
        self.window_steps = 0
        self.window_examples = 0

    def finish(self, metric, value):
        """Writes the CSV's last row: the last point again with the test result."""
        if self.csv:
            row = self.last_row or (time.perf_counter() - self.start, 0, 0, 0, 0.0, 0.0)
            self.csv.write("%.3f,%d,%d,%d,%.6f,%.1f,," % row + f"{metric},{value:.4f}\n")
            self.csv.close()
            self.csv = None
