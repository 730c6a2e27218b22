"""hatchling build hook: builds the fp8conv CLI and libfp8conv.so with the
Makefile (its python-files target) and puts them in the wheel, as
fp8conv/_bin/fp8conv and fp8conv/_lib/libfp8conv.so.  The wheel is tagged
py3-none-<platform>: its Python is pure and its binaries do not depend on the
Python version.

The environment (make wheel sets it; pip install . takes the defaults):
  FP8CONV_BUILD      the Makefile's build directory for the wheel (build/wheel)
  FP8CONV_HAVE_CUDA  1: with the CUDA kernels (needs nvcc); default 0, CPU only
  FP8CONV_MAKE_ARGS  more arguments for make (make wheel passes WERROR)
"""
import os
import shlex
import subprocess
import sysconfig

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class MakeHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version, build_data):
        if self.target_name != "wheel":
            return
        build = os.environ.get("FP8CONV_BUILD", "build/wheel")
        cmd = ["make", "-j%d" % (os.cpu_count() or 1), "BUILD=" + build,
               "HAVE_CUDA=" + os.environ.get("FP8CONV_HAVE_CUDA", "0")]
        cmd += shlex.split(os.environ.get("FP8CONV_MAKE_ARGS", "")) + ["python-files"]
        # A make above this one (make wheel) passes its jobserver, whose
        # descriptors pip does not keep open: this make takes its own -j.
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
        self.app.display_info(" ".join(cmd))
        subprocess.run(cmd, cwd=self.root, env=env, check=True)
        stage = os.path.join(self.root, build, "python")
        build_data["force_include"][os.path.join(stage, "fp8conv")] = "fp8conv/_bin/fp8conv"
        build_data["force_include"][os.path.join(stage, "libfp8conv.so")] = "fp8conv/_lib/libfp8conv.so"
        build_data["pure_python"] = False
        build_data["tag"] = "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")
