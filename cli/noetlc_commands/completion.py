"""Print a shell completion script for `noetlc` (bash, zsh or fish).

eval "$(noetlc completion bash)"     # add to ~/.bashrc (zsh: the same in ~/.zshrc)
noetlc completion fish > ~/.config/fish/completions/noetlc.fish
"""

from __future__ import annotations

import argparse

from noetlc.cli.completion import add_arguments as add_arguments
from noetlc.cli.completion import script


def run(args: argparse.Namespace) -> int:
    from noetlc.cli.noetlc_main import build_parser

    print(script("noetlc", build_parser(), args.shell), end="")
    return 0
