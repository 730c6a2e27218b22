"""The ``fp8conv`` command a pip install puts on PATH: it replaces itself
with the binary bundled in the package, so that arguments, exit status,
signals, standard streams and the terminal's progress bar are the binary's."""
import os
import sys

from . import binary_path


def main() -> None:
    exe = binary_path()
    try:
        os.execv(exe, ["fp8conv"] + sys.argv[1:])
    except OSError as e:
        sys.exit("fp8conv: cannot run %s: %s" % (exe, e.strerror))
