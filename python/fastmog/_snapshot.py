"""MOG2 snapshots on disk: the dict a subtractor's snapshot() gives, as one
.npz file (numpy's zip of arrays, no pickles), written whole or not at all.

The file holds the four arrays under their names and "meta", the rest of
the snapshot (format, version, parameters, geometry, frames_seen) as UTF-8
JSON in a uint8 array. Reading it back checks what a file can get wrong
(not a zip, a member missing or damaged: zip's CRC-32 is checked as each
array is read); restore() checks the snapshot itself.
"""
from __future__ import annotations

import json
import os
import tempfile
import zipfile

import numpy as np

ARRAYS = ("weight", "variance", "mean", "mode_count")


def save_snapshot(path, snapshot) -> None:
    """Writes `snapshot` (from snapshot()) to `path` (.npz is added by numpy
    when missing, so give it): first under a hidden name beside it, then
    renamed, so `path` is never a half-written file, even on a full disk or
    a crash."""
    if not isinstance(snapshot, dict) or any(name not in snapshot for name in ARRAYS):
        raise TypeError("save_snapshot takes the dict a subtractor's snapshot() returns")
    path = os.fspath(path)
    meta = {k: v for k, v in snapshot.items() if k not in ARRAYS}
    folder, name = os.path.split(path)
    # a name of this write's own: two writers of one path never share it
    fd, partial = tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=folder or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8),
                     **{k: snapshot[k] for k in ARRAYS})
            f.flush()
            os.fsync(f.fileno())
        os.chmod(partial, 0o644)            # mkstemp's 0600 is for the hidden name only
        os.replace(partial, path)
    except BaseException:
        try:
            os.unlink(partial)
        except OSError:
            pass
        raise


def load_snapshot(path) -> dict:
    """The snapshot in the file `path` (written by save_snapshot), as the dict
    restore() takes. ValueError, naming the file, for anything that is not
    a whole snapshot file; OSError when it cannot be read."""
    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in ("meta", *ARRAYS) if k not in npz.files]
            if missing:
                raise ValueError(f"it lacks {', '.join(missing)}")
            meta = json.loads(npz["meta"].tobytes().decode())
            if not isinstance(meta, dict):
                raise ValueError("its meta is not a JSON object")
            snapshot = {k: npz[k] for k in ARRAYS}
    except (ValueError, zipfile.BadZipFile, EOFError, UnicodeDecodeError, KeyError) as e:
        raise ValueError(f"{path} is not a whole fastmog MOG2 snapshot file: {e}") from None
    snapshot.update(meta)
    return snapshot
