"""Static analysis of playbooks: the rules behind `noetlc lint` (DESIGN §3.1).

`lint_file(path)` compiles a playbook up to its net, runs every rule of `registry.RULES` and
returns the front end's diagnostics with the rules' findings. See `analysis/README.md`.
"""
