"""Print a shell completion script for `noetl-vm` (bash, zsh or fish).

eval "$(noetl-vm completion bash)"   # add to ~/.bashrc (zsh: the same in ~/.zshrc)
noetl-vm completion fish > ~/.config/fish/completions/noetl-vm.fish
"""

from __future__ import annotations

import argparse

from noetlc.cli.completion import add_arguments as add_arguments
from noetlc.cli.completion import script


def run(args: argparse.Namespace) -> int:
    from noetlc.cli.vm_main import build_parser

    print(script("noetl-vm", build_parser(), args.shell), end="")
    return 0
