#!/usr/bin/env python3
"""For each NAME, copies directory SRC to OUT/NAME-KIND with NAME replaced by
each hostile KIND (see hostile-files.sh): dir, fifo, locked, growing.

  replace-each.py SRC OUT NAME...
"""
import os
import shutil
import sys

src, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
for name in names:
    for kind in ("dir", "fifo", "locked", "growing"):
        dst = os.path.join(out, f"{name}-{kind}")
        shutil.copytree(src, dst)
        os.chmod(dst, 0o755)
        path = os.path.join(dst, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)
        if kind == "dir":
            os.mkdir(path)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "locked":
            shutil.copyfile(os.path.join(src, name) if os.path.isfile(os.path.join(src, name))
                            else __file__, path)
            os.chmod(path, 0)
        else:
            os.symlink("/proc/self/status", path)
