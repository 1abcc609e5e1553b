"""Playbooks the console's browser tests run: a chain of python steps (the last may fail),
a loop whose one item fails."""

from __future__ import annotations


def chain(n: int, name: str, fail_last: bool = False) -> str:
    lines = [
        "apiVersion: noetl.io/v2",
        "kind: Playbook",
        f"metadata: {{name: {name}, path: demo/{name}}}",
        "workload: {pause: 0}",
        "workflow:",
    ]
    for i in range(n):
        lines += [
            f"  - step: s{i}",
            "    tool:",
            "      kind: python",
            '      input: {p: "{{ workload.pause }}"}',
            "      code: |",
            "        import time",
            f"        print('step s{i} says hello')",
            "        time.sleep(p)",
        ]
        if fail_last and i == n - 1:
            lines.append(f"        raise ValueError('deliberate failure in s{i}')")
        lines.append(f"        result = {{'i': {i}}}")
        if i < n - 1:
            lines.append(f"    next: s{i + 1}")
    return "\n".join(lines) + "\n"


def loop(n: int) -> str:
    return f"""apiVersion: noetl.io/v2
kind: Playbook
metadata: {{name: loop{n}, path: demo/loop{n}}}
workload: {{pause: 0, bad: -1}}
workflow:
  - step: start
    tool: {{kind: noop}}
    next: each
  - step: each
    loop: {{in: "{{{{ range({n}) | list }}}}", iterator: n, spec: {{mode: parallel, max_in_flight: 4}}}}
    tool:
      kind: python
      input: {{n: "{{{{ iter.n }}}}", p: "{{{{ workload.pause }}}}", bad: "{{{{ workload.bad }}}}"}}
      code: |
        import time
        print(f"item {{n}}")
        time.sleep(p)
        if n == bad:
            raise RuntimeError(f"item {{n}} is bad")
        result = n * 2
    next: done
  - step: done
    tool: {{kind: noop}}
"""
