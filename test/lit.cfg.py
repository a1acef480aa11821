# -*- Python -*-
# lit configuration of the memopt test suite.

import os
import shutil

import lit.formats
from lit.llvm import llvm_config

config.name = "memopt"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test", ".py"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "Inputs", "lit.local.cfg"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.memopt_obj_root, "test")

llvm_config.use_default_substitutions()
# The BLAS settings pass through, so that scripts/check-blas-variants.sh
# can run the parity tests on other kernels and thread counts.
llvm_config.with_system_environment(["HOME", "TMPDIR", "OPENBLAS_CORETYPE",
                                     "OPENBLAS_NUM_THREADS",
                                     "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS",
                                     "MEMOPT_NUM_THREADS"])

# Tools come from the build (memopt-*) and from LLVM (FileCheck, not, ...).
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.memopt_tools_dir, append_path=True)

config.substitutions.append(("%memopt_src_root", config.memopt_src_root))
config.substitutions.append(("%memopt_obj_root", config.memopt_obj_root))
config.substitutions.append(("%examples",
                             os.path.join(config.memopt_src_root, "examples")))

# Flags that a test's own C++ compile needs to link memopt's archives: the
# sanitizer flags in a -DMEMOPT_ENABLE_SANITIZERS=ON build, else nothing.
config.substitutions.append(("%host_cxxflags",
                             config.memopt_sanitizer_cxxflags))
# The libraries the host runtime's archive needs after it on a link line
# (memopt-compile passes the same): OpenBLAS, oneDNN and its OpenMP runtime.
config.substitutions.append(("%host_runtime_libs",
                             "-lopenblas -ldnnl -lgomp -lm -pthread"))

# In a sanitized build every report goes to stderr and aborts the process:
# a signal, so that neither `not` nor an expected exit code of 1 can mistake
# a sanitizer error for the diagnostic a test expects. Leaks of MLIR's and
# LLVM's own allocations are suppressed (test/lsan.supp says which and why);
# none of memopt's are.
if config.memopt_sanitized:
    config.available_features.add("sanitized")
    config.environment["ASAN_OPTIONS"] = ":".join([
        "detect_leaks=1", "abort_on_error=1", "strict_string_checks=1",
        "detect_stack_use_after_return=1", "check_initialization_order=1",
        "allow_user_poisoning=0"])
    config.environment["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1:abort_on_error=1"
    config.environment["LSAN_OPTIONS"] = "suppressions=" + os.path.join(
        config.memopt_src_root, "test", "lsan.supp")
    symbolizer = os.path.join(config.llvm_tools_dir, "llvm-symbolizer")
    if os.path.exists(symbolizer):
        config.environment["ASAN_SYMBOLIZER_PATH"] = symbolizer
    # The tests' own compiles (`c++ ... %host_cxxflags`) and memopt-compile's
    # (--cxx=c++) link memopt's instrumented archives: they must use the
    # compiler of the build (clang++-22 in the fuzzing build), whose
    # sanitizer runtime the archives expect. A `c++` first on PATH names it.
    cxx_dir = os.path.join(config.memopt_obj_root, "test", "host-cxx")
    cxx_link = os.path.join(cxx_dir, "c++")
    os.makedirs(cxx_dir, exist_ok=True)
    if os.path.realpath(cxx_link) != os.path.realpath(
            config.memopt_cxx_compiler):
        if os.path.lexists(cxx_link):
            os.remove(cxx_link)
        os.symlink(config.memopt_cxx_compiler, cxx_link)
    llvm_config.with_environment("PATH", cxx_dir, append_path=True)

# The exporter runs under Debian's Python, which has torch 1.13.
python = "/usr/bin/python3"
config.substitutions.append(("%python", python))
llvm_config.with_environment(
    "PYTHONPATH", os.path.join(config.memopt_src_root, "python"),
    append_path=True)
# The exporter, parity and differential tests need it: a machine without it
# is not set up (scripts/setup.sh installs it), so the suite stops here
# rather than reporting those tests as unsupported.
import subprocess
probe = subprocess.run([python, "-c", "import torch"], capture_output=True,
                       text=True)
if probe.returncode != 0:
    lit_config.fatal("torch is not importable by %s (%s): run "
                     "scripts/setup.sh" % (python, (probe.stderr.strip()
                                                   .splitlines() or ["?"])[-1]))
config.available_features.add("torch")

# The HTML memory report is checked by rendering it in headless Chromium
# (scripts/setup.sh installs it).
if shutil.which("chromium"):
    config.available_features.add("chromium")
else:
    lit_config.note("chromium is not on PATH: the HTML report test is "
                    "unsupported")

# Data parallelism on the host: memopt built with MPI (libopenmpi-dev) and
# mpirun on PATH (openmpi-bin); scripts/setup.sh installs both.
if getattr(config, "memopt_mpi_enabled", False) and shutil.which("mpirun"):
    config.available_features.add("mpi")
else:
    lit_config.note("memopt was built without MPI or mpirun is not on PATH: "
                    "the data-parallel tests are unsupported")

# The CUDA target. `cuda`: the CUDA runtime is built and nvcc is there, so
# --target=cuda compiles and links (no GPU needed). `cuda-gpu`: an NVIDIA
# GPU is visible, so GPU tests run (scripts/gpu-check.sh).
config.substitutions.append(("%cuda_inputs", os.path.join(
    config.memopt_src_root, "test", "Target", "Inputs", "cuda_inputs.py")))
# The architectures the CUDA runtime was built for (MEMOPT_CUDA_ARCHITECTURES,
# which --cuda-arch must be a subset of): the first, and all of them.
cuda_archs = [a for a in getattr(config, "memopt_cuda_architectures",
                                 "").split(";") if a]
config.substitutions.append(("%cuda_arch_first",
                             cuda_archs[0] if cuda_archs else ""))
config.substitutions.append(("%cuda_arch_all", ";".join(
    "sm_" + a for a in cuda_archs)))
if not getattr(config, "memopt_cuda_enabled", False):
    lit_config.note("the CUDA runtime is not built (MEMOPT_ENABLE_CUDA=OFF): "
                    "CUDA tests are unsupported")
elif not os.access(config.memopt_nvcc, os.X_OK):
    lit_config.note("nvcc ('%s') is not executable: CUDA tests are "
                    "unsupported" % config.memopt_nvcc)
else:
    config.available_features.add("cuda")
    reason = None
    smi = shutil.which("nvidia-smi")
    if not smi:
        reason = "nvidia-smi is not on PATH"
    else:
        try:
            listing = subprocess.run([smi, "-L"], capture_output=True,
                                     text=True, timeout=60)
            if listing.returncode != 0 or "GPU " not in listing.stdout:
                reason = "nvidia-smi -L lists no GPU (%s)" % (
                    (listing.stderr or listing.stdout).strip()[:200])
        except Exception as error:
            reason = "nvidia-smi -L failed (%s)" % error
    if reason:
        lit_config.note(reason + ": GPU tests (cuda-gpu) are unsupported")
    else:
        config.available_features.add("cuda-gpu")
