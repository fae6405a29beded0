#!/usr/bin/python3
"""cmake --install: the program, its modules, the man page and the bash and zsh completions, all
written from the program's own option definitions. The page renders without groff warnings, the
completions parse, and every option of every command is in each of them.

    /usr/bin/python3 tests/cli/test_install.py --gridwarp build/app/gridwarp --build-dir build
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_support import FolderTestCase, arguments, main, run  # noqa: E402


def options_of(command):
    """The option spellings a command's --help shows (an independent reading of its help text)."""
    text = run(command, "--help").stdout.split("Examples:")[0]
    names = set()
    for line in text.splitlines():
        match = re.match(r"^  (-[\w-]+(?:,--[\w-]+)?|--[\w-]+)", line)
        if match:
            names.update(match.group(1).split(","))
    return names


class Install(FolderTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.prefix = cls.path("prefix")
        result = subprocess.run(["cmake", "--install", arguments().build_dir, "--prefix", cls.prefix], capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr
        cls.commands = ["sample", "grid", "affine", "resize", "flow", "resample", "info", "batch", "convert-transform", "help"]

    def test_the_installed_program_runs_and_finds_its_modules(self):
        program = os.path.join(self.prefix, "bin", "gridwarp")
        self.assertTrue(os.access(program, os.X_OK))
        card = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "card.png")
        # A TIFF output goes through the OpenCV module, loaded from lib/gridwarp beside bin/.
        out = self.path("card.tif")
        result = subprocess.run([program, "affine", "-i", card, "-o", out, "--rotate", "90"], capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(os.path.getsize(out) > 0)

    def test_man_page_renders_and_lists_every_option(self):
        page = os.path.join(self.prefix, "share", "man", "man1", "gridwarp.1")
        result = subprocess.run(["groff", "-man", "-ww", "-z", page], capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr, "")
        text = subprocess.run(["groff", "-man", "-Tascii", "-P-c", "-P-b", "-P-u", page], capture_output=True, text=True).stdout
        text = text.replace("\u2010", "-")
        for command in self.commands:
            self.assertTrue("gridwarp " + command in text, command)
            for name in options_of(command):
                self.assertTrue(name in text, (command, name))

    def test_bash_completion_completes_commands_options_and_values(self):
        script = os.path.join(self.prefix, "share", "bash-completion", "completions", "gridwarp")

        def complete(*words):
            probe = (f"source {script}; COMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}; _gridwarp; "
                     "printf '%s\\n' \"${COMPREPLY[@]}\"")
            return subprocess.run(["bash", "-c", probe], capture_output=True, text=True, cwd=self.folder).stdout.split()

        self.assertEqual(sorted(complete("gridwarp", "res")), ["resample", "resize"])
        self.assertEqual(sorted(complete("gridwarp", "resize", "--fi")), ["--fill", "--fit"])
        self.assertEqual(complete("gridwarp", "resample", "--padding", "re"), ["reflection"])
        for command in self.commands:
            offered = set(complete("gridwarp", command, "-"))
            self.assertTrue(options_of(command) <= offered, (command, options_of(command) - offered))

    def test_zsh_completion_parses_and_lists_every_option(self):
        script = os.path.join(self.prefix, "share", "zsh", "vendor-completions", "_gridwarp")
        with open(script) as f:
            text = f.read()
        self.assertTrue(text.startswith("#compdef gridwarp"))
        if shutil.which("zsh"):
            result = subprocess.run(["zsh", "-n", script], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
        for command in self.commands:
            block = text[text.index(f"        {command})"):]
            block = block[:block.index(";;")]
            for name in options_of(command):
                self.assertIn(name, block, (command, name))


if __name__ == "__main__":
    main(lambda parser: parser.add_argument("--build-dir", required=True))
