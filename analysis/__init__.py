"""Static analysis of playbooks: the rules behind `noetlc lint` (the rules are listed in docs/lint.md).

`lint_file(path)` compiles a playbook up to its net, runs every rule of `registry.RULES` and
returns the front end's diagnostics with the rules' findings. See `analysis/README.md`.
"""
