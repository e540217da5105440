"""Build the Cython engine (sievesim._core). Metadata lives in pyproject.toml."""
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [
    Extension(
        "sievesim._core._engine",
        ["sievesim/_core/_engine.pyx"],
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    ),
    Extension(
        "sievesim._core._traceparse",
        ["sievesim/_core/_traceparse.pyx"],
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    ),
    Extension(
        "sievesim.policies._sieve_kernel",
        ["sievesim/policies/_sieve_kernel.pyx"],
        extra_compile_args=["-O3"],
    ),
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    ),
)
