"""RowCache: a worker's cache of sparse-table rows, bounded by staleness.

The Python twin of worker/train/row_cache.h (ps_worker --row_cache_staleness
and --row_cache_rows): a row pulled at clock c may be served at clocks up to
c + staleness and never later, so what it returns is at most `staleness`
clocks old, the bound bounded delay gives. At most `capacity` rows are held;
when it is full, the rows pulled longest ago make room (an eighth of the
capacity at once, so that the scan for them is paid rarely).

Rows live in one NumPy array (no object per row); a dict maps a key to its
slot. Not thread-safe: one per module, used by its forward.
"""

import numpy as np

_GROWTH_ROWS = 4096  # first allocation; it doubles up to the capacity


class RowCache:
    def __init__(self, width: int, staleness: int, capacity: int) -> None:
        if width < 1 or staleness < 0 or capacity < 0:
            raise ValueError(f"RowCache: width={width}, staleness={staleness}, "
                             f"capacity={capacity}: expected width >= 1, the others >= 0")
        self.width = width
        self.staleness = staleness
        self.capacity = capacity
        self._slot = {}  # key (int) -> slot
        self._keys = np.zeros(0, dtype=np.uint64)  # by slot
        self._clocks = np.zeros(0, dtype=np.int64)  # by slot: the clock of the pull
        self._values = np.zeros((0, width), dtype=np.float32)
        self._used = np.zeros(0, dtype=bool)
        self._free = []  # slots below len(self._used) not in use
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._slot)

    def _slots_of(self, keys: np.ndarray) -> np.ndarray:
        get = self._slot.get
        return np.fromiter((get(k, -1) for k in keys.tolist()), dtype=np.int64, count=len(keys))

    def lookup(self, keys: np.ndarray, clock: int, out: np.ndarray) -> np.ndarray:
        """Copies into out[i] the row of keys[i] if it was pulled at a clock c with
        clock <= c + staleness; returns the mask of the keys so served."""
        slots = self._slots_of(keys)
        hit = slots >= 0
        if hit.any():
            cached = np.flatnonzero(hit)
            fresh = cached[clock <= self._clocks[slots[cached]] + self.staleness]
            hit[:] = False
            hit[fresh] = True
            out[fresh] = self._values[slots[fresh]]
        served = int(np.count_nonzero(hit))
        self.hits += served
        self.misses += len(keys) - served
        return hit

    def insert(self, keys: np.ndarray, clock: int, values: np.ndarray) -> None:
        """Remembers the rows of `keys` (distinct) as pulled at `clock`."""
        if self.capacity == 0 or len(keys) == 0:
            return
        if len(keys) > self.capacity:  # only the last capacity rows fit
            keys, values = keys[-self.capacity:], values[-self.capacity:]
        slots = self._slots_of(keys)
        new = slots < 0
        num_new = int(np.count_nonzero(new))
        if len(self._slot) + num_new > self.capacity:
            self._evict(len(self._slot) + num_new - self.capacity)
            slots = self._slots_of(keys)  # an evicted row may have been one of these
            new = slots < 0
            num_new = int(np.count_nonzero(new))
        if num_new:
            fresh_slots = self._allocate(num_new)
            slots[new] = fresh_slots
            for key, slot in zip(keys[new].tolist(), fresh_slots.tolist()):
                self._slot[key] = slot
        self._keys[slots] = keys
        self._clocks[slots] = clock
        self._values[slots] = values
        self._used[slots] = True

    def _allocate(self, n: int) -> np.ndarray:
        reused = [self._free.pop() for _ in range(min(n, len(self._free)))]
        grown = n - len(reused)
        first = len(self._used)
        if grown:
            size = max(first + grown, min(self.capacity, max(_GROWTH_ROWS, 2 * first)))
            self._keys = np.resize(self._keys, size)
            self._clocks = np.resize(self._clocks, size)
            self._values = np.resize(self._values, (size, self.width))
            used = np.zeros(size, dtype=bool)
            used[:first] = self._used
            self._used = used
            self._free.extend(range(size - 1, first + grown - 1, -1))
        return np.array(reused + list(range(first, first + grown)), dtype=np.int64)

    def _evict(self, at_least: int) -> None:
        """Frees the slots of the rows pulled longest ago: at least `at_least`."""
        used = np.flatnonzero(self._used)
        n = min(len(used), max(at_least, self.capacity // 8))
        if n < len(used):
            victims = used[np.argpartition(self._clocks[used], n - 1)[:n]]
        else:
            victims = used
        for key in self._keys[victims].tolist():
            del self._slot[key]
        self._used[victims] = False
        self._free.extend(victims.tolist())
