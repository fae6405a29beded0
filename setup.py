"""Builds the Python package with the project's CMake: the module, and the OpenCV and ITK modules
that its file functions load (copied beside it)."""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE = pathlib.Path(__file__).resolve().parent
(SOURCE / "build" / "setuptools").mkdir(parents=True, exist_ok=True)


class CMakeBuild(build_ext):
    def build_extension(self, extension):
        # GRIDWARP_BUILD_DIR reuses a tree that is already configured (the README's `build`).
        tree = pathlib.Path(os.environ.get("GRIDWARP_BUILD_DIR", pathlib.Path(self.build_temp).resolve() / "cmake"))
        if not (tree / "CMakeCache.txt").exists():
            # Ninja where there is one: it keeps both cores busy to the end, where make left one idle.
            generator = ["-G", "Ninja"] if shutil.which("ninja") and "CMAKE_GENERATOR" not in os.environ else []
            subprocess.run(["cmake", *generator, "-S", str(SOURCE), "-B", str(tree), "-DCMAKE_BUILD_TYPE=Release",
                            "-DGRIDWARP_BUILD_TESTS=OFF", f"-DGRIDWARP_PYTHON={sys.executable}"], check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(tree), "--target", "gridwarp_python", "-j", jobs], check=True)
        built = tree / "python" / "gridwarp"
        target = pathlib.Path(self.get_ext_fullpath(extension.name)).parent
        target.mkdir(parents=True, exist_ok=True)
        for item in [*built.iterdir(), *(tree / "app").glob("gridwarp_*.so"), tree / "app" / "gridwarp-hdf5-reader"]:
            shutil.copy2(item, target / item.name)


setup(packages=["gridwarp"], package_dir={"gridwarp": "app/python/gridwarp"}, package_data={"gridwarp": ["*.pyi", "py.typed"]},
      ext_modules=[Extension("gridwarp._gridwarp", sources=[])], cmdclass={"build_ext": CMakeBuild},
      # Apart from the CMake trees under build/ (the README's build, build-aarch64, ...).
      options={"build": {"build_base": "build/setuptools"}, "egg_info": {"egg_base": "build/setuptools"}})
