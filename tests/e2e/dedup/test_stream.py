#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Files chunked while they are written (streams), through the mount.

- Every sealed class, written front to back by dd, cp and a Python writer
  (1 MiB writes): readable byte-exact while being written, "streaming"
  in trusted.fratier.state as soon as the first write returned, sealed from
  the stream after close (the daemon's status counts it), byte-exact then
  and after a remount.
- Streams that end before close: a write past the end (a hole), a truncate,
  a rewrite in place (the file becomes passthrough and stays raw, as any
  rewritten file), an O_APPEND reopen of a sealed file.  Each drops its
  stream at once and ends byte-exact, sealed (but the rewritten one).
- More writers at once than stream_max: the daemon never runs more streams
  than that, the others are sealed after close, everything byte-exact;
  meanwhile the state xattr of those files and setattr and xattrs of the
  mount root are hammered (entries pinned and unpinned under sanitizers).
- seal_stream=0: no stream ever, files still sealed.

The collector is kept away (gc_interval=3600): no stream starts while it
waits for writers, which would make "streaming" a matter of timing.

env: FRATIER_SEAL_TIMEOUT, FRATIER_KEEP.
"""

import os
import random
import shutil
import subprocess
import tempfile
import threading

import harness
import dedupcommon as dc

STREAM_MAX = 3
OPTIONS = ["seal_delay=0", "gc_interval=3600", "stream_max=%d" % STREAM_MAX, "seal_workers=2", "seal_stream=1"]
CLASSES = {  # mount-relative directory, file name pattern, the class the daemon must report
    "archivelog": ("ORCL/archivelog/2026_12_01", "o1_mf_1_%d_abc.arc"),
    "archivelogbackup": ("ORCL/backupset/2026_12_01", "o1_mf_annnn_TAG%d_x.bkp"),
    "backuppiece": ("ORCL/backupset/2026_12_01", "o1_mf_nnndf_TAG%d_x.bkp"),
    "imagecopy": ("ORCL/datafile", "o1_mf_users_%d_x.dbf"),
    "other": ("misc", "file%d.dat"),
}


class StreamTest:
    def __init__(self, res):
        self.res = res
        self.rng = random.Random(7)
        self.content = dc.Content(7)
        self.fs = harness.Fratier(options=OPTIONS)
        self.src = tempfile.mkdtemp(prefix="fratier-stream-src-", dir=os.environ.get("FRATIER_TMP"))
        self.model = {}  # mount-relative path -> bytes

    def p(self, rel):
        return self.fs.path(rel)

    def status(self):
        return dc.status(self.fs)

    def make(self, size):
        return self.content.make(size, rng=random.Random(self.rng.random()))

    def expect_state(self, rel, want, what):
        st = dc.state_words(self.p(rel))
        return self.res.check(st[:2] == list(want[:2]) and ("streaming" in st[2:]) == want[2],
                              "%s: %s is %r, expected %r" % (what, rel, st, want))

    def check_all(self, what):
        dc.check_sealed(self.res, [self.p(r) for r in self.model], what)
        for rel, data in sorted(self.model.items()):
            dc.compare(self.res, self.p(rel), data, what)

    # --- every class, by dd, cp and Python -----------------------------------

    def python_writer(self, rel, data, cls):
        """1 MiB writes; after each few, the file is read back and the state looked at."""
        streamed_seen = False
        fd = os.open(self.p(rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for off in range(0, len(data), dc.BLOCK):
                os.write(fd, data[off:off + dc.BLOCK])
                if off // dc.BLOCK % 4 == 0:
                    st = dc.state_words(self.p(rel))
                    self.res.check(st[:2] == ["raw", cls] and "streaming" in st[2:],
                                   "python writer: %s after %d bytes is %r, not streaming" % (rel, off, st))
                    streamed_seen = streamed_seen or (len(st) > 3 and int(st[3]) > 0)
                    dc.compare(self.res, self.p(rel), data[:off + dc.BLOCK], "read while streaming")
            os.fsync(fd)
        finally:
            os.close(fd)
        return streamed_seen

    def every_class(self):
        before = self.status()
        streamed_sure = 0
        classes = {}
        for n, (cls, (d, pattern)) in enumerate(sorted(CLASSES.items())):
            os.makedirs(self.p(d), exist_ok=True)
            size = self.rng.randrange(6 << 20, 14 << 20)
            if cls == "imagecopy":
                size -= size % 8192
            data = self.make(size)
            src = os.path.join(self.src, "%s.src" % cls)
            with open(src, "wb") as f:
                f.write(data)
            for t, tool in enumerate(("dd", "cp", "python")):
                rel = "%s/%s" % (d, pattern % (n * 10 + t))
                if tool == "dd":
                    subprocess.run(["dd", "if=" + src, "of=" + self.p(rel), "bs=1M", "conv=fsync", "status=none"],
                                   check=True)
                elif tool == "cp":
                    subprocess.run(["cp", src, self.p(rel)], check=True)
                else:
                    # Every stream of the files before has ended: this one cannot find stream_max reached.
                    dc.check_sealed(self.res, [self.p(r) for r in self.model], "before the python writer")
                    streamed_sure += self.python_writer(rel, data, cls)
                self.model[rel] = data
                classes[rel] = cls
        self.check_all("every class, after seal")
        for rel, cls in sorted(classes.items()):
            st = dc.state(self.p(rel))
            self.res.check(st == ("sealed", cls), "%s is %r, expected sealed %s" % (rel, st, cls))
        after = self.status()
        streamed = after["seals_streamed"] - before["seals_streamed"]
        whole = after["seals_whole"] - before["seals_whole"]
        print("every class: %d files (%d bytes), %d sealed from their stream (%d bytes chunked while written), "
              "%d sealed whole" % (len(self.model), sum(len(v) for v in self.model.values()), streamed,
                                   after["streamed_bytes"] - before["streamed_bytes"], whole), flush=True)
        # A Python writer saw its stream chunk bytes before close: its seal must have used the stream.
        self.res.check(streamed >= streamed_sure, "%d seals from streams, but %d files were seen streaming"
                       % (streamed, streamed_sure))
        self.res.check(after["seal_streams"] == 0, "streams left after every file was sealed: %r"
                       % after["seal_streams"])

    # --- streams that end before close ---------------------------------------

    def ended(self):
        d = CLASSES["backuppiece"][0]
        os.makedirs(self.p(d), exist_ok=True)
        data = self.make(12 << 20)

        # A write past the end leaves a hole and ends the stream; the file is sealed whole.
        rel = d + "/hole.bkp"
        fd = os.open(self.p(rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        expect = bytearray(data[:4 << 20])
        os.write(fd, data[:4 << 20])
        self.expect_state(rel, ("raw", "backuppiece", True), "before the hole")
        os.pwrite(fd, data[5 << 20:8 << 20], 5 << 20)
        expect += bytes(1 << 20) + data[5 << 20:8 << 20]
        self.expect_state(rel, ("raw", "backuppiece", False), "after a write past the end")
        os.lseek(fd, 8 << 20, os.SEEK_SET)
        for off in range(8 << 20, 12 << 20, dc.BLOCK):
            os.write(fd, data[off:off + dc.BLOCK])
        expect += data[8 << 20:12 << 20]
        dc.compare(self.res, self.p(rel), bytes(expect), "hole, before close")
        os.fsync(fd)
        os.close(fd)
        self.model[rel] = bytes(expect)

        # A truncate ends the stream; appends from the new end make a file sealed whole.
        rel = d + "/truncated.bkp"
        fd = os.open(self.p(rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for off in range(0, 6 << 20, dc.BLOCK):
            os.write(fd, data[off:off + dc.BLOCK])
        self.expect_state(rel, ("raw", "backuppiece", True), "before the truncate")
        os.ftruncate(fd, 3 << 20)
        self.expect_state(rel, ("raw", "backuppiece", False), "after the truncate")
        os.lseek(fd, 3 << 20, os.SEEK_SET)
        os.write(fd, data[6 << 20:9 << 20])
        os.fsync(fd)
        os.close(fd)
        self.model[rel] = data[:3 << 20] + data[6 << 20:9 << 20]

        # Truncated to zero and written again from the start: a new stream, sealed from it.
        rel = d + "/again.bkp"
        dc.write_file(self.p(rel), data[:5 << 20], fsync=True)
        # Sealed first: a seal still queued would take the new stream.
        dc.check_sealed(self.res, [self.p(rel)], "before O_TRUNC")
        fd = os.open(self.p(rel), os.O_WRONLY | os.O_TRUNC)
        os.write(fd, data[5 << 20:6 << 20])
        self.expect_state(rel, ("raw", "backuppiece", True), "written again after O_TRUNC")
        os.write(fd, data[6 << 20:10 << 20])
        os.fsync(fd)
        os.close(fd)
        self.model[rel] = data[5 << 20:10 << 20]

        # A rewrite in place: the stream goes, and the file is passthrough from then on.
        rw = d + "/rewritten.bkp"
        fd = os.open(self.p(rw), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        for off in range(0, 4 << 20, dc.BLOCK):
            os.write(fd, data[off:off + dc.BLOCK])
        os.pwrite(fd, b"x" * 8192, 1 << 20)
        self.expect_state(rw, ("raw", "backuppiece", False), "after a rewrite in place")
        os.write(fd, data[4 << 20:5 << 20])
        os.fsync(fd)
        os.close(fd)
        rewritten = data[:1 << 20] + b"x" * 8192 + data[(1 << 20) + 8192:5 << 20]
        dc.compare(self.res, self.p(rw), rewritten, "rewritten in place")

        # O_APPEND onto a sealed file: back to raw, no stream, sealed whole again.
        rel = d + "/appended.bkp"
        dc.write_file(self.p(rel), data[:3 << 20], fsync=True)
        dc.check_sealed(self.res, [self.p(rel)], "before O_APPEND")
        fd = os.open(self.p(rel), os.O_WRONLY | os.O_APPEND)
        for off in range(3 << 20, 7 << 20, dc.BLOCK):
            os.write(fd, data[off:off + dc.BLOCK])
        self.expect_state(rel, ("raw", "backuppiece", False), "appended with O_APPEND")
        os.fsync(fd)
        os.close(fd)
        self.model[rel] = data[:7 << 20]

        self.rewritten = (rw, rewritten)
        self.check_all("streams ended before close")
        self.check_rewritten("rewritten in place, after the others were sealed")

    def check_rewritten(self, what):
        rel, data = self.rewritten
        st = dc.state(self.p(rel))
        self.res.check(st[0] == "raw", "%s: %s is %r" % (what, rel, st))
        dc.compare(self.res, self.p(rel), data, what)

    # --- more writers than streams ---------------------------------------------

    def crowd(self):
        n = STREAM_MAX * 3
        dirs = [CLASSES[c][0] for c in sorted(CLASSES)]
        jobs = []
        for k in range(n):
            d = dirs[k % len(dirs)]
            os.makedirs(self.p(d), exist_ok=True)
            ext = "arc" if "archivelog" in d else "bkp" if "backupset" in d else "dbf" if "datafile" in d else "dat"
            size = self.rng.randrange(4 << 20, 10 << 20)
            size -= size % 8192
            jobs.append(("%s/crowd%02d.%s" % (d, k, ext), self.make(size)))
        seen = []
        errors = []
        go = threading.Barrier(n + 1)

        def writer(rel, data):
            try:
                go.wait()
                dc.write_file(self.p(rel), data, fsync=True)
            except Exception as e:  # reported by the main thread
                errors.append("%s: %s" % (rel, e))

        hammered = []

        def hammer(stop, name):
            # The state xattr pins each inode while streams and seals pin and unpin it; the root,
            # which the kernel holds no reference to, is pinned by setattr and the xattr cache alone.
            # A file not created yet has no state (ENOENT); anything else fails the test.
            k = 0
            try:
                while not stop.is_set():
                    for rel, _ in jobs:
                        st = dc.state_words(self.p(rel))
                        if st[0] == "error" and st[1] != "ENOENT" or st[0] not in ("error", "raw", "sealed"):
                            raise RuntimeError("state of %s: %r" % (rel, st))
                    os.utime(self.fs.mnt)
                    os.setxattr(self.fs.mnt, name, b"%d" % k)
                    got = os.getxattr(self.fs.mnt, name)
                    if got != b"%d" % k:
                        raise RuntimeError("%s reads %r after setting %d" % (name, got, k))
                    k += 1
            except Exception as e:
                errors.append("hammer: %r" % e)
            hammered.append(k)

        before = self.status()
        threads = [threading.Thread(target=writer, args=j) for j in jobs]
        stop = threading.Event()
        hammers = [threading.Thread(target=hammer, args=(stop, "user.stream-test-%d" % n)) for n in range(2)]
        for t in threads + hammers:
            t.start()
        go.wait()
        while any(t.is_alive() for t in threads):
            st = self.status()
            seen.append(st["seal_streams"])
        for t in threads:
            t.join()
        stop.set()
        for t in hammers:
            t.join()
        self.res.check(not errors, "crowd writers or hammers failed: %s" % "; ".join(errors))
        self.res.check(len(hammered) == 2 and min(hammered) > 0, "hammer passes: %r" % hammered)
        for rel, data in jobs:
            self.model[rel] = data
        self.check_all("more writers than streams")
        after = self.status()
        print("crowd: %d writers at once, stream_max %d, at most %d streams seen in %d looks; %d sealed from "
              "a stream, %d whole" % (n, STREAM_MAX, max(seen or [0]), len(seen),
                                     after["seals_streamed"] - before["seals_streamed"],
                                     after["seals_whole"] - before["seals_whole"]), flush=True)
        self.res.check(max(seen or [0]) <= STREAM_MAX, "%d streams seen, stream_max is %d" % (max(seen), STREAM_MAX))
        self.res.check(after["seal_streams"] == 0, "streams left after the crowd: %r" % after["seal_streams"])

    def run(self):
        self.fs.start()
        self.every_class()
        self.ended()
        self.crowd()
        self.fs.stop()
        self.fs.start()
        self.check_all("after remount")
        self.check_rewritten("after remount")
        self.fs.stop()

        # Streaming off: no stream ever, files still sealed.
        self.fs.options = [o for o in OPTIONS if o != "seal_stream=1"] + ["seal_stream=0"]
        self.fs.start()
        rel = CLASSES["archivelog"][0] + "/off.arc"
        data = self.make(5 << 20)
        fd = os.open(self.p(rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, data[:1 << 20])
        self.expect_state(rel, ("raw", "archivelog", False), "seal_stream=0")
        os.write(fd, data[1 << 20:])
        os.fsync(fd)
        os.close(fd)
        self.model[rel] = data
        self.check_all("seal_stream=0")
        self.res.check(self.status()["seals_streamed"] == 0, "a seal from a stream with seal_stream=0")
        self.fs.stop()

    def cleanup(self):
        shutil.rmtree(self.src, ignore_errors=True)
        dc.cleanup(self.res, self.fs)


def main():
    harness.require_fuse()
    res = harness.Results("e2e-dedup-stream")
    test = StreamTest(res)
    try:
        test.run()
    except Exception:
        res.check(False, "exception")
        raise
    finally:
        test.cleanup()
    res.finish()


if __name__ == "__main__":
    main()
